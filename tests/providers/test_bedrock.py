"""BedrockModel specifics: the Converse request, pass-through events, threads, credentials."""

from __future__ import annotations

import asyncio
import base64
import pickle
import threading

import boto3
import pytest

from ray_harness import Agent
from ray_harness.models.bedrock import BedrockModel
from ray_harness.types.exceptions import ModelConfigurationError
from tests.providers.conftest import bedrock_model
from tests.providers.fake_servers import Answer, BedrockServer, text

PNG = b"\x89PNG\r\n\x1a\nfake"


async def drain(model: BedrockModel, *args: object, **kwargs: object) -> list[dict]:
    return [event async for event in model.stream(*args, **kwargs)]  # type: ignore[arg-type]


async def test_request_is_converse_shaped(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("ok"))
    history = [
        {"role": "user", "content": [{"text": "Look"}, {"image": {"format": "png", "source": {"bytes": PNG}}},
                                     {"json": {"k": 1}}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"q": "x"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "success",
                                                     "content": [{"json": {"n": 1}}]}}]},
    ]
    spec = {"name": "lookup", "description": "Look up.", "inputSchema": {"json": {"type": "object"}}}
    model = bedrock_model(bedrock_server, params={"inferenceConfig": {"maxTokens": 256, "temperature": 0.1}})

    await drain(model, history, [spec], "sys", tool_choice={"tool": {"name": "lookup"}})

    request = bedrock_server.requests[0]
    assert request.path == "/model/anthropic.claude-test-v1:0/converse-stream"
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
    body = request.body
    assert body["system"] == [{"text": "sys"}]
    assert body["inferenceConfig"] == {"maxTokens": 256, "temperature": 0.1}
    assert body["toolConfig"] == {"tools": [{"toolSpec": spec}], "toolChoice": {"tool": {"name": "lookup"}}}
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "Look"},
                                     {"image": {"format": "png", "source": {"bytes": base64.b64encode(PNG).decode()}}},
                                     {"text": '{"k": 1}'}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"q": "x"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "success",
                                                     "content": [{"json": {"n": 1}}]}}]},
    ]


@pytest.mark.parametrize(("thinking", "sent"), [
    ({"type": "enabled", "budget_tokens": 1024}, {"auto": {}}),
    ({"type": "disabled"}, {"tool": {"name": "lookup"}}),
])
async def test_forced_tool_choice_is_relaxed_when_thinking_is_on(bedrock_server: BedrockServer, thinking: dict,
                                                                 sent: dict) -> None:
    # Bedrock rejects thinking with a forced tool choice (structured output forces its tool), as Anthropic does.
    bedrock_server.script(text("ok"))
    spec = {"name": "lookup", "description": "Look up.", "inputSchema": {"json": {"type": "object"}}}
    model = bedrock_model(bedrock_server, params={"additionalModelRequestFields": {"thinking": thinking}})

    await drain(model, [{"role": "user", "content": [{"text": "hi"}]}], [spec], tool_choice={"tool": {"name": "lookup"}})

    assert bedrock_server.bodies[0]["toolConfig"]["toolChoice"] == sent
    assert bedrock_server.bodies[0]["additionalModelRequestFields"] == {"thinking": thinking}


async def test_events_pass_through_with_usage_normalised(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(Answer([("thinking", "ponder", "sig-b"), ("text", "answer")], input_tokens=5,
                                 output_tokens=2, cache_read=95))

    events = await drain(bedrock_model(bedrock_server), [{"role": "user", "content": [{"text": "hi"}]}])

    assert events[0] == {"messageStart": {"role": "assistant"}}
    assert {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig-b"}}}} \
        in events
    assert events[-1] == {"metadata": {"usage": {"inputTokens": 100, "outputTokens": 2, "totalTokens": 102,
                                                 "cacheReadInputTokens": 95}, "metrics": {"latencyMs": 12}}}


async def test_streaming_does_not_block_the_event_loop(bedrock_server: BedrockServer) -> None:
    # The server pauses the stream after its first bytes until another task of this loop releases it: only a model
    # that reads the stream off the event loop lets that task run (else the server gives up after 30 s).
    bedrock_server.script(text("x" * 2000))
    holding, release = bedrock_server.hold_stream()

    async def other_task() -> None:
        await asyncio.to_thread(holding.wait, 30)
        release.set()  # on this loop: only once it runs this task again

    task = asyncio.create_task(other_task())
    try:
        events = await drain(bedrock_model(bedrock_server), [{"role": "user", "content": [{"text": "hi"}]}])
    finally:
        task.cancel()
    assert bedrock_server.released_in_time  # the loop ran another task while boto3 waited for the stream
    assert "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e) == "x" * 2000


async def test_closing_the_stream_early_ends_the_worker_thread(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("a long answer that is never read to the end"))
    stream = bedrock_model(bedrock_server).stream([{"role": "user", "content": [{"text": "hi"}]}])

    first = await stream.__anext__()
    await stream.aclose()

    assert first == {"messageStart": {"role": "assistant"}}
    workers = [t for t in threading.enumerate() if t.name == "bedrock-converse-stream"]
    for worker in workers:
        await asyncio.to_thread(worker.join, 5)
    assert not any(worker.is_alive() for worker in workers)


async def test_missing_aws_credentials_is_a_configuration_error(bedrock_server: BedrockServer) -> None:
    model = BedrockModel("m", endpoint_url=bedrock_server.endpoint_url(), region_name="us-east-1")

    with pytest.raises(ModelConfigurationError, match="AWS_ACCESS_KEY_ID"):
        await drain(model, [{"role": "user", "content": [{"text": "hi"}]}])
    assert bedrock_server.requests == []


def test_pickled_session_keeps_explicit_keys_and_region(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("from the clone"))
    session = boto3.Session(aws_access_key_id="AKIDCLONE", aws_secret_access_key="s", region_name="eu-west-1")
    model = bedrock_model(bedrock_server, boto_session=session)

    clone = pickle.loads(pickle.dumps(model))

    assert clone.boto_session.region_name == "eu-west-1"
    assert str(Agent(clone)("hi")) == "from the clone\n"
    assert "AKIDCLONE/" in bedrock_server.requests[0].headers["authorization"]
    assert "/eu-west-1/bedrock/" in bedrock_server.requests[0].headers["authorization"]


@pytest.mark.parametrize("message", [
    "Input is too long for requested model.",
    "too many total text bytes",  # Bedrock's wording for an oversized request, as Strands recognises it
    "Requested 300000 tokens, which exceed model maximum of 272000",
])
def test_overflow_wordings_become_context_window_overflow(message: str) -> None:
    from botocore.exceptions import ClientError

    from ray_harness.models.bedrock import _map_client_error
    from ray_harness.types.exceptions import ContextWindowOverflowException

    error = ClientError({"Error": {"Code": "ValidationException", "Message": message},
                         "ResponseMetadata": {"HTTPStatusCode": 400}}, "ConverseStream")
    assert isinstance(_map_client_error(error), ContextWindowOverflowException)


async def test_output_cut_off_by_the_context_window_is_a_max_tokens_stop(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(Answer([("text", "The answer is")], stop="model_context_window_exceeded"))

    events = await drain(bedrock_model(bedrock_server), [{"role": "user", "content": [{"text": "hi"}]}])

    assert {"messageStop": {"stopReason": "max_tokens"}} in events


async def test_strands_settings_fill_the_converse_fields(bedrock_server: BedrockServer) -> None:
    # The usual Strands snippet, BedrockModel(model_id=..., temperature=..., max_tokens=...), works as it is.
    bedrock_server.script(text("ok"))
    model = bedrock_model(bedrock_server, temperature=0.3, max_tokens=100,
                          additional_request_fields={"top_k": 5}, params={"inferenceConfig": {"topP": 0.5}})
    model.update_config(stop_sequences=["END"], temperature=0.1)

    await drain(model, [{"role": "user", "content": [{"text": "hi"}]}])

    body = bedrock_server.bodies[0]
    assert body["inferenceConfig"] == {"topP": 0.5, "maxTokens": 100, "temperature": 0.1, "stopSequences": ["END"]}
    assert body["additionalModelRequestFields"] == {"top_k": 5}
    assert model.get_config()["params"]["inferenceConfig"]["temperature"] == 0.1


def test_an_api_key_is_sent_as_a_bearer_token_without_aws_credentials(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("keyed"), text("keyed again"))
    model = BedrockModel("m", endpoint_url=bedrock_server.endpoint_url(), region_name="us-east-1",
                         api_key="bedrock-api-key-1")

    assert str(Agent(model)("hi")) == "keyed\n"
    assert str(Agent(pickle.loads(pickle.dumps(model)))("hi")) == "keyed again\n"  # the clone builds its own client

    assert [request.headers["authorization"] for request in bedrock_server.requests] == \
        ["Bearer bedrock-api-key-1"] * 2
    assert "api-key" not in repr(model)


def test_an_empty_api_key_is_refused() -> None:
    with pytest.raises(ValueError, match="api_key must be a non-empty string"):
        BedrockModel("m", api_key="")
