from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Agent, HookOrder, HookRegistry
from ray_harness.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AfterToolCallEvent,
    AfterToolsEvent,
    AgentInitializedEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    BeforeToolsEvent,
    MessageAddedEvent,
)
from ray_harness.testing import RecordingHooks, ScriptedModel, text, tool_call
from ray_harness.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _agent(*steps, **kwargs) -> Agent:
    return Agent(ScriptedModel(*steps), tools=[add], **kwargs)


def test_event_fields_are_read_only_except_the_whitelist() -> None:
    agent = _agent()
    event = BeforeToolCallEvent(agent=agent, selected_tool=None, tool_use={"toolUseId": "t", "name": "x", "input": {}})
    event.cancel_tool = "no"
    event.tool_use = {"toolUseId": "t", "name": "y", "input": {}}
    event.selected_tool = None
    with pytest.raises(AttributeError, match="not writable"):
        event.agent = None  # type: ignore[misc]
    with pytest.raises(AttributeError, match="not writable"):
        AfterToolsEvent(agent=agent, message={"role": "user", "content": []}).message = {}  # type: ignore[misc]
    with pytest.raises(AttributeError, match="not writable"):
        MessageAddedEvent(agent=agent, message={"role": "user", "content": []}).message = {}  # type: ignore[misc]


@pytest.mark.parametrize(
    ("event_type", "writable"),
    [
        (BeforeInvocationEvent, {"messages", "cancel"}),
        (AfterInvocationEvent, {"resume"}),
        (BeforeModelCallEvent, {"cancel"}),
        (AfterModelCallEvent, {"retry"}),
        (BeforeToolsEvent, {"cancel"}),
        (AfterToolsEvent, {"end_turn"}),
        (BeforeToolCallEvent, {"cancel_tool", "selected_tool", "tool_use"}),
        (AfterToolCallEvent, {"result", "retry"}),
    ],
)
def test_write_whitelists(event_type: type, writable: set[str]) -> None:
    assert set(event_type._writable) == writable


def test_order_values() -> None:
    assert (HookOrder.SDK_FIRST, HookOrder.INTERVENTION_OUTPUT, HookOrder.DEFAULT, HookOrder.INTERVENTION_INPUT,
            HookOrder.SDK_LAST) == (-100, -90, 0, 90, 100)


def test_order_then_registration_and_after_events_reverse_within_an_order() -> None:
    seen: list[str] = []
    agent = _agent(text("hi"))
    for label, order in [("d1", 0), ("first", -100), ("d2", 0), ("last", 100)]:
        agent.hooks.add_callback(BeforeModelCallEvent, lambda e, label=label: seen.append(f"before:{label}"), order)
        agent.hooks.add_callback(AfterModelCallEvent, lambda e, label=label: seen.append(f"after:{label}"), order)
    agent("go")
    assert seen == ["before:first", "before:d1", "before:d2", "before:last",
                    "after:first", "after:d2", "after:d1", "after:last"]


def test_full_event_sequence_of_a_tool_round_trip() -> None:
    recorder = RecordingHooks()
    agent = _agent(tool_call("add", {"a": 1, "b": 2}), text("3"), hooks=[recorder])
    agent("1+2")
    assert recorder.names() == [
        "AgentInitializedEvent", "BeforeInvocationEvent", "MessageAddedEvent", "BeforeModelCallEvent",
        "AfterModelCallEvent", "MessageAddedEvent", "BeforeToolsEvent", "BeforeToolCallEvent", "AfterToolCallEvent",
        "AfterToolsEvent", "MessageAddedEvent", "BeforeModelCallEvent", "AfterModelCallEvent", "MessageAddedEvent",
        "AfterInvocationEvent",
    ]
    (after,) = recorder.of(AfterInvocationEvent)
    assert after.result is not None and after.result.stop_reason == "end_turn"


async def test_async_and_sync_callbacks_and_inferred_type() -> None:
    seen: list[str] = []

    async def on_before(event: BeforeModelCallEvent) -> None:
        seen.append("async")

    def on_added(event: MessageAddedEvent) -> None:
        seen.append(event.message["role"])

    agent = _agent(text("hi"))
    agent.add_hook(on_before)
    agent.add_hook(on_added)
    await agent.invoke_async("x")
    assert seen == ["user", "async", "assistant"]


def test_hook_type_inference_requires_annotation() -> None:
    with pytest.raises(ValueError, match="annotate"):
        HookRegistry().add_callback(None, lambda e: None)


def test_one_callback_for_several_events_by_list_or_union_annotation_as_in_strands() -> None:
    seen: list[str] = []

    def on_model(event: BeforeModelCallEvent | AfterModelCallEvent) -> None:
        seen.append(type(event).__name__)

    def on_invocation(event) -> None:  # type: ignore[no-untyped-def]
        seen.append(type(event).__name__)

    agent = _agent(text("hi"), hooks=[on_model])
    agent.add_hook(on_invocation, [BeforeInvocationEvent, AfterInvocationEvent])  # type: ignore[arg-type]
    agent.hooks.add_callback([MessageAddedEvent, MessageAddedEvent], lambda e: seen.append("added"))
    agent("x")
    assert seen == ["BeforeInvocationEvent", "added", "BeforeModelCallEvent", "AfterModelCallEvent", "added",
                    "AfterInvocationEvent"]
    with pytest.raises(ValueError, match="empty"):
        HookRegistry().add_callback([], lambda e: None)
    with pytest.raises(TypeError, match="hook event class"):
        HookRegistry().add_callback([BeforeModelCallEvent, int], lambda e: None)  # type: ignore[list-item]


def test_registry_takes_strands_orders_and_asks_has_callbacks_without_a_type() -> None:
    registry = HookRegistry()
    assert registry.has_callbacks() is False
    seen: list[str] = []
    registry.add_callback(BeforeModelCallEvent, lambda e: seen.append("routing"), order=HookOrder.MODEL_ROUTING)
    registry.add_callback(BeforeModelCallEvent, lambda e: seen.append("half"), order=HookOrder.DEFAULT + 0.5)
    registry.add_callback(BeforeModelCallEvent, lambda e: seen.append("default"))
    assert registry.has_callbacks() is True
    registry.invoke_callbacks(BeforeModelCallEvent(agent=_agent()))
    assert seen == ["default", "half", "routing"]
    with pytest.raises(TypeError, match="order"):
        registry.add_callback(BeforeModelCallEvent, lambda e: None, order=True)


def test_an_async_agent_initialized_callback_is_refused_when_registered() -> None:
    async def on_init(event: AgentInitializedEvent) -> None:
        pass

    agent = _agent()
    with pytest.raises(ValueError, match="synchronous"):
        agent.add_hook(on_init)  # it would never run: the event is sent from the constructor
    assert not agent.hooks.has_callbacks(AgentInitializedEvent)


def test_model_stop_response_is_also_nested_in_after_model_call_event_as_in_strands() -> None:
    response = AfterModelCallEvent.ModelStopResponse(message={"role": "assistant", "content": []},
                                                     stop_reason="end_turn")
    assert AfterModelCallEvent(agent=_agent(), stop_response=response).stop_response is response


def test_hook_provider_and_agent_initialized() -> None:
    calls: list[str] = []

    class Provider:
        def register_hooks(self, registry: HookRegistry, **kwargs: object) -> None:
            registry.add_callback(AgentInitializedEvent, lambda e: calls.append(e.agent.name))

    Agent(ScriptedModel(), name="named", hooks=[Provider()])
    assert calls == ["named"]


def test_before_invocation_can_rewrite_messages_and_cancel() -> None:
    def rewrite(event: BeforeInvocationEvent) -> None:
        event.messages = [{"role": "user", "content": [{"text": "rewritten"}]}]

    model = ScriptedModel(text("ok"))
    agent = Agent(model, hooks=[rewrite])
    agent("original")
    assert model.calls[0].messages[-1]["content"][0]["text"] == "rewritten"

    def clear(event: BeforeInvocationEvent) -> None:
        event.messages = None  # Strands keeps the prompt then

    kept = Agent(ScriptedModel(text("ok")), hooks=[clear])
    kept("original")
    assert kept.messages[0] == {"role": "user", "content": [{"text": "original"}]}

    def deny(event: BeforeInvocationEvent) -> None:
        event.cancel = True

    denied = Agent(ScriptedModel(), hooks=[deny])
    result = denied("x")
    assert (result.stop_reason, str(result)) == ("end_turn", "invocation denied by hook\n")
    assert denied.messages == []


def test_before_model_call_cancel_and_after_model_retry() -> None:
    def veto(event: BeforeModelCallEvent) -> None:
        event.cancel = True

    result = Agent(ScriptedModel(), hooks=[veto])("x")
    assert str(result) == "model call denied by hook\n"

    retried: list[int] = []

    def retry_once(event: AfterModelCallEvent) -> None:
        if not retried:
            retried.append(1)
            event.retry = True

    model = ScriptedModel(text("first"), text("second"))
    agent = Agent(model, hooks=[retry_once])
    assert str(agent("x")) == "second\n"
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]


def test_before_tools_cancel_and_after_tools_end_turn() -> None:
    def cancel(event: BeforeToolsEvent) -> None:
        event.cancel = True

    agent = _agent(tool_call("add", {"a": 1, "b": 2}), text("done"), hooks=[cancel])
    agent("x")
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "Tool cancelled by hook"}]

    def stop(event: AfterToolsEvent) -> None:
        event.end_turn = "stopped here"

    agent = _agent(tool_call("add", {"a": 1, "b": 2}), hooks=[stop])
    result = agent("x")
    assert (result.stop_reason, str(result)) == ("end_turn", "stopped here\n")


def test_before_tool_call_rewrite_reaches_tool_but_history_keeps_original() -> None:
    def rewrite(event: BeforeToolCallEvent) -> None:
        event.tool_use = {**event.tool_use, "input": {"a": 10, "b": 20}}

    agent = _agent(tool_call("add", {"a": 1, "b": 2}), text("done"), hooks=[rewrite])
    agent("x")
    assert agent.messages[1]["content"][0]["toolUse"]["input"] == {"a": 1, "b": 2}
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "30"}]


def test_before_tool_call_edit_in_place_shows_in_the_history_as_in_strands() -> None:
    def clamp(event: BeforeToolCallEvent) -> None:
        event.tool_use["input"]["a"] = min(event.tool_use["input"]["a"], 100)

    agent = _agent(tool_call("add", {"a": 500, "b": 4}), text("done"), hooks=[clamp])
    agent("x")
    assert agent.messages[1]["content"][0]["toolUse"]["input"] == {"a": 100, "b": 4}  # the call that ran
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "104"}]


def test_before_tool_call_cancel_and_selected_tool() -> None:
    def cancel(event: BeforeToolCallEvent) -> None:
        event.cancel_tool = True

    agent = _agent(tool_call("add", {"a": 1, "b": 2}), text("done"), hooks=[cancel])
    agent("x")
    assert agent.messages[2]["content"][0]["toolResult"] == {
        "toolUseId": agent.messages[1]["content"][0]["toolUse"]["toolUseId"],
        "status": "error", "content": [{"text": "tool cancelled by user"}]}

    @tool
    def mul(a: int, b: int) -> int:
        """Multiply."""
        return a * b

    def swap(event: BeforeToolCallEvent) -> None:
        event.selected_tool = mul

    agent = _agent(tool_call("add", {"a": 3, "b": 4}), text("done"), hooks=[swap])
    agent("x")
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "12"}]


def test_after_tool_call_rewrites_result_and_retries() -> None:
    attempts: list[int] = []

    def fix(event: AfterToolCallEvent) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            event.retry = True
        else:
            event.result = {**event.result, "content": [{"text": "patched"}]}

    agent = _agent(tool_call("add", {"a": 1, "b": 2}), text("done"), hooks=[fix])
    agent("x")
    assert len(attempts) == 2
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "patched"}]


def test_after_invocation_resume_runs_again() -> None:
    count: list[int] = []

    def again(event: AfterInvocationEvent) -> None:
        if not count:
            count.append(1)
            event.resume = "follow-up"

    model = ScriptedModel(text("one"), text("two"))
    agent = Agent(model, hooks=[again])
    assert str(agent("x")) == "two\n"
    assert model.calls[1].messages[-1]["content"] == [{"text": "follow-up"}]


def test_after_tool_call_has_the_calls_duration_and_before_model_call_a_token_projection() -> None:
    import time

    @tool
    def nap() -> str:
        """Sleep a little."""
        time.sleep(0.02)
        return "rested"

    durations: list[float] = []
    projections: list[int | None] = []

    def after_tool(event: AfterToolCallEvent) -> None:
        durations.append(event.duration)

    def before_model(event: BeforeModelCallEvent) -> None:
        projections.append(event.projected_input_tokens)

    first = {"inputTokens": 1000, "outputTokens": 50, "totalTokens": 1050}
    agent = Agent(ScriptedModel(tool_call("nap", {}, usage=first), text("done")), tools=[nap],
                  hooks=[after_tool, before_model], system_prompt="x" * 400)
    agent("go")
    assert len(durations) == 1 and durations[0] >= 0.02
    cold, warm = projections
    assert cold is not None and cold >= 100  # the whole request, estimated: the system prompt alone is 100 tokens
    # The first call's prompt and answer as counted, plus the tool result added since.
    assert warm is not None and warm > 1050 and warm < 1050 + 100


class _CountingModel(ScriptedModel):
    """A scripted model whose ``count_tokens`` answers as a provider's counting API would (or fails)."""

    def __init__(self, *answers: Any, counted: int | None) -> None:
        super().__init__(*answers)
        self.counted = counted
        self.counts: list[int] = []  # how many messages each count was asked for

    async def count_tokens(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None,
                           system_prompt_content: Any = None) -> int:
        self.counts.append(len(messages))
        if self.counted is None:
            raise RuntimeError("the counting API is down")
        return self.counted


def test_before_model_call_projects_with_the_models_count_tokens() -> None:
    """As Strands' loop: the projection asks the model (native counting when it has it), not the loop's estimate."""
    @tool
    def nap() -> str:
        """Rest."""
        return "rested"

    projections: list[int | None] = []

    def before_model(event: BeforeModelCallEvent) -> None:
        projections.append(event.projected_input_tokens)

    first = {"inputTokens": 1000, "outputTokens": 50, "totalTokens": 1050}
    model = _CountingModel(tool_call("nap", {}, usage=first), text("done"), counted=7)
    agent = Agent(model, tools=[nap], hooks=[before_model])
    agent("go")
    assert projections == [7, 1050 + 7]  # the whole request counted, then the first call's usage + what was added
    assert model.counts == [1, 1]  # the prompt; then the tool result message added since the answer


def test_a_failed_token_count_leaves_the_projection_out_and_the_call_goes_ahead() -> None:
    projections: list[int | None] = []

    def before_model(event: BeforeModelCallEvent) -> None:
        projections.append(event.projected_input_tokens)

    agent = Agent(_CountingModel(text("done"), counted=None), hooks=[before_model])
    assert str(agent("go")) == "done\n"
    assert projections == [None]
