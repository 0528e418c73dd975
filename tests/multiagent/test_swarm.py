from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ray_harness import Status, Swarm, ToolContext, tool
from ray_harness.hooks import AfterNodeCallEvent, BeforeNodeCallEvent
from ray_harness.testing import text, tool_call, tool_calls
from tests.multiagent.conftest import JsonFileStore, make_agent


def handoff(target: str, message: str = "over to you", context: dict[str, Any] | None = None) -> Any:
    payload: dict[str, Any] = {"agent_name": target, "message": message}
    if context is not None:
        payload["context"] = context
    return tool_call("handoff_to_agent", payload)


async def test_handoff_chain_with_shared_context(runtime: str) -> None:
    researcher = make_agent("researcher", handoff("coder", "write the code", {"finding": "use a dict"}),
                            text("research handed over"), description="Finds facts")
    coder = make_agent("coder", handoff("reviewer", "please review"), text("code written"))
    reviewer = make_agent("reviewer", text("looks good"))
    swarm = Swarm([researcher, coder, reviewer], runtime=runtime)
    events = [event async for event in swarm.stream_async("build a cache")]
    result = events[-1]["result"]
    assert result.status == Status.COMPLETED
    assert [node.node_id for node in result.node_history] == ["researcher", "coder", "reviewer"]
    assert result.execution_count == 3
    handoffs = [e for e in events if e["type"] == "multiagent_handoff"]
    assert handoffs[0] == {"type": "multiagent_handoff", "from_node_ids": ["researcher"],
                           "to_node_ids": ["coder"], "message": "write the code"}
    prompt = coder.messages[0]["content"][0]["text"]
    assert prompt.startswith("Context:\nHandoff Message: write the code\n\nUser Request: build a cache\n\n")
    assert "Previous agents who worked on this: researcher\n\n" in prompt
    assert "Shared knowledge from previous agents:\n• researcher: {'finding': 'use a dict'}\n" in prompt
    assert "Agent name: researcher. Agent description: Finds facts\n" in prompt
    assert "Agent name: reviewer.\n" in prompt
    assert prompt.endswith("If you don't hand off to another agent, the swarm will consider the task complete.\n\n")
    assert "Previous agents who worked on this: researcher → coder" in reviewer.messages[0]["content"][0]["text"]
    assert str(result).splitlines()[-1] == "reviewer: looks good"


async def test_unknown_target_is_an_error_result_for_the_model(runtime: str) -> None:
    lone = make_agent("lone", handoff("ghost"), text("fine, I finish it myself"))
    other = make_agent("other")
    result = await Swarm([lone, other], runtime=runtime).invoke_async("t")
    assert result.status == Status.COMPLETED
    assert [n.node_id for n in result.node_history] == ["lone"]
    tool_result = lone.messages[2]["content"][0]["toolResult"]
    assert tool_result["status"] == "error"
    assert tool_result["content"] == [{"text": "Error: Agent 'ghost' not found in swarm"}]


async def test_ping_pong_is_detected(runtime: str) -> None:
    ping = make_agent("ping", *[handoff("pong"), text("to pong")] * 3)
    pong = make_agent("pong", *[handoff("ping"), text("to ping")] * 3)
    swarm = Swarm([ping, pong], repetitive_handoff_detection_window=4, repetitive_handoff_min_unique_agents=3,
                  runtime=runtime)
    result = await swarm.invoke_async("t")
    assert result.status == Status.FAILED
    assert [n.node_id for n in result.node_history] == ["ping", "pong", "ping", "pong"]
    assert swarm.state.stop_reason == "Repetitive handoff: 2 unique nodes out of 4 recent iterations"


async def test_max_handoffs_ends_failed(runtime: str) -> None:
    a = make_agent("a", *[handoff("b"), text("x")] * 2)
    b = make_agent("b", *[handoff("a"), text("y")] * 2)
    result = await Swarm([a, b], max_handoffs=3, runtime=runtime).invoke_async("t")
    assert result.status == Status.FAILED
    assert len(result.node_history) == 3


async def test_member_failure_and_timeout_end_failed_without_raising(runtime: str) -> None:
    broken = make_agent("broken", RuntimeError("provider down"))
    result = await Swarm([broken], runtime=runtime).invoke_async("t")
    assert result.status == Status.FAILED
    assert "provider down" in str(result.results["broken"].result)

    slow = make_agent("slow", text("late", delay=5))
    result = await Swarm([slow], node_timeout=0.1, runtime=runtime).invoke_async("t")
    assert result.status == Status.FAILED
    assert str(result.results["slow"].result) == "Node 'slow' execution timed out after 0.1s"

    # The run's own deadline coming first is reported as that (Strands' text), not as the member's timeout.
    slow = make_agent("slow", text("late", delay=5))
    result = await Swarm([slow], execution_timeout=0.1, runtime=runtime).invoke_async("t")
    assert result.status == Status.FAILED
    assert str(result.results["slow"].result) == "Execution timed out: 0.1s"


def test_construction_errors() -> None:
    a = make_agent("a")
    with pytest.raises(ValueError, match="not unique"):
        Swarm([a, make_agent("a")])
    with pytest.raises(ValueError, match="Duplicate node instance"):
        Swarm([a, a])

    @tool
    def handoff_to_agent(agent_name: str) -> str:
        """Mine."""
        return agent_name

    with pytest.raises(ValueError, match="already has a tool named 'handoff_to_agent'"):
        Swarm([make_agent("x", tools=[handoff_to_agent])])
    with pytest.raises(ValueError, match="Entry point agent not found"):
        Swarm([make_agent("m")], entry_point=make_agent("outsider"))
    with pytest.raises(ValueError, match="Entry point agent not found"):
        Swarm([make_agent("n")], entry_point="nobody")


async def test_entry_point_by_name_and_members_keep_history(runtime: str) -> None:
    first = make_agent("first", handoff("second"), text("passed"), text("second call answer"))
    second = make_agent("second", handoff("first"), text("passed back"))
    swarm = Swarm([second, first], entry_point="first", runtime=runtime)
    result = await swarm.invoke_async("t")
    assert [n.node_id for n in result.node_history] == ["first", "second", "first"]
    # first kept its conversation: its second turn comes after the first one.
    assert len(first.messages) == 6


async def test_reset_members_starts_each_turn_fresh(runtime: str) -> None:
    first = make_agent("first", handoff("second"), text("passed"), text("second call answer"))
    second = make_agent("second", handoff("first"), text("passed back"))
    result = await Swarm([first, second], reset_members=True, runtime=runtime).invoke_async("t")
    assert result.status == Status.COMPLETED
    assert len(first.messages) == 2


@tool(context=True)
def pay(amount: int, tool_context: ToolContext) -> str:
    """Pay after approval."""
    return f"paid {amount} ({tool_context.interrupt('approve payment', reason=amount)})"


async def test_interrupts_before_and_inside_members_resume(tmp_path: Path, runtime: str) -> None:
    store = JsonFileStore(tmp_path / "swarm.json")
    clerk = make_agent("clerk", handoff("cashier", "pay 5"), text("handed"))
    cashier = make_agent("cashier", tool_call("pay", {"amount": 5}), text("payment done"), tools=[pay])
    swarm = Swarm([clerk, cashier], session_manager=store, runtime=runtime)
    asked: list[Any] = []

    def gate(event: BeforeNodeCallEvent) -> None:
        if event.node_id == "cashier":
            asked.append(event.interrupt("open till"))

    swarm.add_hook(gate)
    first = await swarm.invoke_async("buy")
    assert first.status == Status.INTERRUPTED
    assert [item.name for item in first.interrupts] == ["open till"]
    second = await swarm.invoke_async([{"interruptResponse": {"interruptId": first.interrupts[0].id,
                                                              "response": "opened"}}])
    assert second.status == Status.INTERRUPTED
    assert [item.name for item in second.interrupts] == ["approve payment"]
    assert asked == ["opened"]

    # A new swarm from the store finishes the member's interrupted tool call.
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


def test_handoff_tool_spec_is_the_strands_spec() -> None:
    member = make_agent("solo")
    Swarm([member], runtime="local")
    spec = member.tool_registry.get("handoff_to_agent").tool_spec
    assert spec["description"] == ("Transfer control to another agent in the swarm for specialized help.\n\n"
                                   "Returns:\n    Confirmation of handoff initiation")
    assert spec["inputSchema"]["json"]["properties"]["context"] == {
        "default": None, "description": "Additional context to share with the next agent", "type": "object"}
    assert spec["inputSchema"]["json"]["required"] == ["agent_name", "message"]


async def test_a_bad_context_key_is_refused_to_the_model_not_fatal_to_the_swarm(runtime: str) -> None:
    sender = make_agent("sender", handoff("receiver", "take it", {" ": 1}), handoff("receiver", "", {"ok": 1}),
                        text("sent"))
    receiver = make_agent("receiver", text("received"))
    swarm = Swarm([sender, receiver], runtime=runtime)
    events = [event async for event in swarm.stream_async("t")]
    result = events[-1]["result"]
    assert result.status == Status.COMPLETED
    assert [n.node_id for n in result.node_history] == ["sender", "receiver"]
    refused = sender.messages[2]["content"][0]["toolResult"]
    assert refused["status"] == "error"
    assert refused["content"] == [{"text": "Error in handoff: Key cannot be empty"}]
    assert swarm.shared_context.context == {"sender": {"ok": 1}}
    # An empty handoff message is announced with Strands' default text.
    handoffs = [e for e in events if e["type"] == "multiagent_handoff"]
    assert handoffs[0]["message"] == "Agent handoff occurred"


async def test_an_interrupted_member_reports_its_result_and_usage(runtime: str) -> None:
    clerk = make_agent("clerk", handoff("cashier", "pay 5"), text("handed"))
    cashier = make_agent("cashier", tool_call("pay", {"amount": 5}), text("payment done"), tools=[pay])
    swarm = Swarm([clerk, cashier], runtime=runtime)
    events = [event async for event in swarm.stream_async("buy")]
    first = events[-1]["result"]
    assert first.status == Status.INTERRUPTED
    kinds = [(e["type"], e.get("node_id")) for e in events if e["type"] != "multiagent_node_stream"]
    assert kinds[-3:] == [("multiagent_node_stop", "cashier"), ("multiagent_node_interrupt", "cashier"),
                          ("multiagent_result", None)]
    interrupted = first.results["cashier"]
    assert interrupted.status == Status.INTERRUPTED
    assert interrupted.accumulated_usage["totalTokens"] > 0
    assert first.accumulated_usage["totalTokens"] == (first.results["clerk"].accumulated_usage["totalTokens"]
                                                      + interrupted.accumulated_usage["totalTokens"])
    assert [n.node_id for n in first.node_history] == ["clerk"]

    second = await swarm.invoke_async([{"interruptResponse": {"interruptId": first.interrupts[0].id,
                                                              "response": "ok"}}])
    assert second.status == Status.COMPLETED
    # Every model call counts once: the turn before the interrupt and the resumed one.
    assert second.accumulated_usage["totalTokens"] == (first.accumulated_usage["totalTokens"]
                                                       + second.results["cashier"].accumulated_usage["totalTokens"])


async def test_a_member_stopped_by_its_hook_never_starts(runtime: str) -> None:
    a = make_agent("a", handoff("b"), text("x"))
    b = make_agent("b", text("y"))
    swarm = Swarm([a, b], runtime=runtime)

    def gate(event: BeforeNodeCallEvent) -> None:
        if event.node_id == "b":
            event.cancel_node = "not b"

    swarm.add_hook(gate)
    events = [event async for event in swarm.stream_async("t")]
    assert [e["node_id"] for e in events if e["type"] == "multiagent_node_start"] == ["a"]
    assert events[-2] == {"type": "multiagent_node_cancel", "node_id": "b", "message": "not b"}


async def test_a_handoff_made_before_an_interrupt_stands_after_the_resume(tmp_path: Path, runtime: str) -> None:
    # The model was told "Handing off to clerk": finishing the interrupted turn must not drop that handoff,
    # also when a new Swarm resumes from the session.
    both = tool_calls(("handoff_to_agent", {"agent_name": "clerk", "message": "receipt please",
                                            "context": {"paid": True}}, "h1"), ("pay", {"amount": 5}, "p1"))
    store = JsonFileStore(tmp_path / "swarm.json")
    swarm = Swarm([make_agent("cashier", both, tools=[pay]), make_agent("clerk")], session_manager=store,
                  runtime=runtime)
    first = await swarm.invoke_async("buy")
    assert first.status == Status.INTERRUPTED

    clerk = make_agent("clerk", text("receipt"))
    restored = Swarm([make_agent("cashier", text("payment done"), tools=[pay]), clerk],
                     session_manager=JsonFileStore(tmp_path / "swarm.json"), runtime=runtime)
    events = [event async for event in restored.stream_async(
        [{"interruptResponse": {"interruptId": first.interrupts[0].id, "response": "yes"}}])]
    result = events[-1]["result"]
    assert result.status == Status.COMPLETED
    assert [n.node_id for n in result.node_history] == ["cashier", "clerk"]
    assert [e["message"] for e in events if e["type"] == "multiagent_handoff"] == ["receipt please"]
    assert restored.shared_context.context == {"cashier": {"paid": True}}
    assert clerk.messages[0]["content"][0]["text"].startswith("Context:\nHandoff Message: receipt please\n\n")


def test_after_node_call_hooks_see_the_handoff_node_until_it_runs() -> None:
    """Strands' ``SwarmState.handoff_node``: the next member from the end of a member's run until it starts."""
    seen: list[tuple[str, str | None, str | None]] = []

    def after(event: AfterNodeCallEvent) -> None:
        state = event.source.state
        seen.append((event.node_id, state.handoff_node and state.handoff_node.node_id,
                     state.current_node and state.current_node.node_id))

    researcher = make_agent("researcher", handoff("coder", "write it"), text("handed over"))
    coder = make_agent("coder", text("code written"))
    swarm = Swarm([researcher, coder], hooks=[after], runtime="local")
    assert swarm("build").status == Status.COMPLETED
    assert seen == [("researcher", "coder", "researcher"), ("coder", None, "coder")]
    assert swarm.state.handoff_node is None
