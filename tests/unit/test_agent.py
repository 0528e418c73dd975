from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest
from pydantic import BaseModel

from ray_harness import Agent, AgentResult, tool
from ray_harness.agent import ModelRetryStrategy
from ray_harness.hooks.events import AfterModelCallEvent
from ray_harness.testing import FakeClock, ScriptedModel, ScriptError, reasoning, step, text, tool_call
from ray_harness.types.exceptions import (
    ConcurrencyException,
    MaxTokensReachedException,
    ModelConfigurationError,
    ModelThrottledException,
    StructuredOutputException,
)


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def test_model_none_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_HARNESS_MODEL", raising=False)
    with pytest.raises(ModelConfigurationError, match="anthropic:") as info:
        Agent()
    assert "ScriptedModel" in str(info.value)
    with pytest.raises(ModelConfigurationError):
        Agent(model=object())  # type: ignore[arg-type]


def test_result_str_and_usage() -> None:
    usage = {"inputTokens": 10, "outputTokens": 4, "totalTokens": 14}
    agent = Agent(ScriptedModel(step({"text": "a"}, {"text": "b"}, usage=usage)))
    result = agent("hi")
    assert isinstance(result, AgentResult)
    assert str(result) == "a\nb\n"
    assert result.metrics.accumulated_usage == usage
    assert result.stop_reason == "end_turn"
    assert result.message == {"role": "assistant", "content": [{"text": "a"}, {"text": "b"}]}


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("hello", [{"role": "user", "content": [{"text": "hello"}]}]),
        ([{"text": "a"}, {"text": "b"}], [{"role": "user", "content": [{"text": "a"}, {"text": "b"}]}]),
        ([{"role": "user", "content": [{"text": "m"}]}], [{"role": "user", "content": [{"text": "m"}]}]),
    ],
)
def test_prompt_forms(prompt: object, expected: list) -> None:
    agent = Agent(ScriptedModel(text("ok")))
    agent(prompt)
    assert agent.messages[:-1] == expected


def test_none_prompt_continues_history() -> None:
    model = ScriptedModel(text("ok"))
    agent = Agent(model, messages=[{"role": "user", "content": [{"text": "earlier"}]}])
    agent()
    assert model.calls[0].messages == ({"role": "user", "content": [{"text": "earlier"}]},)


@pytest.mark.parametrize("prompt", [42, {"bogus": 1}, [{"text": "a"}, {"role": "user", "content": []}],
                                    [{"text": 5}]])
def test_bad_prompts_raise_value_error_and_leave_history_alone(prompt: object) -> None:
    agent = Agent(ScriptedModel())
    with pytest.raises(ValueError):
        agent(prompt)
    assert agent.messages == []


def test_interrupt_responses_to_idle_agent() -> None:
    agent = Agent(ScriptedModel())
    with pytest.raises(ValueError, match="not interrupted"):
        agent([{"interruptResponse": {"interruptId": "x", "response": "y"}}])


async def test_stream_async_event_order() -> None:
    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 1}, tool_use_id="t"), text("two", stop_reason=None)),
                  tools=[add])
    agent.model.update_config(chunk_size=1)  # type: ignore[attr-defined]
    events = [e async for e in agent.stream_async("1+1")]
    kinds = [e["type"] for e in events if e["type"] != "model_event"]
    assert kinds == ["init_event_loop", "start", "start_event_loop", "tool_use_stream", "message", "tool_start",
                     "tool_result", "message", "start", "start_event_loop", "text_delta", "text_delta", "text_delta",
                     "message", "result"]
    assert "".join(e["data"] for e in events if e["type"] == "text_delta") == "two"
    assert events[-1]["result"].stop_reason == "end_turn"


async def test_second_concurrent_invocation_raises() -> None:
    agent = Agent(ScriptedModel(text("slow", delay=0.2), text("x")))
    first = asyncio.create_task(agent.invoke_async("a"))
    await asyncio.sleep(0.05)
    with pytest.raises(ConcurrencyException):
        await agent.invoke_async("b")
    assert str(await first) == "slow\n"
    assert str(await agent.invoke_async("c")) == "x\n"  # the lock is released


def test_state_must_be_json() -> None:
    agent = Agent(ScriptedModel(), state={"count": 1})
    agent.state.set("items", [1, 2])
    assert agent.state.get("count") == 1 and agent.state.get() == {"count": 1, "items": [1, 2]}
    with pytest.raises(ValueError, match="not JSON serializable"):
        agent.state.set("bad", object())
    for number in (float("nan"), float("inf")):  # not JSON either: a session write would fail later
        with pytest.raises(ValueError, match="'ratio' is not JSON serializable"):
            agent.state.set("ratio", {"value": number})
    assert "ratio" not in agent.state.get()


def test_reasoning_blocks_are_kept() -> None:
    agent = Agent(ScriptedModel(reasoning("think", "answer", signature="sig")))
    result = agent("q")
    assert result.message["content"][0] == {"reasoningContent": {"reasoningText": {"text": "think",
                                                                                    "signature": "sig"}}}
    assert str(result) == "answer\n"


def test_throttling_is_retried_with_backoff() -> None:
    clock = FakeClock()
    model = ScriptedModel(ModelThrottledException("429"), ModelThrottledException("429", retry_after=30), text("ok"))
    agent = Agent(model, retry_strategy=ModelRetryStrategy(max_attempts=4, initial_delay=2, max_delay=60, clock=clock))
    assert str(agent("x")) == "ok\n"
    assert clock.sleeps == [2, 30]


def test_throttling_gives_up_after_max_attempts_and_rolls_back() -> None:
    clock = FakeClock()
    model = ScriptedModel(*[ModelThrottledException("429")] * 3)
    agent = Agent(model, retry_strategy=ModelRetryStrategy(max_attempts=3, initial_delay=1, clock=clock))
    with pytest.raises(ModelThrottledException):
        agent("x")
    assert clock.sleeps == [1, 2]
    assert agent.messages == []  # a failed invocation leaves the history as it was


def test_a_subclass_can_widen_what_is_retried() -> None:
    class RetryTimeouts(ModelRetryStrategy):  # the Strands way to retry more than throttling
        def is_retryable(self, exception: Exception) -> bool:
            return isinstance(exception, TimeoutError) or super().is_retryable(exception)

    clock = FakeClock()
    agent = Agent(ScriptedModel(TimeoutError("read timed out"), text("ok")),
                  retry_strategy=RetryTimeouts(initial_delay=1, clock=clock))
    assert str(agent("x")) == "ok\n"
    assert clock.sleeps == [1]


def test_a_hook_retried_answer_still_counts_its_usage() -> None:
    usage = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
    calls = []

    def retry_first(event: AfterModelCallEvent) -> None:
        calls.append(event)
        event.retry = len(calls) == 1

    agent = Agent(ScriptedModel(text("discarded", usage=usage), text("kept", usage=usage)), hooks=[retry_first])
    assert str(agent("x")) == "kept\n"
    # Both answers were processed and billed, as Strands counts them.
    assert agent.event_loop_metrics.accumulated_usage["totalTokens"] == 30


def test_no_retry_strategy_means_no_retries() -> None:
    agent = Agent(ScriptedModel(ModelThrottledException("429")), retry_strategy=None)
    with pytest.raises(ModelThrottledException):
        agent("x")


def test_max_tokens_raises_with_the_partial_message_which_stays_in_the_history() -> None:
    agent = Agent(ScriptedModel(text("partial", stop_reason="max_tokens"), text("the rest")))
    with pytest.raises(MaxTokensReachedException, match="kept in the history") as caught:
        agent("x")
    partial = {"role": "assistant", "content": [{"text": "partial"}]}
    assert caught.value.partial_message == partial
    assert agent.messages == [{"role": "user", "content": [{"text": "x"}]}, partial]
    restored = pickle.loads(pickle.dumps(caught.value))  # it crosses actor boundaries
    assert (str(restored), restored.partial_message) == (str(caught.value), partial)
    assert str(agent("continue")) == "the rest\n"  # "call the agent again to continue" holds
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user", "assistant"]


def test_max_tokens_turns_unfinished_tool_uses_into_text() -> None:
    truncated = step({"text": "let me"}, {"toolUse": {"toolUseId": "t1", "name": "add", "input": {"a": 1}}},
                     stop_reason="max_tokens")
    agent = Agent(ScriptedModel(truncated), tools=[add])
    with pytest.raises(MaxTokensReachedException) as caught:
        agent("x")
    note = "The selected tool add's tool use was incomplete due to maximum token limits being reached."
    assert caught.value.partial_message == {"role": "assistant", "content": [{"text": "let me"}, {"text": note}]}
    assert agent.messages[-1] == caught.value.partial_message


class Weather(BaseModel):
    city: str
    temperature: int


def test_structured_output_when_model_calls_the_tool() -> None:
    model = ScriptedModel(tool_call("Weather", {"city": "Oslo", "temperature": 3}))
    agent = Agent(model)
    result = agent("weather?", structured_output_model=Weather)
    assert result.structured_output == Weather(city="Oslo", temperature=3)
    assert "Weather" in model.calls[0].tool_names
    # As in Strands: the loop ends once the tool succeeds, and its description tells the model to call it last.
    spec = next(spec for spec in model.calls[0].tool_specs if spec["name"] == "Weather")
    assert spec["description"].startswith("IMPORTANT: This StructuredOutputTool should only be invoked as the last")


def test_structured_output_forced_then_fails() -> None:
    model = ScriptedModel(text("plain"), text("still plain"))
    with pytest.raises(StructuredOutputException):
        Agent(model)("q", structured_output_model=Weather)
    assert model.calls[1].tool_choice == {"tool": {"name": "Weather"}}


def test_structured_output_forced_then_succeeds_after_validation_error() -> None:
    model = ScriptedModel(text("plain"), tool_call("Weather", {"city": "Oslo"}),
                          tool_call("Weather", {"city": "Oslo", "temperature": 5}))
    agent = Agent(model)
    result = agent("q", structured_output_model=Weather).structured_output
    assert result == Weather(city="Oslo", temperature=5)
    # The texts the model reads are Strands': what to fix, then the success note.
    failed, succeeded = [block["toolResult"] for message in agent.messages for block in message["content"]
                         if "toolResult" in block]
    assert failed["content"] == [{"text": "Validation failed for Weather. Please fix the following errors:\n"
                                          "- Field 'temperature': Field required"}]
    assert succeeded["content"] == [{"text": "Successfully validated Weather structured output"}]


@pytest.mark.parametrize(("answer", "error"), [
    ('{"city": "Oslo", "temperature": 3}', None),
    ('{"city": "Oslo"}', "Weather.temperature: Field required"),
    ("it is cold", "neither called the tool nor answered with a JSON object"),
])
def test_structured_output_read_from_the_forced_turns_json_text(answer: str, error: str | None) -> None:
    # As in Strands: a provider that cannot force the tool may answer the forced request with JSON text.
    from ray_harness.agent._structured import StructuredOutput

    structured = StructuredOutput(Weather)
    message = {"role": "assistant", "content": [{"text": answer}]}
    if error is None:
        assert structured.from_text(message) == Weather(city="Oslo", temperature=3) == structured.value
    else:
        with pytest.raises(StructuredOutputException, match=error):
            structured.from_text(message)


def test_structured_output_in_the_loop_as_strands_gives_it() -> None:
    # The forced turn's JSON text is read; the stream has a structured_output event; the tool's stop reason.
    agent = Agent(ScriptedModel(text("thinking"), text('{"city": "Oslo", "temperature": 3}')))
    result = agent("q", structured_output_model=Weather)
    assert (result.stop_reason, result.structured_output) == ("end_turn", Weather(city="Oslo", temperature=3))

    async def events() -> list[dict[str, Any]]:
        streamed = Agent(ScriptedModel(tool_call("Weather", {"city": "Oslo", "temperature": 3})))
        return [event async for event in streamed.stream_async("q", structured_output_model=Weather)]

    seen = asyncio.run(events())
    assert [event["structured_output"] for event in seen if event.get("type") == "structured_output"] == [
        Weather(city="Oslo", temperature=3)]
    assert seen[-1]["result"].stop_reason == "tool_use"


def test_structured_output_refuses_what_no_provider_could_answer() -> None:
    @tool
    def Weather(city: str) -> str:  # the clash with the output model is the point
        """A tool named like the output model."""
        return city

    clash = Agent(ScriptedModel(), tools=[Weather])
    with pytest.raises(ValueError, match="Tool 'Weather' already exists"):
        clash("q", structured_output_model=globals()["Weather"])
    empty = Agent(ScriptedModel())
    with pytest.raises(ValueError, match="No conversation history or prompt provided"):
        empty.structured_output(globals()["Weather"])  # raised before the deprecation warning
    assert clash.messages == [] and empty.messages == []


def test_agent_pickles_with_its_tools_and_model() -> None:
    agent = Agent(ScriptedModel(text("ok")), tools=[add], name="p")
    clone = pickle.loads(pickle.dumps(agent))
    assert clone.name == "p" and clone.tool_names == ["add"]
    assert str(clone("x")) == "ok\n"


def test_sync_call_from_inside_a_running_loop() -> None:
    async def main() -> str:
        return str(Agent(ScriptedModel(text("inner")))("x"))

    assert asyncio.run(main()) == "inner\n"


def test_scripted_model_is_loud() -> None:
    model = ScriptedModel(text("only one"))
    agent = Agent(model)
    agent("a")
    with pytest.raises(ScriptError, match="not scripted"):
        agent("b")
    leftover = ScriptedModel(text("a"), text("b"))
    Agent(leftover)("x")
    with pytest.raises(ScriptError, match="never used"):
        leftover.assert_complete()


def test_scripted_model_responder_and_records_calls() -> None:
    model = ScriptedModel(lambda call: text(f"echo {call.last_text}"))
    agent = Agent(model, system_prompt="be nice", tools=[add])
    assert str(agent("ping")) == "echo ping\n"
    (call,) = model.calls
    assert call.system_prompt == "be nice" and call.tool_names == ("add",)
    with pytest.raises(AttributeError):
        call.system_prompt = "changed"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(ScriptedModel(text("x")))).remaining == 1


def test_rollback_after_the_conversation_manager_trimmed_during_the_failed_invocation() -> None:
    from ray_harness.agent.conversation_manager import SlidingWindowConversationManager
    from ray_harness.types.exceptions import ContextWindowOverflowException

    history = []
    for i in range(6):
        history += [{"role": "user", "content": [{"text": f"q{i}"}]},
                    {"role": "assistant", "content": [{"text": f"a{i}"}]}]
    model = ScriptedModel(ContextWindowOverflowException("too long"), RuntimeError("provider down"))
    agent = Agent(model, messages=history, retry_strategy=None,
                  conversation_manager=SlidingWindowConversationManager(window_size=4))
    with pytest.raises(RuntimeError, match="provider down"):
        agent("new question")
    assert all(m["content"][0]["text"] != "new question" for m in agent.messages)
    assert agent.messages[-1]["role"] == "assistant"


def test_a_manager_that_does_not_reduce_ends_the_overflow_retries() -> None:
    from ray_harness.agent.conversation_manager import ConversationManager
    from ray_harness.types.exceptions import ContextWindowOverflowException

    class Forgetful(ConversationManager):  # neither reduces nor re-raises, as the contract asks
        def apply_management(self, agent: Agent, **kwargs: object) -> None:
            pass

        def reduce_context(self, agent: Agent, e: Exception | None = None, **kwargs: object) -> None:
            pass

    error = ContextWindowOverflowException("too long")
    model = ScriptedModel(error, error, text("never reached"))
    agent = Agent(model, conversation_manager=Forgetful())
    with pytest.raises(ContextWindowOverflowException) as raised:
        agent("x")
    assert raised.value is error and len(model.calls) == 1  # the same request would overflow forever


def test_redacted_reasoning_is_kept_in_history() -> None:
    from ray_harness.types.streaming import StreamEvent

    class Redacting(ScriptedModel):
        async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):  # type: ignore[no-untyped-def,override]
            events: list[StreamEvent] = [
                {"messageStart": {"role": "assistant"}},
                {"contentBlockDelta": {"delta": {"reasoningContent": {"redactedContent": b"\x00secret"}},
                                       "contentBlockIndex": 0}},
                {"contentBlockStop": {"contentBlockIndex": 0}},
                {"contentBlockDelta": {"delta": {"text": "answer"}, "contentBlockIndex": 1}},
                {"contentBlockStop": {"contentBlockIndex": 1}},
                {"messageStop": {"stopReason": "end_turn"}},
            ]
            for event in events:
                yield event

    result = Agent(Redacting())("q")
    assert result.message["content"] == [{"reasoningContent": {"redactedContent": b"\x00secret"}},
                                         {"text": "answer"}]


def test_a_prompt_after_unanswered_tool_uses_answers_them_first_in_its_own_turn() -> None:
    # A hand-set history (or an interrupted process) can end with tool uses that never got results; providers
    # reject that, so the next prompt's user turn opens with error results for them (Strands' text).
    model = ScriptedModel(text("fine"))
    agent = Agent(model, tools=[add])
    agent.messages = [
        {"role": "user", "content": [{"text": "add"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "add", "input": {"a": 1, "b": 2}}},
                                          {"toolUse": {"toolUseId": "t2", "name": "add", "input": {"a": 3, "b": 4}}}]},
    ]
    assert str(agent("next question")) == "fine\n"
    sent = model.calls[0].messages[-1]
    assert sent == {"role": "user", "content": [
        {"toolResult": {"toolUseId": "t1", "status": "error", "content": [{"text": "Tool was interrupted."}]}},
        {"toolResult": {"toolUseId": "t2", "status": "error", "content": [{"text": "Tool was interrupted."}]}},
        {"text": "next question"},
    ]}
    assert agent.messages[2] == sent
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user", "assistant"]
