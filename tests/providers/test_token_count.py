"""``model.count_tokens`` and ``model.estimate_utilization`` as in Strands; native counting behind a setting."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from ray_harness.models import estimate_tokens
from ray_harness.models.anthropic import AnthropicModel
from ray_harness.models.base import Model
from ray_harness.models.bedrock import BedrockModel
from ray_harness.models.openai import OpenAIModel
from ray_harness.testing import ScriptedModel
from tests.providers.conftest import Backend, anthropic_model, bedrock_model
from tests.providers.fake_servers import AnthropicServer, BedrockServer, Failure, TokenCount

HISTORY: Any = [{"role": "user", "content": [{"text": "What is the weather in Paris today? " * 3}]},
           {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "weather",
                                                         "input": {"city": "Paris"}}}]},
           {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "success",
                                                        "content": [{"text": "21 degrees"}]}}]}]
SPEC: Any = {"name": "weather", "description": "The weather in a city.",
        "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def test_count_tokens_is_async_and_estimate_utilization_is_not() -> None:
    assert inspect.iscoroutinefunction(Model.count_tokens)
    assert not inspect.iscoroutinefunction(Model.estimate_utilization)


async def test_count_tokens_without_native_counting_is_the_estimate(backend: Backend) -> None:
    model = backend.model()

    counted = await model.count_tokens(HISTORY, [SPEC], "Be brief.")

    assert counted == estimate_tokens(HISTORY, "Be brief.", [SPEC])
    assert backend.server.requests == []  # no request without use_native_token_count


async def test_system_prompt_content_wins_over_system_prompt() -> None:
    model = ScriptedModel()
    blocks: Any = [{"text": "a much longer system prompt given as blocks " * 4}, {"cachePoint": {"type": "default"}}]

    counted = await model.count_tokens(HISTORY, system_prompt="short", system_prompt_content=blocks)

    assert counted == estimate_tokens(HISTORY, blocks)


async def test_anthropic_counts_natively_when_asked(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(TokenCount(1234))
    model = anthropic_model(anthropic_server, use_native_token_count=True, params={"temperature": 0.5})

    counted = await model.count_tokens(HISTORY, [SPEC], "Be brief.")

    assert counted == 1234
    (request,) = anthropic_server.requests
    assert request.path == "/v1/messages/count_tokens"
    assert set(request.body) == {"model", "messages", "system", "tools"}  # no max_tokens, no inference params
    assert request.body["system"] == "Be brief."
    assert [tool["name"] for tool in request.body["tools"]] == ["weather"]
    assert model.get_config()["use_native_token_count"] is True


async def test_bedrock_counts_natively_when_asked(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(TokenCount(321))
    model = bedrock_model(bedrock_server, use_native_token_count=True, temperature=0.5)

    counted = await model.count_tokens(HISTORY, [SPEC], "Be brief.")

    assert counted == 321
    (request,) = bedrock_server.requests
    assert request.path == "/model/anthropic.claude-test-v1:0/count-tokens"
    converse = request.body["input"]["converse"]
    assert set(converse) == {"messages", "system", "toolConfig"}
    assert converse["system"] == [{"text": "Be brief."}]
    assert converse["toolConfig"]["tools"][0]["toolSpec"]["name"] == "weather"


async def test_a_failed_native_count_falls_back_to_the_estimate(anthropic_server: AnthropicServer,
                                                                bedrock_server: BedrockServer) -> None:
    anthropic_server.script(Failure("throttle"))
    bedrock_server.script(Failure("throttle"))
    estimate = estimate_tokens(HISTORY)

    assert await anthropic_model(anthropic_server, use_native_token_count=True).count_tokens(HISTORY) == estimate
    assert await bedrock_model(bedrock_server, use_native_token_count=True).count_tokens(HISTORY) == estimate


async def test_bedrock_stops_asking_a_model_it_may_not_count_for(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(Failure("denied"), TokenCount(5))
    denied = bedrock_model(bedrock_server, model_id="anthropic.claude-denied-v1:0", use_native_token_count=True)
    other = bedrock_model(bedrock_server, model_id="anthropic.claude-other-v1:0", use_native_token_count=True)

    first = await denied.count_tokens(HISTORY)
    second = await denied.count_tokens(HISTORY)
    assert await other.count_tokens(HISTORY) == 5

    assert first == second == estimate_tokens(HISTORY)
    assert [request.path for request in bedrock_server.requests] == [
        "/model/anthropic.claude-denied-v1:0/count-tokens", "/model/anthropic.claude-other-v1:0/count-tokens"]


@pytest.mark.parametrize("provider", [AnthropicModel, BedrockModel])
def test_use_native_token_count_is_a_config_key(provider: type[Model]) -> None:
    model = provider("m")  # type: ignore[call-arg]
    assert model.get_config().get("use_native_token_count", False) is False  # Anthropic lists it once set
    model.update_config(use_native_token_count=True)
    assert model.get_config()["use_native_token_count"] is True
    with pytest.raises(ValueError, match="use_native_token_count"):
        model.update_config(use_native_token_count="yes")


def test_openai_has_no_native_count() -> None:
    with pytest.raises(TypeError, match="use_native_token_count"):
        OpenAIModel("m", use_native_token_count=True)  # type: ignore[call-arg]


def test_estimate_utilization_is_the_share_of_the_context_window() -> None:
    model = OpenAIModel("m", context_window_limit=1000)

    assert model.estimate_utilization(250) == 0.25
    assert model.estimate_utilization(1500) == 1.5  # above 1: the input overflows


def test_estimate_utilization_without_a_window_warns_and_assumes_strands_default() -> None:
    model = OpenAIModel("m")

    with pytest.warns(UserWarning, match="context_window_limit is not set"):
        assert model.estimate_utilization(50_000) == 0.25


@pytest.mark.parametrize(("value", "error"), [(-1, ValueError), ("10", TypeError), (True, TypeError)])
def test_estimate_utilization_refuses_a_bad_token_count_by_name(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="input_tokens"):
        OpenAIModel("m", context_window=10).estimate_utilization(value)  # type: ignore[arg-type]


def test_count_tokens_works_from_sync_code() -> None:
    assert asyncio.run(ScriptedModel().count_tokens(HISTORY)) == estimate_tokens(HISTORY)
