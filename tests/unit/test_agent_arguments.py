"""``Agent(...)``'s Strands arguments (``callback_handler``, ``structured_output_model``, system prompt blocks)
and the checks that name a wrong argument at construction instead of failing at the first call."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from ray_harness import Agent, tool
from ray_harness.agent import ModelRetryStrategy
from ray_harness.agent.conversation_manager import SlidingWindowConversationManager
from ray_harness.models import AnthropicModel, BedrockModel, OpenAIModel
from ray_harness.session import FileSessionManager
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools import SequentialToolExecutor, ToolContext


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


class Person(BaseModel):
    name: str
    age: int


# -- callback_handler -------------------------------------------------------------------------------------


def test_callback_handler_none_is_accepted_as_in_strands() -> None:
    agent = Agent(ScriptedModel(text("hi")), callback_handler=None)
    assert str(agent("x")) == "hi\n"


def test_callback_handler_hears_every_stream_event_of_a_call() -> None:
    heard: list[dict[str, Any]] = []
    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}), text("three")), tools=[add],
                  callback_handler=lambda **event: heard.append(event))
    result = agent("add")
    kinds = [event["type"] for event in heard]
    # The call itself runs quiet for speed; a handler still hears the per-chunk events, as in Strands.
    assert "text_delta" in kinds and "tool_start" in kinds and "tool_result" in kinds
    assert "".join(event["data"] for event in heard if event["type"] == "text_delta") == "three"
    assert kinds[-1] == "result" and heard[-1]["result"] is result


async def test_callback_handler_sees_the_same_events_as_the_stream() -> None:
    heard: list[dict[str, Any]] = []
    agent = Agent(ScriptedModel(text("hello")), callback_handler=lambda **event: heard.append(event))
    streamed = [event async for event in agent.stream_async("x")]
    assert heard == streamed


def test_a_failing_callback_handler_fails_the_call_and_the_history_stays_consistent() -> None:
    def handler(**event: Any) -> None:
        if event["type"] == "text_delta":
            raise RuntimeError("handler broke")

    agent = Agent(ScriptedModel(text("hello")), callback_handler=handler)
    with pytest.raises(RuntimeError, match="handler broke"):
        agent("x")
    json.dumps(agent.messages)
    assert all(message["role"] in {"user", "assistant"} for message in agent.messages)


# -- structured_output_model on the agent --------------------------------------------------------------------


def test_agent_structured_output_model_is_the_default_of_every_call() -> None:
    answer = tool_call("Person", {"name": "Ann", "age": 3})
    agent = Agent(ScriptedModel(answer, answer), structured_output_model=Person)
    first = agent("who?")
    assert first.structured_output == Person(name="Ann", age=3)
    assert agent("again").structured_output == Person(name="Ann", age=3)


def test_a_call_names_another_structured_output_model() -> None:
    class Pet(BaseModel):
        kind: str

    agent = Agent(ScriptedModel(tool_call("Pet", {"kind": "cat"})), structured_output_model=Person)
    assert agent("pet?", structured_output_model=Pet).structured_output == Pet(kind="cat")


# -- cancel(message=...) ------------------------------------------------------------------------------------


async def test_cancel_message_ends_the_history_when_the_cancel_lands_during_the_model_call() -> None:
    agent = Agent(ScriptedModel(text("never", delay=120)))

    async def cancel_soon() -> None:
        await asyncio.sleep(0.05)
        agent.cancel(message="Stopped by operator")

    _, result = await asyncio.gather(cancel_soon(), agent.invoke_async("x"))
    assert result.stop_reason == "cancelled"
    assert result.message == {"role": "assistant", "content": [{"text": "Stopped by operator"}]}
    assert agent.messages[-1] == result.message


# -- system prompt blocks -----------------------------------------------------------------------------------

BLOCKS: list[Any] = [{"text": "You are terse."}, {"cachePoint": {"type": "default"}}, {"text": "Answer in French."}]


def test_system_prompt_blocks_reach_each_provider_in_its_own_form() -> None:
    messages: list[Any] = [{"role": "user", "content": [{"text": "hi"}]}]
    bedrock = BedrockModel(model_id="m").format_request(messages, None, BLOCKS, None)
    assert bedrock["system"] == BLOCKS
    anthropic, _ = AnthropicModel(model_id="m", client_args={"api_key": "k"}).format_request(
        messages, None, BLOCKS, None)
    assert anthropic["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Answer in French."},
    ]
    openai = OpenAIModel(model_id="m", client_args={"api_key": "k"}).format_request(messages, None, BLOCKS, None)
    assert openai["messages"][0] == {"role": "system", "content": "You are terse.\nAnswer in French."}
    # A string stays a string everywhere.
    assert BedrockModel(model_id="m").format_request(messages, None, "be brief", None)["system"] == [
        {"text": "be brief"}]


def test_system_prompt_blocks_are_copied_and_reach_the_model() -> None:
    blocks = [dict(block) for block in BLOCKS]
    model = ScriptedModel(text("ok"))
    agent = Agent(model, system_prompt=blocks)
    blocks[0]["text"] = "changed later"
    agent("x")
    assert model.calls[0].system_prompt == BLOCKS


@pytest.mark.parametrize(("value", "message"), [
    (5, "system_prompt must be a string, a list of system content blocks, or None"),
    ([{"text": 5}], r"system_prompt\[0\] must be"),
    (["plain"], r"system_prompt\[0\] must be"),
    ([{"text": "a", "cachePoint": {}}], r"system_prompt\[0\] must be"),
])
def test_a_bad_system_prompt_is_refused_at_construction(value: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        Agent(ScriptedModel(text("x")), system_prompt=value)


# -- arguments checked at construction -----------------------------------------------------------------------


@pytest.mark.parametrize(("argument", "value", "message"), [
    ("conversation_manager", "x", "conversation_manager must be a ConversationManager"),
    ("conversation_manager", SlidingWindowConversationManager, "conversation_manager must be an instance"),
    ("session_manager", FileSessionManager, "session_manager must be an instance"),
    ("session_manager", {"session_id": "s"}, "session_manager must be a SessionManager"),
    ("tool_executor", "x", "tool_executor must be a ToolExecutor"),
    ("tool_executor", SequentialToolExecutor, "tool_executor must be an instance"),
    ("retry_strategy", "x", "retry_strategy must be a ModelRetryStrategy"),
    ("checkpointing", "yes", "checkpointing must be True or False"),
    ("max_guide_retries", "x", "max_guide_retries must be an int >= 0"),
    ("max_guide_retries", -1, "max_guide_retries must be an int >= 0"),
    ("description", 5, "description must be a string or None"),
    ("tools", "word_count", "tools must be a list of tools"),
    ("callback_handler", "print", "callback_handler must be a callable"),
    ("structured_output_model", dict, "structured_output_model must be a pydantic model class"),
])
def test_a_wrong_argument_is_named_at_construction(argument: str, value: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        Agent(ScriptedModel(text("x")), **{argument: value})


def test_the_documented_arguments_still_construct() -> None:
    agent = Agent(ScriptedModel(text("x")), tools=(add,), retry_strategy=ModelRetryStrategy(max_attempts=2),
                  conversation_manager=SlidingWindowConversationManager(window_size=4),
                  tool_executor=SequentialToolExecutor(), checkpointing=False, max_guide_retries=0,
                  description="adds", system_prompt="be brief")
    assert agent.tool_names == ["add"]
    assert Agent(ScriptedModel(text("x")), retry_strategy=None).retry_strategy is None


def test_invocation_state_must_be_a_dict() -> None:
    agent = Agent(ScriptedModel(text("x")))
    with pytest.raises(TypeError, match="invocation_state must be a dict or None, got str"):
        agent("x", invocation_state="x")  # type: ignore[arg-type]
    assert agent.messages == []  # nothing started, nothing recorded
    assert str(agent("x")) == "x\n"


def test_keyword_arguments_join_a_new_invocation_state_not_the_callers() -> None:
    seen: list[dict[str, Any]] = []

    @tool(context=True)
    def look(tool_context: ToolContext) -> str:
        """Look at the invocation state."""
        seen.append(dict(tool_context.invocation_state))
        return "ok"

    agent = Agent(ScriptedModel(tool_call("look", {}), text("done")), tools=[look])
    mine = {"user": "ann"}
    agent("x", invocation_state=mine, request_id="r1")
    assert seen[0]["user"] == "ann" and seen[0]["request_id"] == "r1"
    assert mine == {"user": "ann"}  # the caller's dict is theirs (Strands builds a new one too)


def test_consecutive_turns_of_one_role_reach_bedrock_and_anthropic_as_one() -> None:
    # A session repaired after a crash ends with the killed tool's result (a user turn); the next prompt is another.
    messages: list[Any] = [
        {"role": "user", "content": [{"text": "refund"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "refund", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "error",
                                                     "content": [{"text": "process stopped"}]}}]},
        {"role": "user", "content": [{"text": "try again"}]},
    ]
    specs: list[Any] = [{"name": "refund", "description": "Refund.", "inputSchema": {"json": {"type": "object"}}}]
    bedrock = BedrockModel(model_id="m").format_request(messages, specs, None, None)["messages"]
    assert [m["role"] for m in bedrock] == ["user", "assistant", "user"]
    assert [next(iter(block)) for block in bedrock[2]["content"]] == ["toolResult", "text"]
    anthropic, _ = AnthropicModel(model_id="m", client_args={"api_key": "k"}).format_request(messages, specs, None, None)
    assert [m["role"] for m in anthropic["messages"]] == ["user", "assistant", "user"]
    assert [block["type"] for block in anthropic["messages"][2]["content"]] == ["tool_result", "text"]
    assert len(messages) == 4 and messages[3]["content"] == [{"text": "try again"}]  # the history is not touched
