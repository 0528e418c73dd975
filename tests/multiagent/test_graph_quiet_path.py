"""The quiet path of a Graph (``invoke_async``): what a node costs in loop structure, and that it keeps the order.

A quiet invocation of a chain runs each node in the invocation's own task; the graph loop's steps and the node
runner's quiet run are coroutines, so its async generators do not grow with the number of nodes. The streamed path keeps its events where they were:
between the state change they report and the hooks that follow it.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections import Counter
from typing import Any

from ray_harness import GraphBuilder, Status
from ray_harness._signal import Signal
from ray_harness.hooks import AfterNodeCallEvent, BeforeNodeCallEvent
from ray_harness.multiagent import NodeResult
from ray_harness.multiagent.node_runner import LocalNodeRunner
from ray_harness.testing import text
from tests.multiagent.conftest import make_agent

_LOOP_FILES = ("multiagent/graph.py", "multiagent/_graph_loop.py", "multiagent/node_runner.py")


def _chain(length: int, runtime: str) -> Any:
    builder = GraphBuilder()
    names = [f"n{index}" for index in range(length)]
    for name in names:
        builder.add_node(make_agent(name, text(f"{name} done")), name)
    for source, target in itertools.pairwise(names):
        builder.add_edge(source, target)
    return builder.build(runtime=runtime)


async def _loop_generators(graph: Any) -> tuple[Any, Counter[str]]:
    """Invoke ``graph`` quietly, counting the async generators of the graph's own modules (and its runner's) it starts."""
    started: Counter[str] = Counter()
    hooks = sys.get_asyncgen_hooks()

    def firstiter(generator: Any) -> None:
        filename = generator.ag_code.co_filename.replace("\\", "/")
        if filename.endswith(_LOOP_FILES):
            started[generator.ag_code.co_name] += 1
        if hooks.firstiter is not None:
            hooks.firstiter(generator)

    sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=hooks.finalizer)
    try:
        result = await graph.invoke_async("task")
    finally:
        sys.set_asyncgen_hooks(*hooks)
    return result, started


async def test_a_quiet_chain_costs_the_loop_no_generator_per_node() -> None:
    short_result, short = await _loop_generators(_chain(2, "local"))
    long_result, long = await _loop_generators(_chain(5, "local"))
    assert short_result.status == long_result.status == Status.COMPLETED
    assert [node.node_id for node in long_result.execution_order] == ["n0", "n1", "n2", "n3", "n4"]
    # One generator for the invocation and one for its loop, whatever the chain's length; none of the node runner.
    assert short == long == Counter({"_stream": 1, "run_nodes": 1})


async def test_a_quiet_node_result_is_what_the_quiet_node_run_yields() -> None:
    runner = LocalNodeRunner()
    runner.bind({"a": make_agent("a", text("answer"))})
    result = await runner.node_result("a", "task", {})
    assert isinstance(result, NodeResult) and result.status == Status.COMPLETED and str(result) == "answer\n"
    assert result.execution_count == 1 and not runner._running and not runner._signals


def test_a_node_signal_is_an_event_that_wakes_its_waiters() -> None:
    signal = Signal()
    assert isinstance(signal, threading.Event) and not signal.is_set() and not signal.wait(0)
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(signal.wait(30)))
    waiter.start()
    signal.set()
    waiter.join()
    assert woke == [True] and signal.is_set()
    signal.clear()
    assert not signal.is_set() and not signal.wait(0)


async def test_a_quiet_node_run_yields_only_its_result() -> None:
    runner = LocalNodeRunner()
    runner.bind({"a": make_agent("a", text("answer"))})
    items = [item async for item in runner.run_node("a", "task", {}, events="result")]
    assert len(items) == 1 and isinstance(items[0], NodeResult)
    assert items[0].status == Status.COMPLETED and str(items[0]) == "answer\n"
    streamed = LocalNodeRunner()
    streamed.bind({"a": make_agent("a", text("answer"))})
    everything = [item async for item in streamed.run_node("a", "task", {}, events="all")]
    assert isinstance(everything[-1], NodeResult) and len(everything) > 1


async def test_streamed_events_come_between_the_state_change_and_the_hooks(runtime: str) -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("x")), "a")
    builder.add_node(make_agent("b", text("y")), "b")
    builder.add_node(make_agent("c", text("z")), "c")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.set_failure_policy("continue")
    graph = builder.build(runtime=runtime)
    seen: list[str] = []

    def before(event: BeforeNodeCallEvent) -> None:
        if event.node_id == "b":
            event.cancel_node = "not b"
        seen.append(f"before {event.node_id}")

    def after(event: AfterNodeCallEvent) -> None:
        seen.append(f"after {event.node_id}")

    graph.add_hook(before)
    graph.add_hook(after)
    async for event in graph.stream_async("t"):
        node_id = event.get("node_id")
        if event["type"] == "multiagent_node_cancel":
            # Told before the cancelled result is recorded.
            seen.append(f"cancel {node_id} recorded={node_id in graph.state.results}")
        elif event["type"] == "multiagent_node_stop":
            # Told after the result is recorded, before the AfterNodeCallEvent.
            seen.append(f"stop {node_id} recorded={node_id in graph.state.results}")
    assert seen == ["before a", "stop a recorded=True", "after a",
                    "before b", "cancel b recorded=False", "stop b recorded=True", "after b"]
    assert graph.state.results["b"].status == Status.CANCELLED
    assert "c" not in graph.state.results or graph.state.results["c"].status == Status.CANCELLED
