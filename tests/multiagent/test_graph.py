from __future__ import annotations

import logging
from typing import Any

import pytest

from ray_harness import GraphBuilder, Status, ToolContext, tool
from ray_harness.hooks import AfterNodeCallEvent, BeforeNodeCallEvent
from ray_harness.multiagent import GraphResult, MultiAgentResult, NodeResult
from ray_harness.testing import RecordingHooks, text, tool_call
from tests.multiagent.conftest import Timeline, make_agent


def diamond(timeline: Timeline, waits: dict[str, tuple[str, ...]] | None = None, **delays: float) -> GraphBuilder:
    builder = GraphBuilder()
    for name in "ABCD":
        step = timeline.step(name, delay=delays.get(name, 0.2), wait_for=(waits or {}).get(name, ()))
        builder.add_node(make_agent(name, step), name)
    for source, target in (("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")):
        builder.add_edge(source, target)
    return builder


async def test_diamond_runs_b_and_c_together_and_d_after_both(timeline: Timeline, runtime: str) -> None:
    # B and C each wait until the other started: run one after the other, they would fail.
    graph = diamond(timeline, {"B": ("C",), "C": ("B",)}, A=0.05, B=0.05, C=0.05, D=0.05).build(runtime=runtime)
    result = await graph.invoke_async("task")
    assert result.status == Status.COMPLETED
    assert isinstance(result, GraphResult)
    # B and C overlap: each starts before the other ends.
    assert timeline.at("B", "start") < timeline.at("C", "end")
    assert timeline.at("C", "start") < timeline.at("B", "end")
    assert timeline.at("D", "start") >= max(timeline.at("B", "end"), timeline.at("C", "end"))
    assert timeline.starts("D") == 1
    assert result.execution_order[0].node_id == "A"
    assert {node.node_id for node in result.execution_order[1:3]} == {"B", "C"}
    assert result.execution_order[3].node_id == "D"
    assert (result.total_nodes, result.completed_nodes, result.failed_nodes) == (4, 4, 0)
    assert result.execution_count == 4
    assert graph.nodes["B"].execution_time == result.results["B"].execution_time > 0  # Strands' node field
    d_prompt = graph.nodes["D"].executor.messages[0]["content"]
    texts = [block["text"] for block in d_prompt]
    assert texts[0] == "Original Task: task"
    assert texts[1] == "\nInputs from previous nodes:"
    assert "\nFrom B:" in texts and "  - Agent: B done\n" in texts and "  - Agent: C done\n" in texts
    # Entry nodes get the task alone.
    assert graph.nodes["A"].executor.messages[0]["content"] == [{"text": "task"}]


async def test_usage_and_cost_accumulate_over_nodes(runtime: str) -> None:
    usage = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("x", usage=usage)), "a")
    builder.add_node(make_agent("b", text("y", usage=usage)), "b")
    builder.add_edge("a", "b")
    result = await builder.build(runtime=runtime).invoke_async("t")
    assert result.accumulated_usage == {"inputTokens": 20, "outputTokens": 10, "totalTokens": 30}
    assert result.results["a"].accumulated_usage == usage
    assert len(result.results["b"].get_agent_results()) == 1


def uneven_fan_in(timeline: Timeline, join: str) -> GraphBuilder:
    # A -> B -> D and A -> C -> E -> D: D's inputs arrive one batch apart.
    builder = GraphBuilder()
    for name in "ABCDE":
        builder.add_node(make_agent(name, timeline.step(name, delay=0.01), timeline.step(name, delay=0.01)), name)
    for source, target in (("A", "B"), ("A", "C"), ("B", "D"), ("C", "E"), ("E", "D")):
        builder.add_edge(source, target)
    return builder.set_join(join)


async def test_join_any_runs_fan_in_node_once_per_arriving_input(timeline: Timeline, runtime: str) -> None:
    graph = uneven_fan_in(timeline, "any").build(runtime=runtime)
    result = await graph.invoke_async("t")
    assert result.status == Status.COMPLETED
    assert timeline.starts("D") == 2
    assert [n.node_id for n in result.execution_order].count("D") == 2
    # Each run gets every input completed by then (as in Strands), not only what arrived since the last run.
    prompts = [[b["text"] for b in m["content"]] for m in graph.nodes["D"].executor.messages if m["role"] == "user"]
    assert [[t for t in texts if t.startswith("\nFrom ")] for texts in prompts] == [
        ["\nFrom B:"], ["\nFrom B:", "\nFrom E:"]]


async def test_join_all_runs_fan_in_node_once_with_all_inputs(timeline: Timeline, runtime: str) -> None:
    graph = uneven_fan_in(timeline, "all").build(runtime=runtime)
    result = await graph.invoke_async("t")
    assert result.status == Status.COMPLETED
    assert timeline.starts("D") == 1
    assert timeline.at("D", "start") >= timeline.at("E", "end")
    texts = [b["text"] for b in graph.nodes["D"].executor.messages[0]["content"]]
    assert "\nFrom B:" in texts and "\nFrom E:" in texts
    assert graph.nodes["D"].executor.model.remaining == 1


async def test_join_all_with_a_branch_not_taken_still_runs(runtime: str) -> None:
    builder = GraphBuilder()
    for name in ("start", "yes", "no", "join"):
        builder.add_node(make_agent(name, text(f"{name} out")), name)
    builder.add_edge("start", "yes", condition=lambda state: True)
    builder.add_edge("start", "no", condition=lambda state: False)
    builder.add_edge("yes", "join")
    builder.add_edge("no", "join")
    result = await builder.set_join("all").build(runtime=runtime).invoke_async("t")
    assert result.status == Status.COMPLETED
    assert set(result.results) == {"start", "yes", "join"}


async def test_conditions_see_state_and_invocation_state(runtime: str) -> None:
    seen: list[Any] = []

    def plain(state: Any) -> bool:
        seen.append(("plain", sorted(state.results)))
        return "urgent" in str(state.results["router"])

    def with_context(state: Any, *, invocation_state: dict[str, Any]) -> bool:
        seen.append(("context", invocation_state.get("tier")))
        return invocation_state.get("tier") == "gold"

    builder = GraphBuilder()
    builder.add_node(make_agent("router", text("urgent ticket")), "router")
    builder.add_node(make_agent("escalate", text("escalated")), "escalate")
    builder.add_node(make_agent("vip", text("vip")), "vip")
    builder.add_node(make_agent("normal", text("never")), "normal")
    builder.add_edge("router", "escalate", condition=plain)
    builder.add_edge("router", "vip", condition=with_context)
    builder.add_edge("router", "normal", condition=lambda state: "urgent" not in str(state.results["router"]))
    mine = {"tier": "bronze"}
    # Keyword arguments join a new invocation_state over the caller's (whose dict stays as it was).
    result = await builder.build(runtime=runtime).invoke_async("t", mine, tier="gold")
    assert set(result.results) == {"router", "escalate", "vip"}
    assert ("plain", ["router"]) in seen and ("context", "gold") in seen
    assert mine == {"tier": "bronze"}


async def test_async_conditions_are_awaited(runtime: str) -> None:
    async def holds(state: Any) -> bool:
        return "go" in str(state.results["router"])

    async def never(state: Any, *, invocation_state: dict[str, Any]) -> bool:
        return bool(invocation_state.get("never"))

    builder = GraphBuilder()
    builder.add_node(make_agent("router", text("go")), "router")
    builder.add_node(make_agent("taken", text("taken")), "taken")
    builder.add_node(make_agent("skipped", text("never")), "skipped")
    builder.add_edge("router", "taken", condition=holds)
    builder.add_edge("router", "skipped", condition=never)
    graph = builder.build(runtime=runtime)
    result = await graph.invoke_async("t", {"never": False})
    # A coroutine is truthy: evaluated without awaiting it, every async condition held.
    assert set(result.results) == {"router", "taken"}
    edge = next(edge for edge in graph.edges if edge.to_node.node_id == "skipped")
    with pytest.raises(TypeError, match="should_traverse_async"):
        edge.should_traverse(graph.state, {})
    assert await edge.should_traverse_async(graph.state, {"never": True}) is True


async def test_cycle_stops_at_max_node_executions(runtime: str) -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("write", *[text("draft")] * 3), "write")
    builder.add_node(make_agent("review", *[text("again")] * 2), "review")
    builder.add_edge("write", "review")
    builder.add_edge("review", "write", condition=lambda state: True)
    graph = builder.set_entry_point("write").set_max_node_executions(5).reset_on_revisit(True).build(runtime=runtime)
    result = await graph.invoke_async("t")
    assert result.status == Status.FAILED
    assert [n.node_id for n in result.execution_order] == ["write", "review", "write", "review", "write"]
    # reset_on_revisit: each visit starts from the initial (empty) history.
    assert len(graph.nodes["write"].executor.messages) == 2


async def test_a_revisited_node_still_sees_the_inputs_that_came_before(runtime: str) -> None:
    # research -> writer -> reviewer -> writer (once): the second draft needs the research too.
    builder = GraphBuilder()
    builder.add_node(make_agent("research", text("FACTS: x=1")), "research")
    builder.add_node(make_agent("writer", text("draft 1"), text("draft 2")), "writer")
    builder.add_node(make_agent("reviewer", text("needs work"), text("ok")), "reviewer")
    builder.add_edge("research", "writer")
    builder.add_edge("writer", "reviewer")
    builder.add_edge("reviewer", "writer", condition=lambda state: "needs work" in str(state.results["reviewer"]))
    graph = builder.set_entry_point("research").reset_on_revisit(True).build(runtime=runtime)
    result = await graph.invoke_async("write it")
    assert [n.node_id for n in result.execution_order] == ["research", "writer", "reviewer", "writer", "reviewer"]
    texts = [b["text"] for b in graph.nodes["writer"].executor.messages[0]["content"]]  # reset: the second visit
    assert texts[0] == "Original Task: write it"
    assert [t for t in texts if t.startswith("\nFrom ")] == ["\nFrom research:", "\nFrom reviewer:"]
    assert "  - Agent: FACTS: x=1\n" in texts and "  - Agent: needs work\n" in texts


async def test_max_node_executions_is_checked_once_per_batch_as_in_strands(runtime: str) -> None:
    builder = GraphBuilder()
    for name in "abcd":
        builder.add_node(make_agent(name, text(f"{name} out")), name)
    for target in "bcd":
        builder.add_edge("a", target)
    result = await builder.set_max_node_executions(2).build(runtime=runtime).invoke_async("t")
    # One node ran before the fan-out batch: the batch starts under the limit and runs whole.
    assert result.status == Status.COMPLETED
    assert sorted(n.node_id for n in result.execution_order) == ["a", "b", "c", "d"]


def test_unbounded_cycle_is_logged_not_warned(caplog: pytest.LogCaptureFixture) -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("a"), "a")
    builder.add_node(make_agent("b"), "b")
    builder.add_edge("a", "b")
    builder.add_edge("b", "a")
    builder.set_entry_point("a")
    with caplog.at_level(logging.WARNING):
        builder.build(runtime="local")
    assert "cycle" in caplog.text


async def run_to_the_end(graph: Any, mode: str) -> Any:
    """The invocation's result, from ``invoke_async`` or from the last event of ``stream_async``."""
    if mode == "invoke":
        return await graph.invoke_async("t")
    events = [event async for event in graph.stream_async("t")]
    return events[-1]["result"]


@pytest.mark.parametrize("mode", ["invoke", "stream"])
async def test_node_timeout_fails_fast_with_the_strands_text(runtime: str, mode: str) -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("slow", text("late", delay=5)), "slow")
    graph = builder.set_node_timeout(0.1).build(runtime=runtime)
    with pytest.raises(Exception, match=r"^Node 'slow' execution timed out after 0.1s$"):
        await run_to_the_end(graph, mode)
    assert graph.state.status == Status.FAILED
    assert graph.state.results["slow"].status == Status.FAILED
    assert str(graph.state.results["slow"].result) == "Node 'slow' execution timed out after 0.1s"
    assert graph.state.execution_order == []
    assert graph.nodes["slow"].executor.messages == []


async def test_execution_timeout_ends_failed_without_raising(runtime: str) -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("slow", text("late", delay=5)), "slow")
    result = await builder.set_execution_timeout(0.2).build(runtime=runtime).invoke_async("t")
    assert result.status == Status.FAILED
    assert result.results["slow"].status == Status.CANCELLED


@pytest.mark.parametrize("mode", ["invoke", "stream"])
@pytest.mark.parametrize("width", [1, 2])
async def test_execution_timeout_records_stopped_nodes_the_same_way_for_invoke_and_stream(
        runtime: str, mode: str, width: int) -> None:
    """A node the deadline stops ends stopped — not with its agent's own "cancelled" result, which it used to get
    when the agent's cancel signal overtook the task's cancellation (streaming, or a batch of several nodes)."""
    builder = GraphBuilder()
    for index in range(width):
        builder.add_node(make_agent(f"slow{index}", text("late", delay=30)), f"slow{index}")
    graph = builder.set_execution_timeout(0.5 if runtime == "local" else 3).build(runtime=runtime)
    result = await run_to_the_end(graph, mode)
    assert result.status == Status.FAILED
    assert result.execution_order == []
    for index in range(width):
        node_result = result.results[f"slow{index}"]
        assert node_result.status == Status.CANCELLED
        assert isinstance(node_result.result, Exception)
        assert str(node_result.result) == f"Node 'slow{index}' was cancelled"
        assert node_result.execution_count == 1
        assert graph.nodes[f"slow{index}"].executor.messages == []  # its run undone, as a closed stream's


@pytest.mark.parametrize("mode", ["invoke", "stream"])
async def test_execution_timeout_stops_a_nested_graphs_node_the_same_way(runtime: str, mode: str) -> None:
    """The node of a nested graph, too: its agent's run undone, not ended with its own "cancelled" reply."""
    inner = GraphBuilder()
    inner.add_node(make_agent("slow", text("late", delay=30)), "slow")
    nested = inner.build(runtime="local")
    outer = GraphBuilder()
    outer.add_node(nested, "inner")
    outer.add_node(make_agent("other", text("late", delay=30)), "other")
    result = await run_to_the_end(outer.set_execution_timeout(0.5 if runtime == "local" else 3).build(runtime=runtime),
                                  mode)
    assert result.status == Status.FAILED
    assert result.results["inner"].status == Status.CANCELLED
    assert nested.state.results["slow"].status == Status.CANCELLED
    assert str(nested.state.results["slow"].result) == "Node 'slow' was cancelled"
    assert nested.nodes["slow"].executor.messages == []


def failing_graph(policy: str) -> GraphBuilder:
    # root -> bad -> after_bad ; root -> good -> after_good
    builder = GraphBuilder()
    builder.add_node(make_agent("root", text("r")), "root")
    builder.add_node(make_agent("bad", RuntimeError("model exploded")), "bad")
    builder.add_node(make_agent("good", text("g", delay=0.1)), "good")
    builder.add_node(make_agent("after_bad", text("never")), "after_bad")
    builder.add_node(make_agent("after_good", text("ag")), "after_good")
    for source, target in (("root", "bad"), ("root", "good"), ("bad", "after_bad"), ("good", "after_good")):
        builder.add_edge(source, target)
    return builder.set_failure_policy(policy)


async def test_fail_fast_raises_and_cancels_siblings(runtime: str) -> None:
    graph = failing_graph("fail_fast").build(runtime=runtime)
    with pytest.raises(Exception, match="model exploded"):
        await graph.invoke_async("t")
    assert graph.state.results["bad"].status == Status.FAILED
    assert graph.state.results["good"].status == Status.CANCELLED
    assert "after_good" not in graph.state.results


async def test_continue_prunes_only_successors_of_the_failed_node(runtime: str) -> None:
    result = await failing_graph("continue").build(runtime=runtime).invoke_async("t")
    assert result.status == Status.FAILED
    assert result.results["bad"].status == Status.FAILED
    assert result.results["after_good"].status == Status.COMPLETED
    assert result.results["after_bad"].status == Status.CANCELLED
    assert result.failed_nodes == 1 and result.cancelled_nodes == 1


@tool(context=True)
def give_up(tool_context: ToolContext) -> str:
    """Cancel the agent that called this tool."""
    tool_context.agent.cancel()
    return "giving up"


async def test_an_agent_node_that_cancels_itself_fails_the_graph_under_fail_fast(runtime: str) -> None:
    # root -> quitter -> after_quitter ; root -> good -> after_good
    builder = GraphBuilder()
    builder.add_node(make_agent("root", text("r")), "root")
    builder.add_node(make_agent("quitter", tool_call("give_up", {}), text("never"), tools=[give_up]), "quitter")
    builder.add_node(make_agent("after_quitter", text("never")), "after_quitter")
    builder.add_node(make_agent("good", text("g")), "good")
    builder.add_node(make_agent("after_good", text("ag")), "after_good")
    for source, target in (("root", "quitter"), ("root", "good"), ("quitter", "after_quitter"),
                           ("good", "after_good")):
        builder.add_edge(source, target)
    result = await builder.build(runtime=runtime).invoke_async("t")
    assert result.results["quitter"].status == Status.CANCELLED
    assert "after_quitter" not in result.results
    assert result.results["after_good"].status == Status.COMPLETED  # as Strands: other branches finish
    assert result.status == Status.FAILED
    assert (result.completed_nodes, result.cancelled_nodes) == (3, 1)


def cancel_hook(target: str) -> Any:
    def hook(event: BeforeNodeCallEvent) -> None:
        if event.node_id == target:
            event.cancel_node = "not today"
    return hook


async def test_cancel_node_skips_without_failing_under_continue(runtime: str) -> None:
    builder = failing_graph("continue")
    builder.nodes["bad"].executor.model._steps = [text("fine")]  # bad behaves; it is skipped by the hook
    graph = builder.set_hook_providers([]).build(runtime=runtime)
    graph.add_hook(cancel_hook("bad"))
    events = [event async for event in graph.stream_async("t")]
    result = events[-1]["result"]
    assert result.status == Status.COMPLETED
    assert result.results["bad"].status == Status.CANCELLED
    assert result.results["after_bad"].status == Status.CANCELLED
    assert result.results["after_good"].status == Status.COMPLETED
    assert {"type": "multiagent_node_cancel", "node_id": "bad", "message": "not today"} in events


async def test_cancel_node_raises_under_fail_fast(runtime: str) -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("x")), "a")
    graph = builder.build(runtime=runtime)
    graph.add_hook(cancel_hook("a"))
    with pytest.raises(RuntimeError, match="not today"):
        await graph.invoke_async("t")


async def test_nested_graph_and_swarm_nodes(runtime: str) -> None:
    from ray_harness import Swarm
    from ray_harness.testing import tool_call

    inner = GraphBuilder()
    inner.add_node(make_agent("i1", text("inner one")), "i1")
    inner.add_node(make_agent("i2", text("inner two")), "i2")
    inner.add_edge("i1", "i2")
    swarm = Swarm([make_agent("s1", tool_call("handoff_to_agent", {"agent_name": "s2", "message": "yours"}),
                              text("s1 handed")),
                   make_agent("s2", text("swarm answer"))], runtime=runtime)
    outer = GraphBuilder()
    outer.add_node(inner.build(runtime=runtime), "inner")
    outer.add_node(swarm, "team")
    outer.add_node(make_agent("final", text("final answer")), "final")
    outer.add_edge("inner", "team")
    outer.add_edge("team", "final")
    graph = outer.build(runtime=runtime)
    events = [event async for event in graph.stream_async("t")]
    result = events[-1]["result"]
    assert result.status == Status.COMPLETED
    assert isinstance(result.results["inner"].result, MultiAgentResult)
    assert [str(r).strip() for r in result.results["team"].get_agent_results()] == ["s1 handed", "swarm answer"]
    assert result.execution_count == 2 + 2 + 1
    starts = [(e["node_id"], e["node_type"]) for e in events if e["type"] == "multiagent_node_start"]
    assert starts == [("inner", "multiagent"), ("team", "multiagent"), ("final", "agent")]
    nested = [e["event"] for e in events if e["type"] == "multiagent_node_stream" and e["node_id"] == "inner"]
    assert any(inner_event["type"] == "multiagent_node_start" for inner_event in nested)
    final_prompt = [b["text"] for b in graph.nodes["final"].executor.messages[0]["content"]]
    assert "  - Agent: s1 handed\n" in final_prompt and "  - Agent: swarm answer\n" in final_prompt


async def test_stream_events_hooks_and_handoffs(runtime: str) -> None:
    recorder = RecordingHooks()
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("x")), "a")
    builder.add_node(make_agent("b", text("y")), "b")
    builder.add_edge("a", "b")
    graph = builder.set_hook_providers([recorder]).build(runtime=runtime)
    after: list[str] = []

    def on_after(event: AfterNodeCallEvent) -> None:
        after.append(event.node_id)

    graph.add_hook(on_after)
    events = [event async for event in graph.stream_async("t")]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "multiagent_node_start" and kinds[-1] == "multiagent_result"
    assert {"type": "multiagent_handoff", "from_node_ids": ["a"], "to_node_ids": ["b"]} in events
    stops = [e for e in events if e["type"] == "multiagent_node_stop"]
    assert [e["node_id"] for e in stops] == ["a", "b"] and isinstance(stops[0]["node_result"], NodeResult)
    assert after == ["a", "b"]
    assert recorder.names() == ["MultiAgentInitializedEvent", "BeforeMultiAgentInvocationEvent",
                                "BeforeNodeCallEvent", "AfterNodeCallEvent", "BeforeNodeCallEvent",
                                "AfterNodeCallEvent", "AfterMultiAgentInvocationEvent"]


async def test_eager_scheduling_starts_successors_without_waiting_for_the_batch(timeline: Timeline,
                                                                                runtime: str) -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("fast", timeline.step("fast", delay=0.05)), "fast")
    # slow ends only after next started: with batch scheduling next would wait for slow, and slow would fail.
    builder.add_node(make_agent("slow", timeline.step("slow", delay=0.05, wait_for=("next",))), "slow")
    builder.add_node(make_agent("next", timeline.step("next", delay=0.05)), "next")
    builder.add_edge("fast", "next")
    result = await builder.set_scheduling("eager").build(runtime=runtime).invoke_async("t")
    assert result.status == Status.COMPLETED
    assert timeline.at("next", "start") < timeline.at("slow", "end")


def test_limits_accept_none_as_no_limit_as_in_strands() -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("x")), "a")
    builder.set_max_node_executions(3).set_execution_timeout(10).set_node_timeout(5)
    builder.set_max_node_executions(None).set_execution_timeout(None).set_node_timeout(None)
    graph = builder.build(runtime="local")
    assert (graph.max_node_executions, graph.execution_timeout, graph.node_timeout) == (None, None, None)
    assert graph("t").status == Status.COMPLETED


async def test_a_refused_task_fires_no_invocation_hook() -> None:
    recorder = RecordingHooks()
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("x")), "a")
    graph = builder.set_hook_providers([recorder]).build(runtime="local")
    with pytest.raises(ValueError, match="task must be"):
        await graph.invoke_async({"text": "not a list"})
    with pytest.raises(ValueError, match="not interrupted"):
        await graph.invoke_async([{"interruptResponse": {"interruptId": "x", "response": "y"}}])
    # Nothing ran: no Before without its After (an Agent refuses a bad prompt before its hooks too).
    assert recorder.names() == ["MultiAgentInitializedEvent"]
    assert (await graph.invoke_async("t")).status == Status.COMPLETED


async def test_nodes_stopped_by_an_early_end_are_cancelled_not_left_executing() -> None:
    def explode(state: Any) -> bool:
        raise KeyError("condition bug")

    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("a", delay=0.01)), "a")
    builder.add_node(make_agent("slow", text("late", delay=5)), "slow")
    builder.add_node(make_agent("c", text("never")), "c")
    builder.add_edge("a", "c", condition=explode)
    graph = builder.set_scheduling("eager").build(runtime="local")
    with pytest.raises(KeyError, match="condition bug"):
        await graph.invoke_async("t")
    assert graph.nodes["slow"].execution_status == Status.CANCELLED  # was: EXECUTING, after the run ended
    assert graph.state.results["slow"].status == Status.CANCELLED
    assert graph.nodes["slow"] in graph.state.cancelled_nodes

    # The caller stops reading mid-run: the run is over, and so is its node.
    builder = GraphBuilder()
    builder.add_node(make_agent("slow", text("late", delay=5)), "slow")
    graph = builder.build(runtime="local")
    events = graph.stream_async("t")
    async for event in events:
        if event["type"] == "multiagent_node_start":
            break
    await events.aclose()
    assert graph.nodes["slow"].execution_status == Status.CANCELLED


def test_builder_validation() -> None:
    builder = GraphBuilder()
    a = make_agent("a")
    builder.add_node(a, "a")
    with pytest.raises(ValueError, match="Duplicate node instance"):
        builder.add_node(a, "again")
    with pytest.raises(ValueError, match="already exists"):
        builder.add_node(make_agent("x"), "a")
    with pytest.raises(ValueError, match="Target node 'zzz' not found"):
        builder.add_edge("a", "zzz")
    with pytest.raises(ValueError, match="Node 'zzz' not found"):
        builder.set_entry_point("zzz")
    with pytest.raises(ValueError, match="join must be one of"):
        builder.set_join("some")
    with pytest.raises(ValueError, match="failure_policy"):
        builder.set_failure_policy("retry")
    with pytest.raises(ValueError, match="max_node_executions"):
        builder.set_max_node_executions(0)
    builder.add_node(make_agent("b"), "b")
    builder.add_edge("a", "b")
    builder.add_edge("b", "a")
    with pytest.raises(ValueError, match="No entry points"):
        builder.build()
    with pytest.raises(ValueError, match="at least one node"):
        GraphBuilder().build()
    with pytest.raises(ValueError, match="runtime must be"):
        builder.set_entry_point("a").build(runtime="cluster")


def test_ray_runtime_without_the_ray_executor_is_a_clear_import_error() -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("a"), "a")
    with pytest.raises(ImportError, match=r"runtime='ray' needs ray_harness.runtime.multiagent.RayNodeRunner"):
        builder.build(runtime="ray")


async def test_result_round_trips_through_dict(runtime: str) -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("alpha", usage={"inputTokens": 3, "outputTokens": 2, "totalTokens": 5})),
                     "a")
    result = await builder.build(runtime=runtime).invoke_async("t")
    data = result.to_dict()
    again = MultiAgentResult.from_dict(data)
    assert again.status == Status.COMPLETED
    assert str(again) == str(result) == "a: alpha"
    assert again.results["a"].get_agent_results()[0].metrics.accumulated_usage["totalTokens"] == 5
    assert again.to_dict() == data
    with pytest.raises(TypeError, match="'type'"):
        MultiAgentResult.from_dict({"status": "completed"})


def test_sync_call_works() -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("sync")), "a")
    assert builder.build(runtime="local")("t").status == Status.COMPLETED


async def test_invoke_async_skips_unread_events_but_results_hooks_and_histories_match_streaming(
        runtime: str) -> None:
    def build(hooks: RecordingHooks) -> Any:
        inner = GraphBuilder()
        inner.add_node(make_agent("i", text("inner done")), "i")
        builder = GraphBuilder()
        builder.add_node(make_agent("a", text("a done")), "a")
        builder.add_node(make_agent("b", text("b done")), "b")
        builder.add_node(inner.build(runtime=runtime), "nested")
        builder.add_edge("a", "b")
        builder.add_edge("a", "nested")
        builder.set_hook_providers([hooks])
        return builder.build(runtime=runtime)

    streamed_hooks, invoked_hooks = RecordingHooks(), RecordingHooks()
    streamed = build(streamed_hooks)
    events = [event async for event in streamed.stream_async("task")]
    kinds = {event["type"] for event in events}
    assert {"multiagent_node_start", "multiagent_node_stream", "multiagent_node_stop", "multiagent_handoff"} <= kinds
    invoked = build(invoked_hooks)
    result = await invoked.invoke_async("task")
    expected = events[-1]["result"]
    assert result.status == expected.status == Status.COMPLETED
    assert result.execution_order[0].node_id == "a"
    assert {n.node_id for n in result.execution_order} == {n.node_id for n in expected.execution_order}
    assert {k: str(v) for k, v in result.results.items()} == {k: str(v) for k, v in expected.results.items()}
    assert result.accumulated_usage == expected.accumulated_usage
    if runtime == "local":  # with runtime="ray" the graph's hooks run in its orchestrator actor
        assert sorted(invoked_hooks.names()) == sorted(streamed_hooks.names())
    quiet = [event["type"] async for event in build(RecordingHooks())._quiet_stream("task")]
    assert quiet == ["multiagent_result"]
    for node_id in ("a", "b"):
        assert invoked.nodes[node_id].executor.messages == streamed.nodes[node_id].executor.messages


def test_a_graph_built_directly_takes_strands_id_keyword_and_refuses_a_node_twice() -> None:
    """Strands' ``Graph(nodes, edges, entry_points, id=...)``; ours took ``graph_id=`` only (a TypeError for ``id=``)."""
    from ray_harness.multiagent.graph import Graph, GraphEdge, GraphNode

    a, b = GraphNode("a", make_agent("a", text("a done"))), GraphNode("b", make_agent("b", text("b done")))
    graph = Graph({"a": a, "b": b}, [GraphEdge(a, b)], [a], id="review_pipeline", runtime="local")
    assert graph.id == "review_pipeline"
    assert str(graph("go").results["b"]) == "b done\n"
    assert Graph({"a": a}, [], [a], graph_id="older_name", runtime="local").id == "older_name"
    assert Graph({"a": a}, [], [a], runtime="local").id == "default_graph"
    twice = GraphNode("again", a.executor)
    with pytest.raises(ValueError, match="Duplicate node instance"):
        Graph({"a": a, "again": twice}, [], [a], runtime="local")
