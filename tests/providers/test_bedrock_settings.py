"""Strands' ``BedrockModel`` settings on ours: non-streaming calls, guardrails, cache points, request fields."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from ray_harness import Agent, tool
from ray_harness.types.exceptions import ContextWindowOverflowException, ModelThrottledException
from tests.providers.conftest import bedrock_model
from tests.providers.fake_servers import Answer, BedrockServer, Failure, text, tool_use

HI = [{"role": "user", "content": [{"text": "hi"}]}]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def test_streaming_false_calls_converse_and_runs_the_agent_loop(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(tool_use("lookup", {"key": "k1"}, "t1", before="Let me look."),
                          Answer([("thinking", "hmm", "sig"), ("text", "It is v1.")], input_tokens=20))
    agent = Agent(bedrock_model(bedrock_server, streaming=False), tools=[lookup])

    result = agent("what is k1?")

    assert [request.path for request in bedrock_server.requests] == ["/model/anthropic.claude-test-v1:0/converse"] * 2
    assert str(result) == "It is v1.\n"
    assert agent.messages[1]["content"] == [
        {"text": "Let me look."}, {"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"key": "k1"}}}]
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "value of k1"}]
    assert agent.messages[3]["content"][0] == {"reasoningContent": {"reasoningText": {"text": "hmm",
                                                                                      "signature": "sig"}}}
    assert result.metrics.accumulated_usage["inputTokens"] == 31
    assert bedrock_server.bodies[1]["messages"][-1]["content"][0]["toolResult"]["toolUseId"] == "t1"


def test_streaming_false_gives_structured_output(bedrock_server: BedrockServer) -> None:
    class City(BaseModel):
        name: str
        population: int

    bedrock_server.script(tool_use("City", {"name": "Oslo", "population": 700000}, "t1"))
    agent = Agent(bedrock_model(bedrock_server, streaming=False))

    result = agent("Oslo?", structured_output_model=City)

    assert result.structured_output == City(name="Oslo", population=700000)
    assert bedrock_server.bodies[0]["toolConfig"]["tools"][0]["toolSpec"]["name"] == "City"


@pytest.mark.parametrize(("failure", "error"), [("throttle", ModelThrottledException),
                                                ("overflow", ContextWindowOverflowException)])
async def test_streaming_false_maps_errors_as_streaming_does(bedrock_server: BedrockServer, failure: str,
                                                             error: type[Exception]) -> None:
    bedrock_server.script(Failure(failure))
    with pytest.raises(error):
        async for _ in bedrock_model(bedrock_server, streaming=False).stream(HI):
            pass


async def test_guardrail_settings_fill_the_guardrail_config(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("ok"), text("ok"))
    model = bedrock_model(bedrock_server, guardrail_id="gr-1", guardrail_version="3")

    [_ async for _ in model.stream(HI)]
    model.update_config(guardrail_trace="disabled", guardrail_stream_processing_mode="async")
    [_ async for _ in model.stream(HI)]

    first, second = bedrock_server.bodies
    assert first["guardrailConfig"] == {"guardrailIdentifier": "gr-1", "guardrailVersion": "3", "trace": "enabled"}
    assert second["guardrailConfig"] == {"guardrailIdentifier": "gr-1", "guardrailVersion": "3", "trace": "disabled",
                                         "streamProcessingMode": "async"}


@pytest.mark.parametrize(("settings", "message"), [
    ({"guardrail_id": "gr-1"}, "guardrail_version is missing"),
    ({"guardrail_version": "1"}, "guardrail_id is missing"),
    ({"guardrail_id": "gr-1", "guardrail_version": "1", "guardrail_trace": "on"},
     "guardrail_trace must be one of enabled, disabled, enabled_full, got 'on'"),
])
def test_an_incomplete_or_invalid_guardrail_names_the_setting(bedrock_server: BedrockServer, settings: dict,
                                                              message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bedrock_model(bedrock_server, **settings)


async def test_request_settings_and_cache_points(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("ok"))
    spec = {"name": "lookup", "description": "Look up.", "inputSchema": {"json": {"type": "object"}}}
    model = bedrock_model(bedrock_server, service_tier="flex", additional_response_field_paths=["/stop_sequence"],
                          additional_args={"requestMetadata": {"team": "a"}}, cache_prompt="default",
                          cache_tools="default")

    [_ async for _ in model.stream(HI, [spec], "sys")]

    body = bedrock_server.bodies[0]
    assert body["serviceTier"] == {"type": "flex"}
    assert body["additionalModelResponseFieldPaths"] == ["/stop_sequence"]
    assert body["requestMetadata"] == {"team": "a"}
    assert body["system"] == [{"text": "sys"}, {"cachePoint": {"type": "default"}}]
    assert body["toolConfig"]["tools"] == [{"toolSpec": spec}, {"cachePoint": {"type": "default"}}]
    config = model.get_config()
    assert (config["streaming"], config["cache_prompt"], config["cache_tools"]) == (True, "default", "default")
