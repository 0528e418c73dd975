"""Sync tools run on ray_harness's own tool threads (not the loop's default executor)."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from ray_harness import Agent, tool
from ray_harness.testing import ScriptedModel, text, tool_calls
from ray_harness.tools._threads import run_in_tool_thread

_REQUEST = contextvars.ContextVar("request", default="none")


def test_more_sync_tools_run_at_once_than_the_default_executor_allows() -> None:
    # The default executor has min(32, cpus + 4) threads: 6 on a 2-core machine.
    gate = threading.Barrier(24, timeout=5)

    def wait_for_all() -> int:
        return gate.wait()

    async def main() -> list[int]:
        return await asyncio.gather(*(run_in_tool_thread(wait_for_all) for _ in range(24)))

    assert sorted(asyncio.run(main())) == list(range(24))


def test_outcome_exception_and_context_travel() -> None:
    def read(prefix: str) -> str:
        return prefix + _REQUEST.get()

    def fail() -> None:
        raise KeyError("missing")

    async def main() -> str:
        _REQUEST.set("r-17")
        with pytest.raises(KeyError, match="missing"):
            await run_in_tool_thread(fail)
        return str(await run_in_tool_thread(read, prefix="id="))

    assert asyncio.run(main()) == "id=r-17"


def test_a_cancelled_caller_stops_waiting_and_later_calls_still_work() -> None:
    release = threading.Event()

    async def main() -> str:
        waiting = asyncio.ensure_future(run_in_tool_thread(release.wait, timeout=5))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()  # the thread finishes later and finds nobody waiting
        await asyncio.sleep(0.05)
        return str(await run_in_tool_thread(_upper, value="ok"))

    assert asyncio.run(main()) == "OK"


def _upper(value: str) -> str:
    return value.upper()


def test_concurrent_sync_tools_of_one_agent_overlap() -> None:
    # Ten tools must all be inside at once to pass: with six-thread waves (asyncio.to_thread's default on two
    # cores) or one after the other, the barrier breaks.
    barrier = threading.Barrier(10, timeout=60)

    @tool
    def slow(n: int) -> str:
        """Wait for the other nine."""
        barrier.wait()
        return f"done {n}"

    calls = [("slow", {"n": i}) for i in range(10)]
    agent = Agent(ScriptedModel(tool_calls(*calls), text("all done")), tools=[slow])
    result = agent("go")
    assert str(result).strip() == "all done"
    results = [block["toolResult"] for block in agent.messages[2]["content"]]
    assert [r["content"][0]["text"] for r in results] == [f"done {i}" for i in range(10)]


def test_one_caller_at_a_time_keeps_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # A caller woken by a call's outcome may submit its next call before the thread is back at the queue: the
    # thread must already count as idle then, or each such call starts one more thread.
    from ray_harness.tools import _threads

    pool = _threads._ToolThreads()
    monkeypatch.setattr(_threads, "_THREADS", pool)

    async def main() -> set[int]:
        return {await run_in_tool_thread(threading.get_ident) for _ in range(500)}

    assert len(asyncio.run(main())) == 1
    assert pool._threads == 1
