"""A history replayed to a Bedrock model: what that model refuses or misreads is adjusted, as Strands does."""

from __future__ import annotations

from typing import Any

import pytest

from tests.providers.conftest import bedrock_model
from tests.providers.fake_servers import BedrockServer, text

SIGNED: Any = {"reasoningContent": {"reasoningText": {"text": "think", "signature": "sig"}}}
UNSIGNED: Any = {"reasoningContent": {"reasoningText": {"text": "think"}}}
REDACTED: Any = {"reasoningContent": {"redactedContent": b"opaque"}}
SPEC: Any = {"name": "f", "description": "F.", "inputSchema": {"json": {"type": "object"}}}


def history(*reasoning: Any) -> Any:
    return [{"role": "user", "content": [{"text": "q"}]},
            {"role": "assistant", "content": [*reasoning, {"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"json": {"a": 1}}]}}]}]


async def sent_messages(server: BedrockServer, model_id: str, messages: Any) -> Any:
    server.script(text("ok"))
    model = bedrock_model(server, model_id=model_id)
    [_ async for _ in model.stream(messages, [SPEC])]
    return server.bodies[-1]["messages"]


@pytest.mark.parametrize(("model_id", "kept"), [
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", [SIGNED, REDACTED]),  # Claude: signed reasoning only
    ("amazon.nova-pro-v1:0", [REDACTED]),  # refuses reasoningText
    ("openai.gpt-oss-120b-1:0", [UNSIGNED, REDACTED]),  # not Anthropic: no signatures
    ("deepseek.r1-v1:0", []),  # refuses every reasoning block
    ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x", [SIGNED, UNSIGNED, REDACTED]),
])
async def test_reasoning_the_model_would_refuse_is_left_out(bedrock_server: BedrockServer, model_id: str,
                                                           kept: list[Any]) -> None:
    messages = await sent_messages(bedrock_server, model_id, history(SIGNED, UNSIGNED, REDACTED))

    reasoning = [block for block in messages[1]["content"] if "reasoningContent" in block]
    expected = [{"reasoningContent": {"redactedContent": "b3BhcXVl"}} if block is REDACTED else block
                for block in kept]  # bytes travel base64-encoded
    assert reasoning == expected
    assert "toolUse" in messages[1]["content"][-1]


@pytest.mark.parametrize(("model_id", "result"), [
    ("us.amazon.nova-lite-v1:0", [{"text": '{"a": 1}'}]),  # Nova misreads JSON blocks: it gets the JSON as text
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", [{"json": {"a": 1}}]),
])
async def test_nova_gets_json_tool_results_as_text(bedrock_server: BedrockServer, model_id: str,
                                                   result: list[Any]) -> None:
    messages = await sent_messages(bedrock_server, model_id, history())

    assert messages[2]["content"][0]["toolResult"]["content"] == result
