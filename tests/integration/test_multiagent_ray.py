"""Graph and Swarm on ``runtime="ray"``: the shared behaviour suite, plus what only Ray can show.

The behaviour tests of ``tests/multiagent`` (written against the ``runtime``
fixture) are imported here and run with ``runtime="ray"`` on the session's
local Ray: the same test bodies, so the two runtimes have one semantics. Their
``timeline`` records to a file, because the scripted model calls it times run
in host processes.

Invoked from the driver, a graph's orchestration runs on an orchestration host
(``ray_harness:orchestrator:<i>``): hooks and edge conditions run there, so the few
shared tests that read what a hook or condition stored in a driver-side list
have Ray versions here that assert on results and events instead.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent, GraphBuilder, Status, Swarm
from ray_harness.hooks import AfterNodeCallEvent, BeforeNodeCallEvent
from ray_harness.multiagent import MultiAgentResult, NodeResult
from ray_harness.testing import ScriptedModel, text, tool_call
from tests.integration import agents
from tests.integration.multiagent_agents import FileTimeline, where
from tests.multiagent.conftest import JsonFileStore, make_agent
from tests.multiagent.test_cancel import (  # noqa: F401 - collected here with runtime="ray"
    test_a_graph_stream_closed_mid_run_shows_what_ran_and_what_it_stopped,
    test_a_nested_graphs_execution_timeout_does_not_cancel_its_caller,
    test_a_swarm_stream_closed_mid_run_ends_failed_with_its_member_cancelled,
    test_cancelling_the_task_reading_a_graph_stream_shows_what_ran_and_what_it_stopped,
    test_concurrent_invocations_of_one_graph_are_refused,
    test_graph_cancel_stops_a_lone_running_node,
    test_swarm_cancel_returns_cancelled,
)
from tests.multiagent.test_custom_node import (  # noqa: F401
    test_function_node_feeds_the_next_agent,
    test_strands_style_stream_ending_in_a_result_event,
)
from tests.multiagent.test_graph import (  # noqa: F401
    test_a_revisited_node_still_sees_the_inputs_that_came_before,
    test_an_agent_node_that_cancels_itself_fails_the_graph_under_fail_fast,
    test_cancel_node_raises_under_fail_fast,
    test_cancel_node_skips_without_failing_under_continue,
    test_continue_prunes_only_successors_of_the_failed_node,
    test_cycle_stops_at_max_node_executions,
    test_diamond_runs_b_and_c_together_and_d_after_both,
    test_eager_scheduling_starts_successors_without_waiting_for_the_batch,
    test_execution_timeout_ends_failed_without_raising,
    test_execution_timeout_records_stopped_nodes_the_same_way_for_invoke_and_stream,
    test_execution_timeout_stops_a_nested_graphs_node_the_same_way,
    test_fail_fast_raises_and_cancels_siblings,
    test_invoke_async_skips_unread_events_but_results_hooks_and_histories_match_streaming,
    test_join_all_runs_fan_in_node_once_with_all_inputs,
    test_join_all_with_a_branch_not_taken_still_runs,
    test_join_any_runs_fan_in_node_once_per_arriving_input,
    test_max_node_executions_is_checked_once_per_batch_as_in_strands,
    test_nested_graph_and_swarm_nodes,
    test_node_timeout_fails_fast_with_the_strands_text,
    test_result_round_trips_through_dict,
    test_usage_and_cost_accumulate_over_nodes,
)
from tests.multiagent.test_graph_interrupts import (  # noqa: F401
    test_interrupt_inside_nested_graph_surfaces_and_resumes,
    test_interrupt_inside_node_resumes_the_node_agent,
    test_new_graph_instance_resumes_from_the_session_store,
    test_resume_through_file_session_manager,
)
from tests.multiagent.test_swarm import (  # noqa: F401
    test_entry_point_by_name_and_members_keep_history,
    test_handoff_chain_with_shared_context,
    test_max_handoffs_ends_failed,
    test_member_failure_and_timeout_end_failed_without_raising,
    test_ping_pong_is_detected,
    test_reset_members_starts_each_turn_fresh,
    test_unknown_target_is_an_error_result_for_the_model,
)

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@pytest.fixture
def runtime() -> str:
    return "ray"


@pytest.fixture
def timeline(tmp_path: Path) -> FileTimeline:
    return FileTimeline(tmp_path / "timeline.jsonl")


@pytest.fixture
def pool(ray_session: Any) -> Any:
    from ray_harness.runtime._multiagent_pool import default_pool

    return default_pool()


# -- the shared tests that read driver-side hook state, asserting on results and events -----------------------


async def test_graph_cancel_returns_cancelled_and_stops_every_running_node_once_warm(runtime: str) -> None:
    # As tests/multiagent/test_cancel.py, after one run: the first run also ships every agent.
    builder = GraphBuilder()
    # The steps of the third run are scripted up front: a node's model (configuration) lives in its slot, so
    # changing the driver's copy of it after the first run would not reach the slot.
    builder.add_node(make_agent("a", text("warm"), text("a", delay=300), text("a again")), "a")
    builder.add_node(make_agent("b", text("warm"), text("b", delay=300), text("b again")), "b")
    builder.add_node(make_agent("after", text("warm"), text("after")), "after")
    builder.add_edge("a", "after")
    graph = builder.build(runtime=runtime)
    await graph.invoke_async("warm up")
    graph.cancel()  # idle: no effect on the next run
    task = asyncio.create_task(graph.invoke_async("t"))
    await asyncio.sleep(0.2)
    graph.cancel()
    result = await asyncio.wait_for(task, 120)  # the nodes' models would answer after 300 s
    assert result.status == Status.CANCELLED
    assert {result.results["a"].status, result.results["b"].status} == {Status.CANCELLED}
    assert "after" not in result.results
    assert graph.nodes["a"].executor.messages[-1]["role"] == "assistant"
    assert (await graph.invoke_async("t2")).status == Status.COMPLETED


async def test_conditions_see_state_and_invocation_state_on_ray(runtime: str) -> None:
    def plain(state: Any) -> bool:
        return "urgent" in str(state.results["router"])

    def with_context(state: Any, *, invocation_state: dict[str, Any]) -> bool:
        return invocation_state.get("tier") == "gold"

    def build() -> Any:
        builder = GraphBuilder()
        builder.add_node(make_agent("router", text("urgent ticket")), "router")
        builder.add_node(make_agent("escalate", text("escalated")), "escalate")
        builder.add_node(make_agent("vip", text("vip")), "vip")
        builder.add_node(make_agent("normal", text("never")), "normal")
        builder.add_edge("router", "escalate", condition=plain)
        builder.add_edge("router", "vip", condition=with_context)
        builder.add_edge("router", "normal", condition=lambda state: "urgent" not in str(state.results["router"]))
        return builder.build(runtime=runtime)

    result = await build().invoke_async("t", {"tier": "gold"})
    assert set(result.results) == {"router", "escalate", "vip"}
    silver = await build().invoke_async("t", {"tier": "silver"})
    assert set(silver.results) == {"router", "escalate"}


async def test_stream_events_hooks_and_handoffs_on_ray(runtime: str) -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("x")), "a")
    builder.add_node(make_agent("b", text("y")), "b")
    builder.add_edge("a", "b")
    graph = builder.build(runtime=runtime)

    def on_after(event: AfterNodeCallEvent) -> None:  # runs on the orchestration host: visible through the state
        event.invocation_state.setdefault("after", []).append(event.node_id)

    def on_before(event: BeforeNodeCallEvent) -> None:
        if event.node_id == "b":
            assert event.invocation_state["after"] == ["a"]  # a failing hook would fail the node

    graph.add_hook(on_after)
    graph.add_hook(on_before)
    events = [event async for event in graph.stream_async("t")]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "multiagent_node_start" and kinds[-1] == "multiagent_result"
    assert {"type": "multiagent_handoff", "from_node_ids": ["a"], "to_node_ids": ["b"]} in events
    stops = [e for e in events if e["type"] == "multiagent_node_stop"]
    assert [e["node_id"] for e in stops] == ["a", "b"] and isinstance(stops[0]["node_result"], NodeResult)
    assert events[-1]["result"].status == Status.COMPLETED
    assert graph._invocation_state["after"] == ["a", "b"]  # the end state came back from the actor


async def test_interrupt_before_node_and_resume_runs_only_that_node_on_ray(timeline: Any, runtime: str) -> None:
    builder = GraphBuilder()
    for name in "ABCD":
        builder.add_node(make_agent(name, timeline.step(name, delay=0.01)), name)
    for source, target in (("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")):
        builder.add_edge(source, target)
    graph = builder.build(runtime=runtime)

    def gate(event: BeforeNodeCallEvent) -> None:
        if event.node_id == "B":
            answer = event.interrupt("gate", reason="run B?")
            if answer != "yes":
                event.cancel_node = f"answer was {answer!r}"

    graph.add_hook(gate)
    events = [event async for event in graph.stream_async("t")]
    first = events[-1]["result"]
    assert first.status == Status.INTERRUPTED
    assert [item.name for item in first.interrupts] == ["gate"]
    assert first.interrupts[0].id.startswith(f"v1:before_node_call:{uuid.uuid5(uuid.NAMESPACE_OID, 'B')}:")
    assert any(e["type"] == "multiagent_node_interrupt" and e["node_id"] == "B" for e in events)
    assert first.results["C"].status == Status.COMPLETED and "B" not in first.results
    responses = [{"interruptResponse": {"interruptId": item.id, "response": "yes"}} for item in first.interrupts]
    second = await graph.invoke_async(responses)
    assert second.status == Status.COMPLETED  # the hook got "yes" (else it would have cancelled B)
    assert timeline.starts("C") == 1 and timeline.starts("B") == 1 and timeline.starts("D") == 1
    assert [n.node_id for n in second.execution_order] == ["A", "C", "B", "D"]


async def test_swarm_interrupts_before_and_inside_members_resume_on_ray(tmp_path: Path, runtime: str) -> None:
    from tests.multiagent.test_swarm import handoff, pay

    store = JsonFileStore(tmp_path / "swarm.json")
    clerk = make_agent("clerk", handoff("cashier", "pay 5"), text("handed"))
    cashier = make_agent("cashier", tool_call("pay", {"amount": 5}), text("payment done"), tools=[pay])
    swarm = Swarm([clerk, cashier], session_manager=store, runtime=runtime)

    def gate(event: BeforeNodeCallEvent) -> None:
        if event.node_id == "cashier" and event.interrupt("open till") != "opened":
            event.cancel_node = "till stays closed"

    swarm.add_hook(gate)
    first = await swarm.invoke_async("buy")
    assert first.status == Status.INTERRUPTED
    assert [item.name for item in first.interrupts] == ["open till"]
    second = await swarm.invoke_async([{"interruptResponse": {"interruptId": first.interrupts[0].id,
                                                              "response": "opened"}}])
    assert second.status == Status.INTERRUPTED  # the hook got "opened": the member ran and asked in its tool
    assert [item.name for item in second.interrupts] == ["approve payment"]
    assert store.writes > 0

    restored_cashier = make_agent("cashier", text("payment done"), tools=[pay])
    restored = Swarm([make_agent("clerk"), restored_cashier], session_manager=JsonFileStore(tmp_path / "swarm.json"),
                     runtime=runtime)
    restored.add_hook(gate)
    third = await restored.invoke_async([{"interruptResponse": {"interruptId": second.interrupts[0].id,
                                                                "response": "approved"}}])
    assert third.status == Status.COMPLETED
    assert [n.node_id for n in third.node_history] == ["clerk", "cashier"]
    assert any(block.get("toolResult", {}).get("content") == [{"text": "paid 5 (approved)"}]
               for message in restored_cashier.messages for block in message["content"])


# -- where nodes run ----------------------------------------------------------------------------------------


def pid_agent(name: str) -> Agent:
    return Agent(ScriptedModel(tool_call("where", {}), text(f"{name} done")), tools=[where], name=name,
                 retry_strategy=None)


def tool_outputs(agent: Agent) -> list[Any]:
    return [block["toolResult"]["content"][0].get("text") for message in agent.messages
            for block in message["content"] if "toolResult" in block]


async def test_a_ready_batch_runs_on_the_pooled_hosts_not_on_new_actors(pool: Any) -> None:
    builder = GraphBuilder()
    for name in ("n0", "n1", "n2", "n3"):
        builder.add_node(pid_agent(name), name)
    graph = builder.build(runtime="ray")
    host_pids = {host["pid"] for host in await pool.stats()}
    result = await graph.invoke_async("where are you?")
    assert result.status == Status.COMPLETED
    pids = {int(tool_outputs(graph.nodes[name].executor)[0]) for name in graph.nodes}
    assert os.getpid() not in pids
    assert pids <= host_pids  # every node ran in a pre-started host
    assert len(pids) == min(4, len(host_pids))  # the batch was spread over the hosts


async def test_cpu_bound_nodes_run_in_parallel_processes(pool: Any, tmp_path: Path) -> None:
    # Both nodes must be inside their tool at once (a rendezvous), each in its own host process.
    directory = str(tmp_path)
    builder = GraphBuilder()
    for name in ("c0", "c1"):
        model = ScriptedModel(tool_call("rendezvous", {"directory": directory, "party": name, "count": 2}),
                              text("burned"))
        builder.add_node(Agent(model, tools=[agents.rendezvous], name=name, retry_strategy=None), name)
    graph = builder.build(runtime="ray")
    result = await graph.invoke_async("burn")
    assert result.status == Status.COMPLETED
    for name in ("c0", "c1"):
        assert graph.nodes[name].executor.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "met"}]
    pids = agents.party_pids(directory)
    assert pids["c0"] != pids["c1"], "the two nodes ran in one process"


# -- one semantics ------------------------------------------------------------------------------------------


def review_graph(runtime: str) -> Any:
    usage = {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}
    builder = GraphBuilder()
    builder.add_node(make_agent("plan", tool_call("add", {"a": 1, "b": 2}), text("plan", usage=usage),
                                tools=[agents.add]), "plan")
    builder.add_node(make_agent("left", text("left", usage=usage)), "left")
    builder.add_node(make_agent("right", text("right", usage=usage)), "right")
    builder.add_node(make_agent("broken", RuntimeError("left out")), "broken")
    builder.add_node(make_agent("merge", text("merged", usage=usage)), "merge")
    builder.add_node(make_agent("skipped", text("never")), "skipped")
    for source, target in (("plan", "left"), ("plan", "right"), ("plan", "broken"), ("left", "merge"),
                           ("right", "merge"), ("broken", "skipped")):
        builder.add_edge(source, target)
    return builder.set_join("all").set_failure_policy("continue").build(runtime=runtime)


def comparable(result: MultiAgentResult) -> Any:
    """The result without wall-clock fields (they differ between any two runs)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("execution_time", "latencyMs")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(result.to_dict())


async def test_the_same_graph_gives_the_same_result_on_both_runtimes() -> None:
    local = await review_graph("local").invoke_async("review")
    remote_graph = review_graph("ray")
    remote = await remote_graph.invoke_async("review")
    assert remote.status == local.status == Status.FAILED
    assert [n.node_id for n in remote.execution_order][:1] == ["plan"]
    assert sorted(n.node_id for n in remote.execution_order) == sorted(n.node_id for n in local.execution_order)
    assert comparable(remote) == comparable(local)
    assert remote.accumulated_usage == local.accumulated_usage
    assert remote.results["left"].accumulated_usage == {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}
    assert sorted(str(remote).splitlines()) == sorted(str(local).splitlines())  # completion order may differ
    assert remote_graph.nodes["plan"].executor.event_loop_metrics.tool_metrics["add"].call_count == 1
    # A node that raised still reports back: its model's script advanced, its history rolled back, as in-process.
    broken = remote_graph.nodes["broken"].executor
    assert (broken.model.remaining, broken.messages) == (0, [])


async def test_a_node_whose_agent_uses_an_agent_as_a_tool_runs_on_ray() -> None:
    # The node's agent ships to its host slot with the child agent inside its tool (a lock and a weak set once
    # stopped the pickle: "cannot pickle '_thread.lock' object").
    child = make_agent("helper", text("helped"))
    parent = make_agent("boss", tool_call("helper", {"input": "help me"}), text("boss done"), tools=[child])
    builder = GraphBuilder()
    builder.add_node(parent, "boss")
    graph = builder.build(runtime="ray")
    try:
        result = await graph.invoke_async("go")
        assert result.status == Status.COMPLETED
        assert str(result.results["boss"].result) == "boss done\n"
        history = graph.nodes["boss"].executor.messages  # the resident copy's history came back
        results = [block["toolResult"] for message in history for block in message["content"]
                   if "toolResult" in block]
        assert [r["content"] for r in results] == [[{"text": "helped\n"}]]
    finally:
        graph.shutdown()


async def test_the_same_swarm_gives_the_same_result_on_both_runtimes() -> None:
    def team(runtime: str) -> Swarm:
        usage = {"inputTokens": 5, "outputTokens": 5, "totalTokens": 10}
        first = make_agent("first", tool_call("handoff_to_agent", {"agent_name": "second", "message": "go",
                                                                   "context": {"k": 1}}),
                           text("handed", usage=usage))
        second = make_agent("second", text("answer", usage=usage))
        return Swarm([first, second], runtime=runtime)

    local = await team("local").invoke_async("t")
    remote = await team("ray").invoke_async("t")
    assert comparable(remote) == comparable(local)
    assert [n.node_id for n in remote.node_history] == [n.node_id for n in local.node_history]


# -- cancel reaches every actor -----------------------------------------------------------------------------


async def _wait_running(pool: Any, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while sum(host["running"] for host in await pool.stats()) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {count} runs started on the hosts")
        await asyncio.sleep(0.02)


async def test_graph_cancel_reaches_every_host_slot_and_nested_swarm(pool: Any) -> None:
    swarm = Swarm([agents.slow_model()], runtime="ray")
    builder = GraphBuilder()
    builder.add_node(agents.slow_tool(), "tool_node")
    builder.add_node(agents.slow_model(), "model_node")
    builder.add_node(swarm, "team")
    builder.add_node(make_agent("after", text("never")), "after")
    builder.add_edge("tool_node", "after")
    graph = builder.build(runtime="ray")
    task = asyncio.create_task(graph.invoke_async("go"))
    await _wait_running(pool, 3)
    graph.cancel()
    result = await asyncio.wait_for(task, 120)  # the slow model and tool would take 300 s
    assert result.status == Status.CANCELLED
    assert {result.results[n].status for n in ("tool_node", "model_node", "team")} == {Status.CANCELLED}
    assert "after" not in result.results
    # Nothing keeps running in the hosts once the graph returned.
    assert sum(host["running"] for host in await pool.stats()) == 0
    tool_node = graph.nodes["tool_node"].executor
    assert tool_outputs(tool_node) == ["stopped by cancel"]


async def test_a_node_started_after_cancel_starts_cancelled(pool: Any) -> None:
    # cancel() lands while the node is between its BeforeNodeCall hook and its run: the host starts it cancelled.
    late = make_agent("late", text("should not run"))
    builder = GraphBuilder()
    builder.add_node(late, "late")
    graph = builder.build(runtime="ray")

    def cancel_now(event: BeforeNodeCallEvent) -> None:
        graph.cancel()

    graph.add_hook(cancel_now)
    result = await asyncio.wait_for(graph.invoke_async("go"), 120)
    assert result.status == Status.CANCELLED
    assert result.results["late"].status == Status.CANCELLED
    assert late.model.remaining == 1  # the model was never called


# -- RemoteAgent nodes and the default runtime ---------------------------------------------------------------


async def test_remote_agent_node_runs_in_its_own_actor_and_can_be_cancelled(ray_session: Any) -> None:
    from ray_harness.runtime import RemoteAgent

    remote = RemoteAgent("tests.integration.agents:calculator", name=f"ma-calc-{os.getpid()}", persist=False)
    slow = RemoteAgent("tests.integration.agents:slow_model", name=f"ma-slow-{os.getpid()}", persist=False)
    try:
        builder = GraphBuilder()
        builder.add_node(remote, "calc")
        builder.add_node(make_agent("report", text("reported")), "report")
        builder.add_edge("calc", "report")
        result = await builder.build(runtime="ray").invoke_async("2+3?")
        assert result.status == Status.COMPLETED
        assert str(result.results["calc"]).strip() == "5"
        assert len(await remote.get_messages_async()) == 4

        blocked = GraphBuilder()
        blocked.add_node(slow, "slow")
        graph = blocked.build(runtime="ray")
        task = asyncio.create_task(graph.invoke_async("wait"))
        await asyncio.sleep(1.0)
        graph.cancel()
        cancelled = await asyncio.wait_for(task, 120)
        assert cancelled.status == Status.CANCELLED
        assert cancelled.results["slow"].status == Status.CANCELLED
    finally:
        remote.shutdown()
        slow.shutdown()


def test_ray_is_the_default_runtime(ray_session: Any) -> None:
    from ray_harness.runtime.multiagent import RayNodeRunner

    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("sync on ray")), "a")
    graph = builder.build()
    assert graph.runtime == "ray" and isinstance(graph._node_runner, RayNodeRunner)
    assert str(graph("t")) == "a: sync on ray"
    assert Swarm([make_agent("solo", text("x"))]).runtime == "ray"


SCRIPT = '''
import os
from ray_harness import Agent, GraphBuilder, runtime, tool
from ray_harness.testing import ScriptedModel, text, tool_call

@tool
def shout(word: str) -> str:
    """Shout a word."""
    return f"{word.upper()}! from {os.getpid()}"

runtime.init(namespace="ray_harness_tests")
builder = GraphBuilder()
builder.add_node(Agent(ScriptedModel(tool_call("shout", {"word": "hi"}), text("done")), tools=[shout], name="a"), "a")
graph = builder.build()  # the default runtime: Ray
result = graph("go")
print(result.status.value, graph.nodes["a"].executor.messages[2]["content"][0]["toolResult"]["content"][0]["text"])
print(os.getpid())
'''


def test_a_script_with_tools_in_main_runs_its_graph_on_the_cluster(tmp_path: Path, ray_session: Any) -> None:
    import subprocess
    import sys

    import ray

    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    completed = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, timeout=90,
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    first, driver_pid = completed.stdout.strip().splitlines()[-2:]
    status, shouted, _, tool_pid = first.split()
    assert (status, shouted) == ("completed", "HI!")
    assert tool_pid != driver_pid  # the @tool defined in the script's __main__ ran in a host process


def test_cancel_from_another_thread_stops_a_sync_graph_call(pool: Any) -> None:
    import threading

    builder = GraphBuilder()
    builder.add_node(agents.slow_tool(), "tool_node")
    builder.add_node(agents.slow_model(), "model_node")
    graph = builder.build(runtime="ray")
    timer = threading.Timer(1.5, graph.cancel)
    timer.start()
    started = time.monotonic()
    result = graph("go")
    timer.join()
    assert result.status == Status.CANCELLED
    assert time.monotonic() - started < 120  # the slow model and tool would take 300 s
    assert {result.results[n].status for n in ("tool_node", "model_node")} == {Status.CANCELLED}
