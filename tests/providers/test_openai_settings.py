"""Strands' ``OpenAIModel`` settings on ours: ``stream=False`` (one ``chat.completion`` per call)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from ray_harness import Agent, tool
from ray_harness.models.openai import OpenAIModel
from ray_harness.types.exceptions import ContextWindowOverflowException, ModelThrottledException
from tests.providers.conftest import openai_model
from tests.providers.fake_servers import Answer, Failure, OpenAIServer, text, tool_use

HI = [{"role": "user", "content": [{"text": "hi"}]}]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def drain(model: Any, *args: Any, **kwargs: Any) -> list[Any]:
    return [event async for event in model.stream(*args, **kwargs)]


async def test_stream_false_turns_one_completion_into_the_same_events(openai_server: OpenAIServer) -> None:
    reply = Answer([("thinking", "hmm", ""), ("text", "Let me look."), ("tool", "c1", "lookup", {"key": "k"}),
                    ("tool", "c2", "lookup", {"key": "j"})], input_tokens=30, output_tokens=9, cache_read=8)
    openai_server.script(reply, reply)
    spec = {"name": "lookup", "description": "Look up.", "inputSchema": {"json": {"type": "object"}}}

    unstreamed = await drain(openai_model(openai_server, stream=False), HI, [spec])
    streamed = await drain(openai_model(openai_server), HI, [spec])

    non_streamed_body, streamed_body = openai_server.bodies
    assert non_streamed_body["stream"] is False and "stream_options" not in non_streamed_body
    assert streamed_body["stream"] is True
    assert [event for event in unstreamed if "metadata" not in event] == [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"start": {}, "contentBlockIndex": 0}},
        {"contentBlockDelta": {"delta": {"reasoningContent": {"text": "hmm"}}, "contentBlockIndex": 0}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"contentBlockStart": {"start": {}, "contentBlockIndex": 1}},
        {"contentBlockDelta": {"delta": {"text": "Let me look."}, "contentBlockIndex": 1}},
        {"contentBlockStop": {"contentBlockIndex": 1}},
        {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "c1", "name": "lookup"}}, "contentBlockIndex": 2}},
        {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"key": "k"}'}}, "contentBlockIndex": 2}},
        {"contentBlockStop": {"contentBlockIndex": 2}},
        {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "c2", "name": "lookup"}}, "contentBlockIndex": 3}},
        {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"key": "j"}'}}, "contentBlockIndex": 3}},
        {"contentBlockStop": {"contentBlockIndex": 3}},
        {"messageStop": {"stopReason": "tool_use"}},
    ]
    assert unstreamed[-1]["metadata"]["usage"] == streamed[-1]["metadata"]["usage"] == {
        "inputTokens": 30, "outputTokens": 9, "totalTokens": 39, "cacheReadInputTokens": 8}


def test_stream_false_runs_the_agent_loop_and_structured_output(openai_server: OpenAIServer) -> None:
    class City(BaseModel):
        name: str

    openai_server.script(tool_use("lookup", {"key": "k1"}, "t1"), text("It is v1."),
                         tool_use("City", {"name": "Oslo"}, "t2"))
    agent = Agent(openai_model(openai_server, stream=False), tools=[lookup])

    assert str(agent("what is k1?")) == "It is v1.\n"
    assert agent("city?", structured_output_model=City).structured_output == City(name="Oslo")

    assert [body["stream"] for body in openai_server.bodies] == [False, False, False]
    assert openai_server.bodies[1]["messages"][-1] == {"role": "tool", "tool_call_id": "t1", "content": "value of k1"}


@pytest.mark.parametrize(("failure", "error"), [("throttle", ModelThrottledException),
                                                ("overflow", ContextWindowOverflowException)])
async def test_stream_false_maps_errors_as_streaming_does(openai_server: OpenAIServer, failure: str,
                                                          error: type[Exception]) -> None:
    openai_server.script(Failure(failure))
    with pytest.raises(error):
        await drain(openai_model(openai_server, stream=False), HI)


async def test_stream_is_a_config_key_and_a_params_key_as_in_strands(openai_server: OpenAIServer) -> None:
    openai_server.script(text("a"), text("b"), text("c"))
    model = openai_model(openai_server)
    assert "stream" not in model.get_config()

    model.update_config(stream=False)
    await drain(model, HI)
    assert model.get_config()["stream"] is False

    from_params = openai_model(openai_server, params={"stream": False, "stream_options": {"include_usage": True},
                                                      "temperature": 0})
    await drain(from_params, HI)
    overridden = openai_model(openai_server, stream=True, params={"stream": False})
    await drain(overridden, HI)

    unset, params_false, config_wins = openai_server.bodies
    assert unset["stream"] is False and "stream_options" not in unset
    assert params_false["stream"] is False and "stream_options" not in params_false
    assert params_false["temperature"] == 0
    assert config_wins["stream"] is True and config_wins["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(("kwargs", "field"), [({"stream": "no"}, "stream"),
                                               ({"params": {"stream": "no"}}, "params.stream")])
def test_a_stream_setting_that_is_not_a_bool_is_refused_by_name(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        OpenAIModel("gpt-test", **kwargs)
