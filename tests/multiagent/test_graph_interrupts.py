from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from ray_harness import GraphBuilder, Status, ToolContext, tool
from ray_harness.hooks import BeforeNodeCallEvent
from ray_harness.testing import text, tool_call
from tests.multiagent.conftest import JsonFileStore, Timeline, make_agent


@tool(context=True)
def deploy(tool_context: ToolContext) -> str:
    """Deploy after a human approves."""
    answer = tool_context.interrupt("approval", reason="deploy to prod?")
    return f"deployed ({answer})"


def approval_graph(timeline: Timeline, store: Any = None, *, fresh: bool = False) -> GraphBuilder:
    """A -> {B, C} -> D where B asks a human inside its tool.

    ``fresh``: agents for a new process that resumes from the store (only what is left is scripted).
    """
    builder = GraphBuilder()
    if fresh:
        builder.add_node(make_agent("A"), "A")
        builder.add_node(make_agent("B", timeline.step("B-final", "B deployed", delay=0.01), tools=[deploy]), "B")
        builder.add_node(make_agent("C"), "C")
    else:
        builder.add_node(make_agent("A", timeline.step("A", delay=0.01)), "A")
        builder.add_node(make_agent("B", tool_call("deploy", {}, tool_use_id="dep-1"),
                                    timeline.step("B-final", "B deployed", delay=0.01), tools=[deploy]), "B")
        builder.add_node(make_agent("C", timeline.step("C", delay=0.01)), "C")
    builder.add_node(make_agent("D", timeline.step("D", delay=0.01)), "D")
    for source, target in (("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")):
        builder.add_edge(source, target)
    if store is not None:
        builder.set_session_manager(store)
    return builder


def respond(interrupts: list[Any], answer: Any) -> list[dict[str, Any]]:
    return [{"interruptResponse": {"interruptId": item.id, "response": answer}} for item in interrupts]


async def test_interrupt_before_node_and_resume_runs_only_that_node(timeline: Timeline, runtime: str) -> None:
    builder = GraphBuilder()
    for name in "ABCD":
        builder.add_node(make_agent(name, timeline.step(name, delay=0.01)), name)
    for source, target in (("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")):
        builder.add_edge(source, target)
    graph = builder.build(runtime=runtime)
    answers: list[Any] = []

    def gate(event: BeforeNodeCallEvent) -> None:
        if event.node_id == "B":
            answers.append(event.interrupt("gate", reason="run B?"))

    graph.add_hook(gate)
    events = [event async for event in graph.stream_async("t")]
    first = events[-1]["result"]
    assert first.status == Status.INTERRUPTED
    assert [item.name for item in first.interrupts] == ["gate"]
    assert first.interrupts[0].id.startswith(f"v1:before_node_call:{uuid.uuid5(uuid.NAMESPACE_OID, 'B')}:")
    assert any(e["type"] == "multiagent_node_interrupt" and e["node_id"] == "B" for e in events)
    assert first.results["C"].status == Status.COMPLETED and "B" not in first.results

    second = await graph.invoke_async(respond(first.interrupts, "yes"))
    assert second.status == Status.COMPLETED
    assert answers == ["yes"]
    assert timeline.starts("C") == 1 and timeline.starts("B") == 1 and timeline.starts("D") == 1
    assert [n.node_id for n in second.execution_order] == ["A", "C", "B", "D"]


async def test_interrupt_inside_node_resumes_the_node_agent(timeline: Timeline, runtime: str) -> None:
    graph = approval_graph(timeline).build(runtime=runtime)
    first = await graph.invoke_async("ship it")
    assert first.status == Status.INTERRUPTED
    assert first.results["C"].status == Status.COMPLETED
    assert [item.name for item in first.interrupts] == ["approval"]
    with pytest.raises(TypeError):
        await graph.invoke_async("a new task while interrupted")
    with pytest.raises(KeyError):
        await graph.invoke_async([{"interruptResponse": {"interruptId": "nope", "response": 1}}])

    second = await graph.invoke_async(respond(first.interrupts, "approved"))
    assert second.status == Status.COMPLETED
    assert timeline.starts("C") == 1 and timeline.starts("A") == 1 and timeline.starts("D") == 1
    b_messages = graph.nodes["B"].executor.messages
    assert any(block.get("toolResult", {}).get("content") == [{"text": "deployed (approved)"}]
               for message in b_messages for block in message["content"])
    assert "B deployed" in str(second.results["B"])


async def test_new_graph_instance_resumes_from_the_session_store(tmp_path: Path, timeline: Timeline,
                                                                 runtime: str) -> None:
    store = JsonFileStore(tmp_path / "graph.json")
    first = await approval_graph(timeline, store).build(runtime=runtime).invoke_async("ship it")
    assert first.status == Status.INTERRUPTED
    assert store.writes > 0

    # "Another process": new agents, new graph, same store. A and C are done and have no script left.
    restored = approval_graph(timeline, JsonFileStore(tmp_path / "graph.json"), fresh=True).build(runtime=runtime)
    assert restored.state.status == Status.INTERRUPTED
    second = await restored.invoke_async(respond(first.interrupts, "ok"))
    assert second.status == Status.COMPLETED
    assert set(second.results) == {"A", "B", "C", "D"}
    assert timeline.starts("D") == 1
    d_prompt = [b["text"] for b in restored.nodes["D"].executor.messages[0]["content"]]
    assert "  - Agent: B deployed\n" in d_prompt and "  - Agent: C done\n" in d_prompt

    # A finished run in the store does not resume: the next graph starts over.
    again = approval_graph(timeline, JsonFileStore(tmp_path / "graph.json")).build(runtime=runtime)
    assert again.state.status == Status.PENDING


async def test_resume_through_file_session_manager(tmp_path: Path, timeline: Timeline, runtime: str) -> None:
    session = pytest.importorskip("ray_harness.session")
    first_graph = approval_graph(timeline, session.FileSessionManager("run-1", storage_dir=str(tmp_path))).build(
        runtime=runtime)
    first = await first_graph.invoke_async("ship it")
    assert first.status == Status.INTERRUPTED
    restored = approval_graph(timeline, session.FileSessionManager("run-1", storage_dir=str(tmp_path)),
                              fresh=True).build(runtime=runtime)
    second = await restored.invoke_async(respond(first.interrupts, "ok"))
    assert second.status == Status.COMPLETED


async def test_interrupt_inside_nested_graph_surfaces_and_resumes(runtime: str) -> None:
    inner = GraphBuilder()
    inner.add_node(make_agent("deployer", tool_call("deploy", {}, tool_use_id="dep-2"), text("inner done"),
                              tools=[deploy]), "deployer")
    outer = GraphBuilder()
    outer.add_node(inner.build(runtime=runtime), "inner")
    outer.add_node(make_agent("after", text("after done")), "after")
    outer.add_edge("inner", "after")
    graph = outer.build(runtime=runtime)
    first = await graph.invoke_async("t")
    assert first.status == Status.INTERRUPTED
    assert first.results.get("inner") is None
    second = await graph.invoke_async(respond(first.interrupts, "fine"))
    assert second.status == Status.COMPLETED
    assert str(second.results["after"]).strip() == "after done"


async def test_what_a_node_spent_before_its_interrupt_counts(runtime: str) -> None:
    usage = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
    builder = GraphBuilder()
    builder.add_node(make_agent("B", tool_call("deploy", {}, usage=usage), text("deployed", usage=usage),
                                tools=[deploy]), "B")
    graph = builder.build(runtime=runtime)
    first = await graph.invoke_async("ship it")
    assert first.status == Status.INTERRUPTED
    assert first.accumulated_usage["totalTokens"] == 15 and "B" not in first.results
    node_result = graph.nodes["B"].result
    assert node_result is not None and node_result.status == Status.INTERRUPTED
    answer = [{"interruptResponse": {"interruptId": first.interrupts[0].id, "response": "yes"}}]
    second = await graph.invoke_async(answer)
    assert second.status == Status.COMPLETED
    assert second.accumulated_usage["totalTokens"] == 30  # both model calls, each once
    assert second.results["B"].accumulated_usage["totalTokens"] == 15  # the resumed run's own
