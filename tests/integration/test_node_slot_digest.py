"""Node runs send their state back as deltas; the running digest still finds a copy changed between invocations.

Issue 20 ("Swarm handoffs ship the whole member"): a member run that only appends sends the appended messages and
the rest of the state (a ``SnapshotDelta``), not the whole history; a trimmed history comes back whole. Asserted on
the slots' counters (``slot_info``: ``deltas``, ``snapshots``, ``restores``) and the driver's copies, not on time.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from ray_harness import Agent, GraphBuilder, Status, Swarm
from ray_harness.agent import AgentSnapshot, SnapshotDelta
from ray_harness.agent.conversation_manager.null import NullConversationManager
from ray_harness.agent.conversation_manager.sliding_window import SlidingWindowConversationManager
from ray_harness.testing import ScriptedModel, text, tool_call
from tests.integration.test_node_slots_ray import without_ids

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@pytest.fixture
def pool(ray_session: Any) -> Any:
    from ray_harness.runtime._multiagent_pool import default_pool

    return default_pool()


def filler(count: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": f"turn {i}"}]} for i in range(count)]




async def slot(pool: Any, orchestrator: Any, node_id: str) -> dict[str, Any]:
    info = await pool.slot_info(orchestrator.node_runner.slot_key(node_id))
    assert info is not None
    return dict(info)


def long_swarm(runtime: str, history: int) -> Swarm:
    go = tool_call("handoff_to_agent", {"agent_name": "b", "message": "your turn", "context": {"step": 1}})
    a = Agent(ScriptedModel([go, text("handed")], loop=True), name="a", conversation_manager=NullConversationManager())
    b = Agent(ScriptedModel([text("done")], loop=True), name="b", conversation_manager=NullConversationManager())
    a.messages = filler(history)
    b.messages = filler(history)
    return Swarm([a, b], runtime=runtime)


async def test_a_long_history_swarm_sends_deltas_and_the_copies_match_in_process(pool: Any) -> None:
    local, remote = long_swarm("local", 60), long_swarm("ray", 60)
    for swarm in (local, remote):
        for task in ("t1", "t2", "t3"):
            result = await swarm.invoke_async(task)
            assert result.status == Status.COMPLETED
            assert [n.node_id for n in result.node_history] == ["a", "b"]
    for name in ("a", "b"):
        mine, theirs = remote.nodes[name].executor, local.nodes[name].executor
        assert without_ids(mine.messages) == without_ids(theirs.messages)
        assert len(mine.messages) > 60
        assert mine.event_loop_metrics.cycle_count == theirs.event_loop_metrics.cycle_count
    for name in ("a", "b"):
        info = await slot(pool, remote, name)
        # every run only appended: its state came back as a delta; the copies never needed a re-sync
        assert (info["builds"], info["restores"], info["runs"]) == (1, 0, 3)
        assert (info["deltas"], info["snapshots"]) == (3, 0)
    remote.shutdown()


def one_node_graph(runtime: str, **kwargs: Any) -> Any:
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel([text("r1"), text("r2"), text("r3"), text("r4")]), name="a", **kwargs), "a")
    return builder.build(runtime=runtime)


async def test_a_copy_edited_in_place_between_invocations_is_synced_once(pool: Any) -> None:
    local, remote = one_node_graph("local"), one_node_graph("ray")
    for graph in (local, remote):
        await graph.invoke_async("one")
        await graph.invoke_async("two")
        # the user's edit of an earlier message, in place: same count, other content
        graph.nodes["a"].executor.messages[0]["content"][0]["text"] = "one (edited)"
        await graph.invoke_async("three")
        await graph.invoke_async("four")  # unchanged since: nothing to re-sync
    mine, theirs = remote.nodes["a"].executor, local.nodes["a"].executor
    assert mine.messages == theirs.messages and len(mine.messages) == 8
    assert mine.messages[0]["content"][0]["text"] == "one (edited)"
    assert without_ids(await pool.resident_messages(remote.node_runner.slot_key("a"))) == without_ids(mine.messages)
    info = await slot(pool, remote, "a")
    # the edit was found by the digest (extended by the deltas of the runs before it) and restored once; a digest
    # that drifted from the copy would re-sync the unchanged fourth invocation too
    assert (info["restores"], info["runs"], info["deltas"], info["snapshots"]) == (1, 4, 4, 0)
    remote.shutdown()


async def test_a_trimmed_history_comes_back_whole(pool: Any) -> None:
    local = one_node_graph("local", conversation_manager=SlidingWindowConversationManager(window_size=2))
    remote = one_node_graph("ray", conversation_manager=SlidingWindowConversationManager(window_size=2))
    for graph in (local, remote):
        for task in ("one", "two", "three"):
            assert (await graph.invoke_async(task)).status == Status.COMPLETED
    mine, theirs = remote.nodes["a"].executor, local.nodes["a"].executor
    assert mine.messages == theirs.messages and len(mine.messages) == 2
    info = await slot(pool, remote, "a")
    # the first run appended to an empty history; the later ones trimmed it: full snapshots, no re-sync needed
    assert (info["restores"], info["runs"], info["deltas"], info["snapshots"]) == (0, 3, 1, 2)
    remote.shutdown()


def small_team(history: int) -> Any:
    go = tool_call("handoff_to_agent", {"agent_name": "b", "message": "go"})
    a = Agent(ScriptedModel([go, text("handed")]), name="a", agent_id="a",
              conversation_manager=NullConversationManager())
    b = Agent(ScriptedModel([text("done")]), name="b", agent_id="b", conversation_manager=NullConversationManager())
    for agent in (a, b):
        agent.messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": f"m{i}"}]}
                          for i in range(history)]
    return Swarm([a, b])


def test_the_end_state_sends_deltas_over_the_shipped_histories() -> None:
    """In-process: what an orchestration host sends back at the end of a run, applied to the driver's objects."""
    from ray_harness.runtime._orchestrator_wire import agent_baselines, apply_end, object_table, pack_end

    driver, host = small_team(20), small_team(20)  # the driver's objects and the orchestration host's copy of them
    driver_table, host_table = object_table(driver), object_table(host)
    driver_baselines, host_baselines = agent_baselines(driver_table), agent_baselines(host_table)
    host("task")
    end = pack_end(host_table, None, None, host_baselines)
    for state in pickle.loads(end.orchestrators[""].agents).values():
        assert isinstance(state, SnapshotDelta)
    driver.nodes["b"].executor.messages.append({"role": "user", "content": [{"text": "the driver's edit meanwhile"}]})
    apply_end(end, driver_table, driver_baselines)
    for name in ("a", "b"):
        assert driver.nodes[name].executor.snapshot() == host.nodes[name].executor.snapshot()
    with pytest.raises(ValueError, match="delta over 20 messages"):
        apply_end(end, object_table(small_team(3)))  # a delta without the driver's baselines must fit the agent
    host.nodes["a"].executor.messages.pop(0)  # trimmed on the host: the full snapshot travels
    again = pack_end(host_table, None, None, host_baselines)
    states = pickle.loads(again.orchestrators[""].agents)
    assert isinstance(states["a"], AgentSnapshot)
    assert isinstance(states["b"], SnapshotDelta)
