"""Graph and Swarm agent nodes resident in host slots (``runtime="ray"``): shipped once, addressed by key.

What the slot keeps (hooks, model, history) carries over revisits and invocations as in-process; the driver's
copy still sees the state; a changed copy reaches the slot; slots are released at shutdown, garbage collection and
``release_all_slots()``; a restarted host answers "unknown slot" and the agent ships again.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import pytest
import ray

from ray_harness import Agent, GraphBuilder, Status, Swarm
from ray_harness.testing import ScriptedModel, text, tool_call
from tests.integration.multiagent_agents import ModelCallCounter

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@pytest.fixture
def pool(ray_session: Any) -> Any:
    from ray_harness.runtime._multiagent_pool import default_pool

    return default_pool()


def counted(name: str, *steps: Any) -> Agent:
    return Agent(ScriptedModel(list(steps)), name=name, hooks=[ModelCallCounter()])


def two_node_graph(runtime: str) -> Any:
    builder = GraphBuilder()
    builder.add_node(counted("a", text("a1"), text("a2")), "a")
    builder.add_node(counted("b", text("b1"), text("b2")), "b")
    builder.add_edge("a", "b")
    return builder.build(runtime=runtime)


def without_ids(messages: list[Any]) -> Any:
    """The messages without tool use ids (the scripted model numbers them per process)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "toolUseId"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(messages)


async def slots(pool: Any, graph: Any) -> dict[str, dict[str, Any] | None]:
    runner = graph.node_runner
    return {node_id: await pool.slot_info(runner.slot_key(node_id)) for node_id in graph.nodes}


async def test_a_hook_counts_model_calls_across_invocations_as_in_process(pool: Any) -> None:
    local, remote = two_node_graph("local"), two_node_graph("ray")
    for graph in (local, remote):
        assert (await graph.invoke_async("one")).status == Status.COMPLETED
        assert (await graph.invoke_async("two")).status == Status.COMPLETED
    for node_id in ("a", "b"):
        assert remote.nodes[node_id].executor.state.get("model_calls") == 2  # the hook object lives in the slot
        assert remote.nodes[node_id].executor.state.get("model_calls") == local.nodes[node_id].executor.state.get(
            "model_calls")
        assert remote.nodes[node_id].executor.messages == local.nodes[node_id].executor.messages
    info = await slots(pool, remote)
    for node_id in ("a", "b"):
        entry = info[node_id]
        assert entry is not None
        assert (entry["builds"], entry["restores"], entry["runs"]) == (1, 0, 2)  # shipped once, then addressed
    remote.shutdown()


async def test_a_swarm_handoff_is_a_message_to_the_next_members_slot(pool: Any) -> None:
    def team(runtime: str) -> Swarm:
        go = tool_call("handoff_to_agent", {"agent_name": "second", "message": "go", "context": {"k": 1}})
        back = tool_call("handoff_to_agent", {"agent_name": "first", "message": "back"})
        first = counted("first", go, text("handed"), text("done"), go, text("handed"), text("done"))
        second = counted("second", back, text("returned"), back, text("returned"))
        return Swarm([first, second], runtime=runtime)

    local, remote = team("local"), team("ray")
    for swarm in (local, remote):
        for task in ("t1", "t2"):
            result = await swarm.invoke_async(task)
            assert result.status == Status.COMPLETED
            assert [n.node_id for n in result.node_history] == ["first", "second", "first"]
    for name in ("first", "second"):
        mine, theirs = remote.nodes[name].executor, local.nodes[name].executor
        assert without_ids(mine.messages) == without_ids(theirs.messages)  # each kept its own history, in its slot
        assert mine.state.get("model_calls") == theirs.state.get("model_calls")
    assert remote.nodes["first"].executor.state.get("model_calls") == 6
    info = await slots(pool, remote)
    first, second = info["first"], info["second"]
    assert first is not None and second is not None
    # Four turns of "first", two of "second": after the first request only the handoff message and shared
    # context travelled (no agent, no history, no snapshot restored).
    assert (first["builds"], first["restores"], first["runs"]) == (1, 0, 4)
    assert (second["builds"], second["restores"], second["runs"]) == (1, 0, 2)
    remote.shutdown()


async def test_a_revisited_node_reuses_its_slot(pool: Any) -> None:
    def loop(runtime: str) -> Any:
        builder = GraphBuilder()
        builder.add_node(counted("write", text("d1"), text("d2"), text("d3")), "write")
        builder.add_node(counted("review", text("r1"), text("r2")), "review")
        builder.add_edge("write", "review")
        builder.add_edge("review", "write", condition=lambda state: True)
        return builder.set_entry_point("write").set_max_node_executions(5).build(runtime=runtime)

    local, remote = loop("local"), loop("ray")
    for graph in (local, remote):
        result = await graph.invoke_async("t")
        assert [n.node_id for n in result.execution_order] == ["write", "review", "write", "review", "write"]
    assert remote.nodes["write"].executor.messages == local.nodes["write"].executor.messages
    assert len(remote.nodes["write"].executor.messages) == 6
    info = await slots(pool, remote)
    assert info["write"] is not None and (info["write"]["builds"], info["write"]["runs"]) == (1, 3)
    assert info["review"] is not None and (info["review"]["builds"], info["review"]["runs"]) == (1, 2)
    remote.shutdown()


async def test_a_changed_driver_copy_reaches_the_slot(pool: Any) -> None:
    local, remote = two_node_graph("local"), two_node_graph("ray")
    for graph in (local, remote):
        await graph.invoke_async("one")
        graph.nodes["a"].executor.messages.clear()  # the user's edit between invocations
        graph.nodes["a"].executor.state.set("note", "edited")
        await graph.invoke_async("two")
    assert remote.nodes["a"].executor.messages == local.nodes["a"].executor.messages
    assert len(remote.nodes["a"].executor.messages) == 2
    assert remote.nodes["a"].executor.state.get("note") == "edited"
    assert remote.nodes["b"].executor.messages == local.nodes["b"].executor.messages
    info = await slots(pool, remote)
    assert info["a"] is not None and info["a"]["restores"] == 1  # the edited copy's snapshot, once
    assert info["b"] is not None and info["b"]["restores"] == 0  # unchanged: only its prompt travelled
    remote.shutdown()


async def test_shutdown_releases_the_slots_and_the_next_invocation_ships_again(pool: Any) -> None:
    graph = two_node_graph("ray")
    await graph.invoke_async("one")
    assert all(entry is not None for entry in (await slots(pool, graph)).values())
    graph.shutdown()
    assert await slots(pool, graph) == {"a": None, "b": None}
    assert (await graph.invoke_async("two")).status == Status.COMPLETED
    info = await slots(pool, graph)
    assert info["a"] is not None and (info["a"]["builds"], info["a"]["runs"]) == (1, 1)
    assert graph.nodes["a"].executor.state.get("model_calls") == 1  # a new slot: a new hook object
    assert len(graph.nodes["a"].executor.messages) == 4  # the history came along with the agent
    graph.shutdown()


async def test_garbage_collection_and_release_all_slots_release_the_slots(pool: Any) -> None:
    from ray_harness.runtime.multiagent import release_all_slots

    kept, dropped = two_node_graph("ray"), two_node_graph("ray")
    await kept.invoke_async("one")
    await dropped.invoke_async("one")
    keys = [dropped.node_runner.slot_key(node_id) for node_id in dropped.nodes]
    del dropped
    gc.collect()
    deadline = time.monotonic() + 60
    while any([await pool.slot_info(key) is not None for key in keys]):  # released by a thread, soon
        assert time.monotonic() < deadline, "the slots of a collected graph were not released"
        await asyncio.sleep(0.05)
    assert all(entry is not None for entry in (await slots(pool, kept)).values())
    await asyncio.to_thread(release_all_slots)
    assert await slots(pool, kept) == {"a": None, "b": None}


async def test_a_restarted_host_answers_unknown_slot_and_the_agent_ships_again(pool: Any) -> None:
    local, remote = two_node_graph("local"), two_node_graph("ray")
    await local.invoke_async("one")
    await remote.invoke_async("one")
    runner = remote.node_runner
    index = runner._host_of("a") % pool.size
    host = pool.hosts[index]
    pid = (await pool.stats())[index]["pid"]
    ray.kill(host, no_restart=False)  # the pool's hosts restart (max_restarts=-1), without their slots
    deadline = time.monotonic() + 120
    while True:
        try:
            if (await host.ready.remote())["pid"] != pid:
                break
        except ray.exceptions.RayError:
            pass
        assert time.monotonic() < deadline, "the host did not come back"
        await asyncio.sleep(0.1)
    assert await pool.slot_info(runner.slot_key("a")) is None
    await local.invoke_async("two")
    assert (await remote.invoke_async("two")).status == Status.COMPLETED
    assert remote.nodes["a"].executor.messages == local.nodes["a"].executor.messages  # the copy shipped again
    info = await pool.slot_info(runner.slot_key("a"))
    assert info is not None and (info["builds"], info["runs"]) == (1, 1)
    remote.shutdown()


class _Host:
    """The three things HostSlots takes from its host: the run registry, and dropping a slot."""

    def __init__(self) -> None:
        self.resident: dict[str, Any] = {}
        self.runs: dict[str, Any] = {}

    def register(self, run_id: str, runner: Any) -> None:
        from ray_harness.runtime._host_slots import RunInFlight

        if run_id in self.runs:
            raise RunInFlight(run_id)
        self.runs[run_id] = runner

    def unregister(self, run_id: str) -> None:
        self.runs.pop(run_id, None)

    async def drop(self, key: str) -> bool:
        return self.resident.pop(key, None) is not None


async def test_a_re_sent_node_run_gets_what_it_sent_and_a_changed_copy_runs_again(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a node host does when a driver sends a lost orchestration's run again (runtime._slots, "Re-sent runs").

    The host's slots in this process, without an actor: the deterministic part of the orchestration-host kill tests.
    """
    from ray_harness.agent.snapshot import SnapshotDelta
    from ray_harness.runtime._host_slots import HostSlots
    from ray_harness.runtime._slots import SLOT_IDLE_TIMEOUT_ENV
    from ray_harness.runtime._spec import agent_spec
    from ray_harness.runtime._wire import InvokeRequest, ResultItem, SlotSync, pack_snapshot

    monkeypatch.setenv("RAY_HARNESS_STATE_DIR", str(tmp_path))
    monkeypatch.setenv(SLOT_IDLE_TIMEOUT_ENV, "0")
    host = _Host()
    slots = HostSlots(0, host.resident, host.register, host.unregister, host.drop)
    spec = agent_spec(Agent(ScriptedModel(text("one"), text("two"), text("three")), name="a"))

    async def run(invocation_id: str, sync: SlotSync, orchestration: str = "o1", *, with_spec: bool = False
                  ) -> ResultItem:
        request = InvokeRequest(invocation_id=invocation_id, prompt=invocation_id, snapshot=True, agent_key="g/a",
                                slot=sync.model_copy(update={"orchestration": orchestration}))
        items = [item async for item in slots.stream(request, spec if with_spec else None)]
        assert isinstance(items[-1], ResultItem), items
        return items[-1]

    def model_calls() -> int:
        return len(host.resident["g/a"].agent.model.calls)

    x, y = "o1:u:a:0", "o1:u:a:1"  # two visits of one orchestration request "o1" (RayNodeRunner.name_runs)
    first = await run(x, SlotSync(messages=0), with_spec=True)  # a new slot: the agent ships with the request
    assert (first.revision, str(first.result).strip(), model_calls()) == (1, "one", 1)
    again = await run(x, SlotSync(messages=0), with_spec=True)  # the same run from the same (new) copy
    assert (again.revision, str(again.result).strip(), model_calls()) == (1, "one", 1)  # not run again
    delta = again.node_state()
    assert isinstance(delta, SnapshotDelta) and delta.base_messages == 0 and len(delta.snapshot.messages) == 2
    second = await run(y, SlotSync(revision=1, messages=2))
    assert (second.revision, str(second.result).strip(), model_calls()) == (2, "two", 2)
    assert (await run(y, SlotSync(revision=1, messages=2))).revision == 2 and model_calls() == 2
    # the first visit again after the second ran: still what it sent (its revision and state), without running.
    late = await run(x, SlotSync(messages=0), with_spec=True)
    assert (late.revision, str(late.result).strip(), model_calls()) == (1, "one", 2)
    assert len(host.resident["g/a"].agent.messages) == 4  # the slot itself did not change
    # A changed copy (its snapshot sent along: an empty history, the model at its first answer) is restored into
    # the slot and runs, although the second visit ran under that id before.
    copy = Agent(ScriptedModel(text("unused")), name="a")
    changed = SlotSync(snapshot=pack_snapshot(copy.snapshot()), messages=0)
    restored = await run(y, changed)
    assert (restored.revision, str(restored.result).strip()) == (3, "one")
    assert [m["content"][0]["text"] for m in host.resident["g/a"].agent.messages] == [y, "one"]
    # That run sent again from the same changed copy (the same snapshot): what it sent, without running.
    calls = model_calls()
    resent = await run(y, SlotSync(snapshot=pack_snapshot(copy.snapshot()), messages=0))
    assert (resent.revision, str(resent.result).strip(), model_calls()) == (3, "one", calls)
    assert not host.runs
    # A run of the next orchestration request: the runs kept for the earlier one are dropped (never sent again).
    assert slots._book.completed_run("g/a", x, 0) is not None
    later = await run("o2:u:a:0", SlotSync(revision=3, messages=2), "o2")
    assert (later.revision, str(later.result).strip()) == (4, "two")
    assert slots._book.completed_run("g/a", x, 0) is None


async def test_a_cancel_that_reaches_a_lost_run_holds_for_its_re_send(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user cancel that reaches the lost run of a re-sent node run: the re-send is cancelled too.

    The double fault: the orchestration host died mid-run and the driver sends the run again; the cancel reaches the
    old run (same id) on the node host, whose stream is then closed without its result being read (its consumer is
    gone). The re-send — whether it waited there already or comes after — must start cancelled, not run the node
    again. Here it comes right after the old stream was closed: closing it ends the old invocation first.
    """
    from ray_harness.runtime import _host
    from ray_harness.runtime._slots import SLOT_IDLE_TIMEOUT_ENV
    from ray_harness.runtime._spec import agent_spec
    from ray_harness.runtime._wire import CancelRequest, EventItem, InvokeRequest, ResultItem, SlotSync
    from ray_harness.tools import tool

    @tool
    async def wait_long() -> str:
        """Wait a minute."""
        await asyncio.sleep(60)
        return "waited"

    monkeypatch.setenv("RAY_HARNESS_STATE_DIR", str(tmp_path))
    monkeypatch.setenv(SLOT_IDLE_TIMEOUT_ENV, "0")
    monkeypatch.setattr(_host, "_was_reconstructed", lambda: False)
    host = _host.AgentHost(0)
    agent = Agent(ScriptedModel(tool_call("wait_long", {}), text("done")), name="a", tools=[wait_long])
    spec = agent_spec(agent)
    request = InvokeRequest(invocation_id="x", prompt="x", snapshot=True, agent_key="g/a", slot=SlotSync(messages=0))

    lost = host.stream(request, spec)  # the run of the orchestration host that died
    assert isinstance(await lost.__anext__(), EventItem)  # running; nobody reads further
    assert await host.cancel(CancelRequest(invocation_ids=("x",))) == 1  # reaches the old run
    await lost.aclose()  # its consumer is gone: the cancelled result is never read
    assert "x" not in host._runs  # the old invocation has ended: the re-send restores the slot's idle agent
    items = await asyncio.wait_for(_items(host.stream(request, spec)), 20)  # run again: the tool's minute
    assert isinstance(items[-1], ResultItem) and items[-1].result.stop_reason == "cancelled"
    assert not host._runs


async def _items(stream: Any) -> list[Any]:
    return [item async for item in stream]
