from __future__ import annotations

import pytest

from ray_harness import Agent, ToolContext, tool
from ray_harness.hooks import AfterInvocationEvent, AfterToolsEvent, BeforeToolCallEvent, BeforeToolsEvent
from ray_harness.interrupts import Interrupt, InterruptState
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls
from ray_harness.tools import SequentialToolExecutor

RAN: list[str] = []


@tool
def safe(x: str) -> str:
    """Safe tool."""
    RAN.append(f"safe:{x}")
    return f"safe {x}"


@tool
def risky(x: str) -> str:
    """Risky tool."""
    RAN.append(f"risky:{x}")
    return f"risky {x}"


def approve_risky(event: BeforeToolCallEvent) -> None:
    if event.tool_use["name"] == "risky":
        answer = event.interrupt("approval", reason={"input": event.tool_use["input"]})
        if answer != "approve":
            event.cancel_tool = "not approved"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def _respond(*pairs: tuple[Interrupt, object]) -> list[dict]:
    return [{"interruptResponse": {"interruptId": i.id, "response": r}} for i, r in pairs]


def test_interrupt_then_resume_runs_only_interrupted_tool_without_calling_model() -> None:
    model = ScriptedModel(tool_calls(("safe", {"x": "1"}, "s1"), ("risky", {"x": "2"}, "r1")), text("all done"))
    agent = Agent(model, tools=[safe, risky], hooks=[approve_risky])
    first = agent("go")
    assert first.stop_reason == "interrupt"
    (pending,) = first.interrupts
    assert pending.name == "approval" and pending.reason == {"input": {"x": "2"}}
    assert pending.id.startswith("v1:before_tool_call:r1:")
    assert RAN == ["safe:1"]
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]

    second = agent(_respond((pending, "approve")))
    assert str(second) == "all done\n"
    assert RAN == ["safe:1", "risky:2"]  # the completed tool did not run again
    assert len(model.calls) == 2  # the interrupted turn was replayed, not re-asked
    results = [b["toolResult"]["toolUseId"] for b in agent.messages[2]["content"]]
    assert results == ["s1", "r1"]  # completed results keep their place


def test_denied_response_cancels_the_tool() -> None:
    agent = Agent(ScriptedModel(tool_call("risky", {"x": "2"}, tool_use_id="r"), text("ok")), tools=[risky],
                  hooks=[approve_risky])
    (pending,) = agent("go").interrupts
    agent(_respond((pending, "deny")))
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "not approved"}]
    assert RAN == []


def test_several_interrupts_collected_and_partial_answers_reraise_the_rest() -> None:
    agent = Agent(ScriptedModel(tool_calls(("risky", {"x": "a"}, "ra"), ("risky", {"x": "b"}, "rb")), text("ok")),
                  tools=[risky], hooks=[approve_risky])
    first = agent("go")
    assert sorted(i.id.split(":")[2] for i in first.interrupts) == ["ra", "rb"]
    by_use = {i.id.split(":")[2]: i for i in first.interrupts}
    second = agent(_respond((by_use["ra"], "approve")))
    assert second.stop_reason == "interrupt"
    assert [i.id for i in second.interrupts] == [by_use["rb"].id]
    assert RAN == ["risky:a"]
    third = agent(_respond((by_use["rb"], "approve")))
    assert third.stop_reason == "end_turn" and RAN == ["risky:a", "risky:b"]


def test_sequential_executor_raises_one_interrupt_per_resume_and_later_tools_wait() -> None:
    model = ScriptedModel(
        tool_calls(("risky", {"x": "a"}, "ra"), ("safe", {"x": "b"}, "sb"), ("risky", {"x": "c"}, "rc")),
        text("ok"),
    )
    agent = Agent(model, tools=[safe, risky], hooks=[approve_risky], tool_executor=SequentialToolExecutor())
    first = agent("go")
    assert first.stop_reason == "interrupt"
    assert [i.id.split(":")[2] for i in first.interrupts] == ["ra"]
    assert RAN == []  # the later tools wait for the first to be approved
    second = agent(_respond((first.interrupts[0], "approve")))
    assert second.stop_reason == "interrupt"
    assert [i.id.split(":")[2] for i in second.interrupts] == ["rc"]
    assert RAN == ["risky:a", "safe:b"]
    third = agent(_respond((second.interrupts[0], "approve")))
    assert third.stop_reason == "end_turn"
    assert RAN == ["risky:a", "safe:b", "risky:c"]
    assert len(model.calls) == 2
    results = [b["toolResult"]["toolUseId"] for b in agent.messages[2]["content"]]
    assert results == ["ra", "sb", "rc"]


def test_tool_context_interrupt() -> None:
    @tool(context=True)
    def ask(question: str, tool_context: ToolContext) -> str:
        """Ask the human."""
        return f"human said {tool_context.interrupt('question', reason=question)}"

    agent = Agent(ScriptedModel(tool_call("ask", {"question": "color?"}, tool_use_id="q"), text("ok")), tools=[ask])
    (pending,) = agent("go").interrupts
    assert pending.id.startswith("v1:tool_call:q:")
    agent(_respond((pending, "blue")))
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "human said blue"}]


def test_before_tools_interrupt() -> None:
    def gate(event: BeforeToolsEvent) -> None:
        if event.interrupt("batch", reason="run these tools?") != "yes":
            event.cancel = "batch rejected"

    agent = Agent(ScriptedModel(tool_call("safe", {"x": "1"}), text("ok")), tools=[safe], hooks=[gate])
    (pending,) = agent("go").interrupts
    assert pending.id.startswith("v1:before_tools:")
    agent(_respond((pending, "no")))
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "batch rejected"}]


def test_same_interrupt_name_twice_in_one_pass_is_an_error() -> None:
    def twice(event: BeforeToolsEvent) -> None:
        event.interrupt("dup")

    def again(event: BeforeToolsEvent) -> None:
        event.interrupt("dup")

    agent = Agent(ScriptedModel(tool_call("safe", {"x": "1"})), tools=[safe], hooks=[twice, again])
    with pytest.raises(ValueError, match="more than once"):
        agent("go")


def test_resume_errors() -> None:
    agent = Agent(ScriptedModel(tool_call("risky", {"x": "2"}), text("ok")), tools=[risky], hooks=[approve_risky])
    (pending,) = agent("go").interrupts
    with pytest.raises(TypeError):
        agent("a plain prompt")
    with pytest.raises(TypeError):
        agent([{"text": "hi"}])
    with pytest.raises(KeyError):
        agent([{"interruptResponse": {"interruptId": "v1:unknown", "response": 1}}])
    agent(_respond((pending, "approve")))  # still resumable after bad attempts
    assert RAN == ["risky:2"]


@pytest.mark.parametrize(("response", "named"), [
    ({"interruptId": "ID"}, "missing 'response'"),
    ({"response": "approve"}, "missing 'interruptId'"),
    ("approve", r"prompt\[1\]\['interruptResponse'\] must be a dict"),
    ({"interruptId": 7, "response": "approve"}, r"\['interruptId'\] must be a str, got int"),
])
def test_a_malformed_response_names_the_field_and_changes_nothing(response: object, named: str) -> None:
    agent = Agent(ScriptedModel(tool_call("risky", {"x": "2"}), text("ok")), tools=[risky], hooks=[approve_risky])
    (pending,) = agent("go").interrupts
    if isinstance(response, dict) and response.get("interruptId") == "ID":
        response = {**response, "interruptId": pending.id}
    good = {"interruptResponse": {"interruptId": pending.id, "response": "approve"}}
    with pytest.raises(TypeError, match=named):
        agent([good, {"interruptResponse": response}])
    assert pending.response is None and RAN == []  # the good block before it was not applied
    agent([good])
    assert RAN == ["risky:2"]


def test_direct_tool_call_refused_while_interrupted() -> None:
    agent = Agent(ScriptedModel(tool_call("risky", {"x": "2"})), tools=[risky, safe], hooks=[approve_risky])
    agent("go")
    with pytest.raises(RuntimeError, match="interrupted"):
        agent.tool.safe(x="1")


def test_interrupt_state_round_trips_and_resumes_in_a_new_agent() -> None:
    model = ScriptedModel(tool_call("risky", {"x": "2"}, tool_use_id="r"), text("resumed"))
    agent = Agent(model, tools=[risky], hooks=[approve_risky])
    (pending,) = agent("go").interrupts
    saved = agent._interrupt_state.to_dict()
    messages = [dict(m) for m in agent.messages]

    fresh = Agent(ScriptedModel(text("resumed")), messages=messages, tools=[risky], hooks=[approve_risky])
    fresh._interrupt_state = InterruptState.from_dict(saved)
    assert str(fresh(_respond((pending, "approve")))) == "resumed\n"
    assert RAN == ["risky:2"]


def test_an_after_invocation_hook_may_answer_the_interrupts_by_resuming() -> None:
    # Strands: AfterInvocationEvent.resume re-invokes with any input, interrupt responses included.
    def auto_approve(event: AfterInvocationEvent) -> None:
        if event.result is not None and event.result.stop_reason == "interrupt":
            event.resume = _respond(*((item, "approve") for item in event.result.interrupts))

    agent = Agent(ScriptedModel(tool_call("risky", {"x": "3"}), text("approved and done")), tools=[risky],
                  hooks=[approve_risky, auto_approve])
    result = agent("go")
    assert (result.stop_reason, str(result)) == ("end_turn", "approved and done\n")
    assert RAN == ["risky:3"]


def test_a_resume_whose_next_model_call_fails_keeps_the_results_of_the_tools_that_ran() -> None:
    agent = Agent(ScriptedModel(tool_call("risky", {"x": "4"}, tool_use_id="r4"), RuntimeError("model down")),
                  tools=[risky], hooks=[approve_risky])
    (pending,) = agent("go").interrupts
    with pytest.raises(RuntimeError, match="model down"):
        agent(_respond((pending, "approve")))
    assert RAN == ["risky:4"]
    # The tool ran: its result stays (the next prompt must not tell the model it was interrupted).
    assert agent.messages[-1]["content"][0]["toolResult"]["toolUseId"] == "r4"
    assert agent.messages[-1]["content"][0]["toolResult"]["status"] == "success"
    assert not agent.interrupt_state.activated


def test_after_tools_pairs_before_tools_when_the_batch_stops_on_an_interrupt() -> None:
    seen: list[tuple[str, list[str]]] = []

    def before(event: BeforeToolsEvent) -> None:
        seen.append(("before", []))

    def after(event: AfterToolsEvent) -> None:
        seen.append(("after", [block["toolResult"]["toolUseId"] for block in event.message["content"]]))

    model = ScriptedModel(tool_calls(("safe", {"x": "1"}, "s1"), ("risky", {"x": "2"}, "r1")), text("done"))
    agent = Agent(model, tools=[safe, risky], hooks=[approve_risky, before, after])
    (pending,) = agent("go").interrupts
    assert seen == [("before", []), ("after", ["s1"])]  # as Strands: the results the batch has
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]  # nothing added to the history
    agent(_respond((pending, "approve")))
    assert seen[2:] == [("before", []), ("after", ["s1", "r1"])]
