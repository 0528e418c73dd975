"""The agent loop against a real OpenAI-compatible server (``transformers serve`` with SmolLM2-135M).

Each test runs through both an ``openai-compatible:`` spec string and an ``OpenAIModel``. No timing
assertions beyond very generous bounds that only catch a hang: speed belongs in the benchmarks.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.types.exceptions import MaxTokensReachedException
from tests.realmodel.server import FORMS, QUESTIONS, RealServer, real_server

pytestmark = [pytest.mark.services, pytest.mark.timeout(600)]

# A generation the cancel cuts, had the server ignored the cut, would run this many tokens (the model's
# context is 8192): many minutes on this CPU, against the 60 s the cancel test gives its short follow-up.
LONG = 7500


@pytest.fixture(scope="module")
def server() -> RealServer:
    return real_server()


def assert_real_usage(usage: dict[str, Any]) -> None:
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


@pytest.mark.parametrize("form", FORMS)
def test_one_turn_agent(server: RealServer, form: str) -> None:
    result = Agent(server.build(form))(QUESTIONS[0])

    assert result.stop_reason == "end_turn"
    assert result.text.strip()
    usage = result.metrics.accumulated_usage
    assert_real_usage(usage)  # type: ignore[arg-type]
    # The server's own count (not the harness's estimate for servers that send none): the same request,
    # asked directly, reports the same prompt tokens.
    assert usage["inputTokens"] == server.prompt_tokens(QUESTIONS[0])


@pytest.mark.parametrize("form", FORMS)
def test_the_max_tokens_of_the_model_binds_the_server(server: RealServer, form: str) -> None:
    agent = Agent(server.build(form, max_tokens=3, stop=None))

    with pytest.raises(MaxTokensReachedException):
        agent("Write a long story about a dragon.")


@pytest.mark.parametrize("form", FORMS)
async def test_stream_async(server: RealServer, form: str) -> None:
    agent = Agent(server.build(form))
    deltas: list[str] = []
    results = []

    async for event in agent.stream_async(QUESTIONS[1]):
        if "data" in event:
            deltas.append(event["data"])
        if "result" in event:
            results.append(event["result"])

    assert len(deltas) >= 2  # streamed, not one block at the end
    [result] = results
    assert result.stop_reason == "end_turn"
    assert "".join(deltas) == result.text
    assert_real_usage(result.metrics.accumulated_usage)


@pytest.mark.parametrize("form", FORMS)
async def test_cancel_mid_generation_stops_the_server(server: RealServer, form: str) -> None:
    model = server.build(form, max_tokens=LONG, stop=None)
    # min_new_tokens (a transformers-serve request field, so on the model, not in the spec): the model
    # cannot end the story by itself; only the cancel ends it.
    model.update_config(params={**model.get_config()["params"],
                                "generation_config": json.dumps({"min_new_tokens": LONG})})
    agent = Agent(model)
    deltas: list[str] = []
    results = []

    async def consume() -> None:
        async for event in agent.stream_async("Write a long story about a dragon."):
            if "data" in event:
                deltas.append(event["data"])
                if len(deltas) == 3:
                    agent.cancel()
            if "result" in event:
                results.append(event["result"])

    await asyncio.wait_for(consume(), timeout=120)

    [result] = results
    assert result.stop_reason == "cancelled"
    assert len(deltas) >= 3
    # The server generates one request at a time, so this answer can only come once the cut generation
    # stopped; had the server gone on, it would be thousands of tokens away.
    follow_up = await asyncio.wait_for(Agent(server.build(form)).invoke_async(QUESTIONS[0]), timeout=60)
    assert follow_up.stop_reason == "end_turn" and follow_up.text.strip()
