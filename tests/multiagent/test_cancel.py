from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from ray_harness import GraphBuilder, Status, Swarm
from ray_harness.multiagent import MultiAgentResult
from ray_harness.testing import text
from tests.closing import BOTH_ENDED, two_waiting_tools
from tests.multiagent.conftest import make_agent


async def test_graph_cancel_returns_cancelled_and_stops_every_running_node(runtime: str) -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("a", delay=120)), "a")
    builder.add_node(make_agent("b", text("b", delay=120)), "b")
    builder.add_node(make_agent("after", text("never")), "after")
    builder.add_edge("a", "after")
    graph = builder.build(runtime=runtime)
    graph.cancel()  # idle: no effect on the next run
    task = asyncio.create_task(graph.invoke_async("t"))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    graph.cancel()
    result = await asyncio.wait_for(task, 60)
    assert time.monotonic() - started < 60  # the nodes' models would take 120 s
    assert result.status == Status.CANCELLED
    assert {result.results["a"].status, result.results["b"].status} == {Status.CANCELLED}
    assert "after" not in result.results
    assert graph.nodes["a"].executor.messages[-1]["role"] == "assistant"

    # The next invocation is not poisoned by the earlier cancel.
    graph.nodes["a"].executor.model._steps.append(text("a again"))
    graph.nodes["b"].executor.model._steps.append(text("b again"))
    graph.nodes["after"].executor.model._steps = [text("after")]
    again = await graph.invoke_async("t2")
    assert again.status == Status.COMPLETED


async def test_swarm_cancel_returns_cancelled(runtime: str) -> None:
    swarm = Swarm([make_agent("slow", text("zzz", delay=120))], runtime=runtime)
    task = asyncio.create_task(swarm.invoke_async("t"))
    await asyncio.sleep(0.2)
    swarm.cancel()
    result = await asyncio.wait_for(task, 60)  # the member's model would take 120 s
    assert result.status == Status.CANCELLED
    assert result.results["slow"].status == Status.CANCELLED


async def test_concurrent_invocations_of_one_graph_are_refused(runtime: str) -> None:
    from ray_harness.types.exceptions import ConcurrencyException

    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("a", delay=0.3)), "a")
    graph = builder.build(runtime=runtime)
    task = asyncio.create_task(graph.invoke_async("t"))
    await asyncio.sleep(0.05)
    try:
        await graph.invoke_async("t")
    except ConcurrencyException:
        pass
    else:  # pragma: no cover
        raise AssertionError("second invocation was not refused")
    assert (await task).status == Status.COMPLETED


@pytest.mark.parametrize("kind", ["graph", "swarm"])
async def test_a_stream_closed_mid_node_has_ended_when_aclose_returns(kind: str) -> None:
    """``aclose()`` on a Graph's/Swarm's stream returns once the run is over: the node's tools ended, its history
    rolled back, the orchestrator free for the next invocation (the inner layers used to be left to the GC)."""
    tools: list[str] = []
    agent = two_waiting_tools(tools)
    if kind == "graph":
        builder = GraphBuilder()
        builder.add_node(agent, "a")
        orchestrator: Any = builder.build(runtime="local")
    else:
        orchestrator = Swarm([agent], runtime="local")
    stream = orchestrator.stream_async("t")
    async for event in stream:
        if event.get("type") == "multiagent_node_stream" and event["event"].get("type") == "tool_start" and tools:
            break
    await stream.aclose()
    assert sorted(tools) == BOTH_ENDED
    assert agent.messages == []
    assert (await orchestrator.invoke_async("again")).status == Status.COMPLETED


# -- a quiet invocation runs a batch of one node in its own task (no node task): cancels still mean the same ----


def lone_node_chain(first: Any) -> GraphBuilder:
    """``first`` -> ``after``: every batch of the quiet invocation is one node."""
    builder = GraphBuilder()
    builder.add_node(make_agent("first", first), "first")
    builder.add_node(make_agent("after", text("after")), "after")
    builder.add_edge("first", "after")
    return builder


async def test_graph_cancel_stops_a_lone_running_node(runtime: str) -> None:
    graph = lone_node_chain(text("zzz", delay=120)).build(runtime=runtime)
    task = asyncio.create_task(graph.invoke_async("t"))
    await asyncio.sleep(0.2)
    graph.cancel()
    result = await asyncio.wait_for(task, 60)  # the model would take 120 s
    assert result.status == Status.CANCELLED
    assert result.results["first"].status == Status.CANCELLED
    assert "after" not in result.results


async def test_a_deadline_around_the_invocation_raises_timeout_error(runtime: str) -> None:
    graph = lone_node_chain(text("zzz", delay=120)).build(runtime=runtime)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await graph.invoke_async("t")
    graph.nodes["first"].executor.model._steps.append(text("first again"))
    assert (await graph.invoke_async("t")).status == Status.COMPLETED  # the graph is free again


async def test_cancelling_the_callers_task_stops_a_lone_node_and_is_not_swallowed() -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    async def slow(call: Any) -> Any:
        started.set()
        try:
            await asyncio.sleep(120)
        finally:
            stopped.set()
        return text("never")

    graph = lone_node_chain(slow).build(runtime="local")
    task = asyncio.create_task(graph.invoke_async("t"))
    await asyncio.wait_for(started.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled() and stopped.is_set()
    assert graph.nodes["first"].executor.messages == []
    assert "after" not in graph.state.results


async def test_a_nested_graphs_execution_timeout_does_not_cancel_its_caller(runtime: str) -> None:
    inner = GraphBuilder()
    inner.add_node(make_agent("slow", text("zzz", delay=120)), "slow")
    outer = GraphBuilder()
    outer.add_node(inner.set_execution_timeout(0.3).build(runtime="local"), "inner")
    outer.add_node(make_agent("after", text("after")), "after")
    outer.add_edge("inner", "after")
    result = await asyncio.wait_for(outer.set_failure_policy("continue").build(runtime=runtime).invoke_async("t"), 60)
    nested = result.results["inner"].result
    assert isinstance(nested, MultiAgentResult)
    assert nested.status == Status.FAILED and nested.results["slow"].status == Status.CANCELLED
    assert "after" in result.results  # the outer invocation went on
