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


def fast_then_slow() -> GraphBuilder:
    builder = GraphBuilder()
    builder.add_node(make_agent("fast", text("fast")), "fast")
    builder.add_node(make_agent("slow", text("zzz", delay=120)), "slow")
    builder.add_edge("fast", "slow")
    return builder


def assert_stopped_at_slow(graph: Any) -> None:
    """What the graph shows after its run was stopped while ``slow`` ran: ``fast`` ran, ``slow`` did not finish."""
    assert graph.state.status == Status.FAILED
    assert graph.nodes["fast"].execution_status == Status.COMPLETED
    assert graph.nodes["slow"].execution_status == Status.CANCELLED
    assert str(graph.state.results["slow"].result) == "Node 'slow' was cancelled"
    assert [node.node_id for node in graph.state.execution_order] == ["fast"]
    assert [m["role"] for m in graph.nodes["fast"].executor.messages] == ["user", "assistant"]
    assert graph.nodes["slow"].executor.messages == []


async def test_a_graph_stream_closed_mid_run_shows_what_ran_and_what_it_stopped(runtime: str) -> None:
    """With ``runtime="ray"`` the driver's objects used to keep their state from before the run (nodes PENDING)."""
    graph = fast_then_slow().build(runtime=runtime)
    stream = graph.stream_async("t")
    async for event in stream:
        if event["type"] == "multiagent_node_start" and event["node_id"] == "slow":
            break
    await stream.aclose()
    assert_stopped_at_slow(graph)


async def test_cancelling_the_task_reading_a_graph_stream_shows_what_ran_and_what_it_stopped(runtime: str) -> None:
    graph = fast_then_slow().build(runtime=runtime)
    slow_started = asyncio.Event()

    async def read() -> None:
        async for event in graph.stream_async("t"):
            if event["type"] == "multiagent_node_start" and event["node_id"] == "slow":
                slow_started.set()

    task = asyncio.create_task(read())
    await asyncio.wait_for(slow_started.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_stopped_at_slow(graph)


async def test_a_swarm_stream_closed_mid_run_ends_failed_with_its_member_cancelled(runtime: str) -> None:
    """The swarm used to stay EXECUTING, its running member unrecorded (a Graph ends FAILED, the node CANCELLED)."""
    swarm = Swarm([make_agent("slow", text("zzz", delay=120))], runtime=runtime)
    stream = swarm.stream_async("t")
    async for event in stream:
        if event["type"] == "multiagent_node_start":
            break
    await stream.aclose()
    assert swarm.state.completion_status == Status.FAILED
    assert swarm.state.results["slow"].status == Status.CANCELLED
    assert str(swarm.state.results["slow"].result) == "Node 'slow' was cancelled"
    assert swarm.state.node_history == []
    assert swarm.nodes["slow"].executor.messages == []


@pytest.mark.parametrize("kind", ["graph", "swarm"])
async def test_a_stream_closed_mid_run_keeps_node_hooks_paired(kind: str) -> None:
    """As in Strands, the node running when the caller closes gets its ``AfterNodeCallEvent`` (it used to get none)."""
    from ray_harness.hooks import AfterNodeCallEvent, BeforeNodeCallEvent

    seen: list[tuple[str, str]] = []
    orchestrator: Any = (fast_then_slow().build(runtime="local") if kind == "graph"
                         else Swarm([make_agent("slow", text("zzz", delay=120))], runtime="local"))
    orchestrator.hooks.add_callback(BeforeNodeCallEvent, lambda event: seen.append(("before", event.node_id)))
    orchestrator.hooks.add_callback(AfterNodeCallEvent, lambda event: seen.append(("after", event.node_id)))
    stream = orchestrator.stream_async("t")
    async for event in stream:
        if event["type"] == "multiagent_node_start" and event["node_id"] == "slow":
            break
    await stream.aclose()
    expected = [("before", "slow"), ("after", "slow")]
    assert seen == ([("before", "fast"), ("after", "fast"), *expected] if kind == "graph" else expected)


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
