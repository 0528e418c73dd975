"""Requests a provider refuses and a resent one gets past, recovered from as Strands recovers.

Stale replayed thinking (Anthropic, Bedrock): resent once with ``block_binding`` set to ``drop_block``, which later
requests to that model keep. A turn mixing tool results with other blocks (Bedrock): resent with the tool-result
message and the next user message as separate turns, which that model then always gets.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.providers.conftest import anthropic_model, bedrock_model
from tests.providers.fake_servers import AnthropicServer, BedrockServer, Failure, text

BETA = "thinking-binding-controls-2026-08-01"
THINKING = {"type": "enabled", "budget_tokens": 1024}
DROP = {**THINKING, "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
HISTORY: Any = [
    {"role": "user", "content": [{"text": "q"}]},
    {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": "t", "signature": "s"}}},
                                      {"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "done"}]}}]},
    {"role": "user", "content": [{"text": "next question"}]},
]
SPEC: Any = {"name": "f", "description": "F.", "inputSchema": {"json": {"type": "object"}}}


async def drain(model: Any, messages: Any = HISTORY) -> list[Any]:
    return [event async for event in model.stream(messages, [SPEC])]


async def test_anthropic_drops_stale_thinking_once_refused_and_from_then_on(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(Failure("thinking_binding"), text("ok"), text("again"), text("from a clone"))
    model = anthropic_model(anthropic_server, params={"thinking": THINKING},
                            client_args={"default_headers": {"anthropic-beta": "other-beta"}})

    events = await drain(model)
    await drain(model)
    await drain(pickle.loads(pickle.dumps(model)))  # what was learned ships with the model

    first, retry, later, cloned = anthropic_server.requests
    assert first.body["thinking"] == THINKING and first.headers["anthropic-beta"] == "other-beta"
    assert retry.body["thinking"] == later.body["thinking"] == cloned.body["thinking"] == DROP
    assert retry.headers["anthropic-beta"] == later.headers["anthropic-beta"] == f"other-beta,{BETA}"
    assert retry.body["messages"] == first.body["messages"]
    assert any(event.get("contentBlockDelta", {}).get("delta") == {"text": "o"} for event in events)


async def test_anthropic_without_thinking_on_raises_the_refusal(anthropic_server: AnthropicServer) -> None:
    import anthropic

    anthropic_server.script(Failure("thinking_binding"))

    with pytest.raises(anthropic.BadRequestError, match="bound to a different conversation"):
        await drain(anthropic_model(anthropic_server))
    assert len(anthropic_server.requests) == 1


@pytest.mark.parametrize("streaming", [True, False])
async def test_bedrock_drops_stale_thinking_once_refused_and_from_then_on(bedrock_server: BedrockServer,
                                                                          streaming: bool) -> None:
    bedrock_server.script(Failure("thinking_binding"), text("ok"), text("again"))
    model = bedrock_model(bedrock_server, streaming=streaming,
                          additional_request_fields={"thinking": THINKING, "anthropic_beta": ["other-beta"]})

    await drain(model)
    await drain(model)

    first, retry, later = (body["additionalModelRequestFields"] for body in bedrock_server.bodies)
    assert first == {"thinking": THINKING, "anthropic_beta": ["other-beta"]}
    assert retry == later == {"thinking": DROP, "anthropic_beta": ["other-beta", BETA]}


@pytest.mark.parametrize("streaming", [True, False])
async def test_bedrock_separates_a_tool_result_turn_the_model_refuses_merged(bedrock_server: BedrockServer,
                                                                             streaming: bool) -> None:
    bedrock_server.script(Failure("tool_result_turn"), text("ok"), text("again"))
    model = bedrock_model(bedrock_server, streaming=streaming)

    await drain(model)
    await drain(model)

    first, retry, later = (body["messages"] for body in bedrock_server.bodies)
    result = {"toolResult": {"toolUseId": "t1", "content": [{"text": "done"}], "status": "success"}}
    assert first[2:] == [{"role": "user", "content": [result, {"text": "next question"}]}]  # one turn by default
    assert retry[2:] == later[2:] == [{"role": "user", "content": [result]},
                                      {"role": "assistant", "content": [{"text": "Tool result received."}]},
                                      {"role": "user", "content": [{"text": "next question"}]}]
    assert retry[:2] == first[:2]


MIXED: Any = [*HISTORY[:2], {"role": "user", "content": [*HISTORY[2]["content"], *HISTORY[3]["content"]]}]


@pytest.mark.parametrize(("failure", "messages", "match"), [
    ("thinking_binding", HISTORY, "bound to a different conversation"),  # thinking is off: nothing to drop
    ("tool_result_turn", MIXED, "cannot be provided in the same turn"),  # one message: Strands sends it as it is
])
async def test_bedrock_raises_a_refusal_a_resent_request_would_not_get_past(bedrock_server: BedrockServer, failure: str,
                                                                           messages: Any, match: str) -> None:
    bedrock_server.script(Failure(failure))

    with pytest.raises(ClientError, match=match):
        await drain(bedrock_model(bedrock_server), messages)
    assert len(bedrock_server.requests) == 1
