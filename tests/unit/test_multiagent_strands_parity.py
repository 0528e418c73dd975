"""Strands' multi-agent surface: ``Status.DISPATCHED``, ``should_continue`` on the states, ``reset_executor_state``."""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Agent, GraphBuilder, Swarm
from ray_harness.hooks import BeforeNodeCallEvent
from ray_harness.multiagent import GraphState, Status
from ray_harness.multiagent.graph_model import GraphNode
from ray_harness.multiagent.swarm import SwarmState
from ray_harness.multiagent.swarm_model import SwarmNode
from ray_harness.testing import ScriptedModel, text


def _agent(name: str, *replies: str) -> Agent:
    return Agent(ScriptedModel(*(text(reply) for reply in replies or (f"{name} ok",))), name=name)


def _two_entry_graph(*replies: str) -> Any:
    """Entry points ``a`` and ``b`` (one parallel batch), both feeding ``join``."""
    builder = GraphBuilder()
    for name in ("a", "b", "join"):
        builder.add_node(_agent(name, *replies), name)
    builder.add_edge("a", "join")
    builder.add_edge("b", "join")
    return builder.build(runtime="local")


# -- Status.DISPATCHED ------------------------------------------------------------------------------------------


def test_dispatched_is_strands_status_value() -> None:
    assert Status("dispatched") is Status.DISPATCHED


async def test_a_batch_sibling_not_started_yet_is_dispatched_and_a_restore_keeps_it() -> None:
    graph = _two_entry_graph()
    seen: dict[str, Any] = {}

    def before(event: BeforeNodeCallEvent) -> None:
        if event.node_id == "a":  # a's task runs first; b's task has not started
            seen["statuses"] = {node_id: node.execution_status for node_id, node in graph.nodes.items()}
            seen["saved"] = graph.serialize_state()

    graph.add_hook(before, BeforeNodeCallEvent)
    result = await graph.invoke_async("task")

    assert result.status == Status.COMPLETED
    assert seen["statuses"] == {"a": Status.EXECUTING, "b": Status.DISPATCHED, "join": Status.PENDING}
    # Restored elsewhere, both in-flight nodes run again and the join after them.
    again = _two_entry_graph()
    again.deserialize_state(seen["saved"])
    resumed = await again.invoke_async("task")
    assert resumed.status == Status.COMPLETED
    assert {node.node_id for node in resumed.execution_order} == {"a", "b", "join"}


async def test_a_dispatched_node_left_by_its_caller_ends_cancelled() -> None:
    builder = GraphBuilder()
    for name in ("a", "b"):
        builder.add_node(_agent(name), name)
    builder.add_edge("a", "b")
    graph = builder.build(runtime="local")
    stream = graph.stream_async("task")
    async for event in stream:
        if event["type"] == "multiagent_handoff":  # b's batch is dispatched; its task has not started
            assert graph.nodes["b"].execution_status == Status.DISPATCHED
            break
    await stream.aclose()

    assert graph.nodes["b"].execution_status == Status.CANCELLED
    assert graph.state.results["b"].status == Status.CANCELLED


# -- should_continue ----------------------------------------------------------------------------------------------


def test_graph_state_should_continue_as_strands() -> None:
    assert GraphState().should_continue(None, None) == (True, "Continuing")
    assert GraphState(launched=2).should_continue(3, None) == (True, "Continuing")
    assert GraphState(launched=3).should_continue(3, None) == (False, "Max node executions reached: 3")
    # execution_time: milliseconds of earlier invocations of the run, counted against the timeout.
    assert GraphState(execution_time=5000).should_continue(None, 1.0) == (False, "Execution timed out: 1.0s")


def _history(*names: str) -> list[SwarmNode]:
    return [SwarmNode(name, None) for name in names]


def _swarm_check(state: SwarmState, **overrides: Any) -> tuple[bool, str]:
    limits: dict[str, Any] = {"max_handoffs": 10, "max_iterations": 10, "execution_timeout": 100.0,
                              "repetitive_handoff_detection_window": 0, "repetitive_handoff_min_unique_agents": 0}
    return state.should_continue(**{**limits, **overrides})


def test_swarm_state_should_continue_as_strands() -> None:
    assert _swarm_check(SwarmState()) == (True, "Continuing")
    assert _swarm_check(SwarmState(node_history=_history("a", "b")), max_handoffs=2) == \
        (False, "Max handoffs reached: 2")
    assert _swarm_check(SwarmState(node_history=_history("a", "b")), max_iterations=2) == \
        (False, "Max iterations reached: 2")
    assert _swarm_check(SwarmState(execution_time=5000), execution_timeout=1.0) == \
        (False, "Execution timed out: 1.0s")
    assert _swarm_check(SwarmState(node_history=_history("a", "b", "a", "b")), repetitive_handoff_detection_window=4,
                        repetitive_handoff_min_unique_agents=3) == \
        (False, "Repetitive handoff: 2 unique nodes out of 4 recent iterations")


# -- reset_executor_state --------------------------------------------------------------------------------------


async def test_graph_node_reset_executor_state_restores_the_first_conversation() -> None:
    agent = _agent("a", "first", "second")
    agent.state.set("step", 0)
    builder = GraphBuilder()
    builder.add_node(agent, "a")
    graph = builder.build(runtime="local")
    first_messages = list(agent.messages)
    await graph.invoke_async("task")
    agent.state.set("step", 1)
    node = graph.nodes["a"]
    assert node.result is not None and len(agent.messages) == 2

    node.reset_executor_state()

    assert agent.messages == first_messages
    assert agent.state.get("step") == 0
    assert node.execution_status == Status.PENDING
    assert node.result is None


def test_graph_node_outside_a_graph_cannot_reset() -> None:
    with pytest.raises(RuntimeError, match="not part of a Graph"):
        GraphNode("a", _agent("a")).reset_executor_state()


async def test_swarm_node_reset_executor_state_restores_the_first_conversation() -> None:
    agent = _agent("a", "first")
    agent.state.set("step", 0)
    swarm = Swarm([agent], runtime="local")
    await swarm.invoke_async("task")
    agent.state.set("step", 1)
    assert len(agent.messages) == 2

    swarm.nodes["a"].reset_executor_state()

    assert agent.messages == []
    assert agent.state.get("step") == 0


def test_swarm_node_outside_a_swarm_cannot_reset() -> None:
    with pytest.raises(RuntimeError, match="not part of a Swarm"):
        SwarmNode("a", _agent("a")).reset_executor_state()


# -- the builder ------------------------------------------------------------------------------------------------


def test_an_edge_added_again_replaces_the_first_one() -> None:
    builder = GraphBuilder()
    for name in ("a", "b", "c"):
        builder.add_node(_agent(name), name)
    builder.add_edge("a", "b")
    builder.add_edge("a", "c")

    def never(state: GraphState) -> bool:
        return False

    again = builder.add_edge("a", "b", condition=never)

    assert [(edge.from_node.node_id, edge.to_node.node_id) for edge in builder.edges] == [("a", "c"), ("a", "b")]
    assert builder.edges[-1] is again
