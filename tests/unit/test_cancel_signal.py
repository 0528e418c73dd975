"""The runner's CancelSignal and the Graph-as-row target that reacts to it (no Ray)."""

from __future__ import annotations

import asyncio
import threading

from ray_harness import Agent
from ray_harness.multiagent import GraphBuilder, Status
from ray_harness.runtime._signal import CancelSignal
from ray_harness.runtime._targets import MultiAgentTarget
from ray_harness.testing import ScriptedModel, text


def test_callbacks_run_once_on_the_loop_when_set_from_another_thread() -> None:
    async def main() -> tuple[list[str], bool]:
        loop = asyncio.get_running_loop()
        signal = CancelSignal()
        calls: list[str] = []
        loop_thread = threading.get_ident()
        signal.on_set(loop, lambda: calls.append("a" if threading.get_ident() == loop_thread else "wrong thread"))
        remove = signal.on_set(loop, lambda: calls.append("removed"))
        remove()
        setter = threading.Thread(target=signal.set)
        setter.start()
        setter.join()
        signal.set()  # a second set calls nothing again
        await asyncio.sleep(0.01)
        signal.on_set(loop, lambda: calls.append("late"))  # already set: runs soon
        await asyncio.sleep(0.01)
        return calls, signal.is_set()

    assert asyncio.run(main()) == (["a", "late"], True)


def test_a_graph_row_is_cancelled_by_its_signal_without_polling() -> None:
    slow = ScriptedModel(text("never", delay=300.0))
    builder = GraphBuilder()
    builder.add_node(Agent(slow, name="slow"), "slow")
    target = MultiAgentTarget(builder.build(runtime="local"))

    async def main() -> Status:
        signal = CancelSignal()
        result = None

        async def consume() -> None:
            nonlocal result
            async for event in target.stream_async("go", cancel_signal=signal):
                if event.get("type") == "result":
                    result = event["result"]

        run = asyncio.ensure_future(consume())
        await asyncio.sleep(0.1)
        threading.Thread(target=signal.set).start()
        await asyncio.wait_for(run, 120)  # the model would answer after 300 s
        assert result is not None
        return Status(result.status)

    assert asyncio.run(main()) == Status.CANCELLED


def test_it_waits_clears_and_wakes_a_waiter_as_a_threading_event_does() -> None:
    signal = CancelSignal()
    assert isinstance(signal, threading.Event) and not signal.is_set() and signal.wait(0) is False
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(signal.wait(60)))
    waiter.start()
    threading.Thread(target=signal.set).start()
    waiter.join()
    assert woken == [True] and signal.is_set()
    signal.clear()
    assert not signal.is_set() and signal.wait(0.01) is False
