"""AnthropicModel specifics: the request it sends and the events it streams back."""

from __future__ import annotations

import base64

import pytest

from ray_harness import Agent
from ray_harness.models.anthropic import AnthropicModel
from ray_harness.types.exceptions import ModelConfigurationError, ModelThrottledException
from tests.providers.conftest import anthropic_model
from tests.providers.fake_servers import Answer, AnthropicServer, Failure, text

PNG = b"\x89PNG\r\n\x1a\nfake"

HISTORY = [
    {"role": "user", "content": [{"text": "Look"}, {"image": {"format": "png", "source": {"bytes": PNG}}},
                                 {"document": {"format": "pdf", "name": "spec", "source": {"bytes": b"%PDF-1"}}},
                                 {"document": {"format": "txt", "name": "notes", "source": {"bytes": b"plain"}}}]},
    {"role": "assistant", "content": [
        {"reasoningContent": {"reasoningText": {"text": "think", "signature": "sig-1"}}},
        {"text": ""},
        {"toolUse": {"toolUseId": "tu_1", "name": "lookup", "input": {"q": "x"}}},
    ]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "tu_1", "status": "error", "content": [
        {"text": "Error: boom"}, {"json": {"code": 7}}, {"image": {"format": "png", "source": {"bytes": PNG}}}]}}]},
]


async def drain(model: AnthropicModel, *args: object, **kwargs: object) -> list[dict]:
    return [event async for event in model.stream(*args, **kwargs)]  # type: ignore[arg-type]


async def test_messages_are_converted_to_anthropic_blocks(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(text("ok"))
    model = anthropic_model(anthropic_server, max_tokens=321)

    await drain(model, HISTORY, [{"name": "lookup", "description": "Look up.", "inputSchema": {"json": {
        "type": "object", "properties": {"q": {"type": "string"}}}}}], "sys", tool_choice={"any": {}})

    body = anthropic_server.bodies[0]
    png64 = base64.b64encode(PNG).decode()
    assert body["max_tokens"] == 321 and body["model"] == "claude-test" and body["system"] == "sys"
    assert body["tool_choice"] == {"type": "any"}
    assert body["tools"] == [{"name": "lookup", "description": "Look up.",
                              "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]
    assert body["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "Look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png64}},
            {"type": "document", "title": "spec", "source": {"type": "base64", "media_type": "application/pdf",
                                                             "data": base64.b64encode(b"%PDF-1").decode()}},
            {"type": "document", "title": "notes", "source": {"type": "text", "media_type": "text/plain",
                                                              "data": "plain"}},
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "think", "signature": "sig-1"},
            {"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"q": "x"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "is_error": True, "content": [
            {"type": "text", "text": "Error: boom"}, {"type": "text", "text": '{"code": 7}'},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png64}}]}]},
    ]
    headers = anthropic_server.requests[0].headers
    assert "sk-ant-test" in (headers.get("x-api-key", "") + headers.get("authorization", ""))


async def test_history_from_other_providers_is_sent_as_anthropic_accepts_it(anthropic_server: AnthropicServer) -> None:
    # Unsigned reasoning (an OpenAI-compatible server's) is rejected by Anthropic; a cited Bedrock answer is text.
    anthropic_server.script(text("ok"))
    history = [
        {"role": "user", "content": [{"text": "Q1"}]},
        {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": "hmm"}}},
                                          {"citationsContent": {"content": [{"text": "Paris"}], "citations": []}}]},
        {"role": "user", "content": [{"text": "Q2"}]},
    ]

    await drain(anthropic_model(anthropic_server), history)

    assert anthropic_server.bodies[0]["messages"][1] == {"role": "assistant",
                                                         "content": [{"type": "text", "text": "Paris"}]}


async def test_thinking_streams_as_reasoning_content_with_signature(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(Answer([("thinking", "Let me think.", "sig-xyz"), ("text", "42")]))
    agent = Agent(anthropic_model(anthropic_server, params={"thinking": {"type": "enabled", "budget_tokens": 1024}}))

    reasoning = [e["reasoningText"] async for e in agent.stream_async("?") if e.get("type") == "reasoning_delta"]

    assert "".join(reasoning) == "Let me think."
    assert agent.messages[-1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "Let me think.", "signature": "sig-xyz"}}}, {"text": "42"}]
    assert anthropic_server.bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 1024}


@pytest.mark.parametrize(("choice", "thinking", "sent"), [
    ({"auto": {}}, False, {"type": "auto"}),
    ({"any": {}}, False, {"type": "any"}),
    ({"tool": {"name": "lookup"}}, False, {"type": "tool", "name": "lookup"}),
    ({"tool": {"name": "lookup"}}, True, {"type": "auto"}),  # the API refuses forced tools with thinking on
])
async def test_tool_choice_mapping(anthropic_server: AnthropicServer, choice: dict, thinking: bool,
                                   sent: dict) -> None:
    anthropic_server.script(text("ok"))
    params = {"thinking": {"type": "enabled", "budget_tokens": 1024}} if thinking else None
    model = anthropic_model(anthropic_server, params=params)
    spec = {"name": "lookup", "description": "d", "inputSchema": {"json": {"type": "object"}}}

    await drain(model, [{"role": "user", "content": [{"text": "hi"}]}], [spec], tool_choice=choice)

    assert anthropic_server.bodies[0]["tool_choice"] == sent


async def test_usage_counts_cached_prompt_tokens(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(text("ok", input_tokens=10, output_tokens=5, cache_read=90))

    events = await drain(anthropic_model(anthropic_server), [{"role": "user", "content": [{"text": "hi"}]}])

    assert events[-1]["metadata"]["usage"] == {"inputTokens": 100, "outputTokens": 5, "totalTokens": 105,
                                               "cacheReadInputTokens": 90}


async def test_params_reach_the_body_and_request_options_the_headers(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(text("ok"))
    model = anthropic_model(anthropic_server, params={"temperature": 0.2, "stop_sequences": ["END"],
                                                      "extra_headers": {"x-trace": "t-1"}})

    await drain(model, [{"role": "user", "content": [{"text": "hi"}]}])

    request = anthropic_server.requests[0]
    assert request.body["temperature"] == 0.2 and request.body["stop_sequences"] == ["END"]
    assert request.headers["x-trace"] == "t-1"
    assert "extra_headers" not in request.body


async def test_overloaded_529_carries_retry_after(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(Failure("overloaded", retry_after=7))

    with pytest.raises(ModelThrottledException) as caught:
        await drain(anthropic_model(anthropic_server), [{"role": "user", "content": [{"text": "hi"}]}])

    assert caught.value.retry_after == 7.0


async def test_missing_api_key_is_a_configuration_error(anthropic_server: AnthropicServer) -> None:
    model = AnthropicModel("claude-test", client_args={"base_url": anthropic_server.base_url(), "max_retries": 0})

    with pytest.raises(ModelConfigurationError, match="ANTHROPIC_API_KEY"):
        await drain(model, [{"role": "user", "content": [{"text": "hi"}]}])
    assert anthropic_server.requests == []


def test_invalid_config_names_the_field() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicModel("claude-test", max_tokens="many")  # type: ignore[arg-type]
    model = AnthropicModel("claude-test")
    with pytest.raises(ValueError, match="unknown_option"):
        model.update_config(unknown_option=1)
    assert model.get_config() == {"model_id": "claude-test", "max_tokens": 4096}  # no key for unset params


def test_a_max_tokens_below_one_is_refused_before_any_call() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicModel("claude-test", max_tokens=0)
    model = AnthropicModel("claude-test", max_tokens=64)
    with pytest.raises(ValueError, match="max_tokens"):
        model.update_config(max_tokens=-1)
    assert model.get_config()["max_tokens"] == 64
