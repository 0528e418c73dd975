"""``from_string`` model specs."""

from __future__ import annotations

import pickle
import re

import pytest

from ray_harness import Agent
from ray_harness.models import AnthropicModel, BedrockModel, OpenAIModel, from_string
from ray_harness.models.selection import spec_with_defaults
from ray_harness.types.exceptions import ModelConfigurationError


@pytest.mark.parametrize(("spec", "cls", "model_id"), [
    ("anthropic:claude-sonnet-4-5", AnthropicModel, "claude-sonnet-4-5"),
    ("openai:gpt-4o", OpenAIModel, "gpt-4o"),
    ("bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0", BedrockModel,
     "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
    (" OpenAI : gpt-4o-mini ", OpenAIModel, "gpt-4o-mini"),
])
def test_provider_prefixes(spec: str, cls: type, model_id: str) -> None:
    model = from_string(spec)

    assert type(model) is cls
    assert model.get_config()["model_id"] == model_id
    assert pickle.loads(pickle.dumps(model)).get_config() == model.get_config()


def test_openai_compatible_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    model = from_string("openai-compatible:http://localhost:8000/v1#Qwen/Qwen2.5-7B#instruct")
    assert isinstance(model, OpenAIModel)
    assert model.get_config()["model_id"] == "instruct"  # the last '#' separates the model id
    assert model.client_args == {"base_url": "http://localhost:8000/v1#Qwen/Qwen2.5-7B", "api_key": "EMPTY"}

    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    model = from_string("openai-compatible:http://127.0.0.1:11434/v1#llama3.2")
    assert model.client_args == {"base_url": "http://127.0.0.1:11434/v1", "api_key": "sk-local"}  # type: ignore[attr-defined]


@pytest.mark.parametrize(("spec", "message"), [
    ("gpt-4o", "malformed model spec"),
    ("openai:", "malformed model spec"),
    ("mistral:large", "unknown model provider 'mistral'"),
    ("openai-compatible:http://localhost:8000/v1", "openai-compatible:<base_url>#<model id>"),
    ("openai-compatible:localhost:8000#m", "must start with http"),
    ("openai-compatible:http://localhost:8000/v1#", "openai-compatible:<base_url>#<model id>"),
    ("us.anthropic.claude-sonnet-4-20250514-v1:0", "write 'bedrock:us.anthropic.claude-sonnet-4-20250514-v1:0'"),
    ("global.anthropic.claude-sonnet-4-6", "write 'bedrock:global.anthropic.claude-sonnet-4-6'"),
    ("http://localhost:8000/v1#m", "write 'openai-compatible:http://localhost:8000/v1#m'"),
])
def test_bad_specs_say_what_is_expected(spec: str, message: str) -> None:
    with pytest.raises(ModelConfigurationError, match=message) as caught:
        from_string(spec)
    assert isinstance(caught.value, ValueError)


def test_agent_resolves_strings_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(Agent(model="anthropic:claude-haiku-4-5").model, AnthropicModel)
    monkeypatch.setenv("RAY_HARNESS_MODEL", "bedrock:amazon.nova-lite-v1:0")
    assert isinstance(Agent().model, BedrockModel)
    with pytest.raises(ModelConfigurationError, match="unknown model provider"):
        Agent(model="nope:x")


# -- the ?key=value query ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "config"), [
    ("openai-compatible:http://localhost:8000/v1#m?max_tokens=64&temperature=0.2",
     {"model_id": "m", "params": {"max_tokens": 64, "temperature": 0.2}}),
    ("openai:gpt-4o?max_tokens=7&seed=3&top_p=1",
     {"model_id": "gpt-4o", "params": {"max_completion_tokens": 7, "seed": 3, "top_p": 1},
      "context_window_limit": 128_000}),  # a known model's window, as Strands' get_config() has it
    ("anthropic:claude-x?max_tokens=512&top_k=5&stop=%0A%0A",
     {"model_id": "claude-x", "max_tokens": 512, "params": {"top_k": 5, "stop_sequences": ["\n\n"]}}),
    ("bedrock:amazon.nova-lite-v1:0?max_tokens=5&top_p=0.9&stop=END",
     {"model_id": "amazon.nova-lite-v1:0",
      "params": {"inferenceConfig": {"maxTokens": 5, "topP": 0.9, "stopSequences": ["END"]}},
      "streaming": True, "guardrail_redact_input": True,
      "guardrail_redact_input_message": "[User input redacted.]", "guardrail_redact_output": False,
      "guardrail_redact_output_message": "[Assistant output redacted.]", "guardrail_latest_message": False,
      "use_native_token_count": False, "strict_tools": False,
      "include_tool_result_status": "auto", "context_window_limit": 300_000}),
    ("openai-compatible:http://h/v1#m?", {"model_id": "m"}),
    ("anthropic:claude-x", {"model_id": "claude-x", "max_tokens": 4096}),
    ("openai:gpt-4o?stop=%22true%22", {"model_id": "gpt-4o", "params": {"stop": ["true"]},
                                       "context_window_limit": 128_000}),
    ("openai:gpt-4o?stop=[1]", {"model_id": "gpt-4o", "params": {"stop": ["[1]"]}, "context_window_limit": 128_000}),
])
def test_query_parameters_fill_the_provider_fields(spec: str, config: dict) -> None:
    model = from_string(spec)

    assert model.get_config() == config
    assert pickle.loads(pickle.dumps(model)).get_config() == config


def test_context_window_goes_to_the_model_and_the_base_url_keeps_its_hash() -> None:
    model = from_string("openai-compatible:http://localhost:8000/v1#a#b?context_window=2048&max_tokens=8")

    assert isinstance(model, OpenAIModel)
    assert model.context_window == 2048
    assert model.client_args["base_url"] == "http://localhost:8000/v1#a"
    assert model.get_config() == {"model_id": "b", "params": {"max_tokens": 8}, "context_window_limit": 2048}
    assert from_string("anthropic:claude-x?context_window=100000").context_window == 100000  # type: ignore[attr-defined]


@pytest.mark.parametrize(("spec", "message"), [
    ("openai:gpt-4o?temprature=1", "unknown parameter 'temprature'; this provider takes max_tokens"),
    ("openai:gpt-4o?top_k=1", "unknown parameter 'top_k'"),
    ("bedrock:amazon.nova-lite-v1:0?seed=1", "unknown parameter 'seed'"),
    ("openai:gpt-4o?max_tokens=x", "parameter 'max_tokens' must be an integer, got 'x'"),
    ("openai:gpt-4o?max_tokens=1.5", "parameter 'max_tokens' must be an integer"),
    ("openai:gpt-4o?max_tokens=true", "parameter 'max_tokens' must be an integer"),
    ("openai:gpt-4o?max_tokens=0", "parameter 'max_tokens' must be >= 1"),
    ("openai:gpt-4o?temperature=-0.5", "parameter 'temperature' must be >= 0"),
    ("openai:gpt-4o?temperature=NaN", "parameter 'temperature' must be a finite number"),
    ("openai:gpt-4o?seed=null", "parameter 'seed' must be an integer"),
    ("openai:gpt-4o?max_tokens=1&max_tokens=2", "parameter 'max_tokens' is given twice"),
    ("openai:gpt-4o?max_tokens", "parameter 'max_tokens' has no value"),
    ("openai:gpt-4o?=3", "empty parameter name"),
    ("openai-compatible:http://localhost:8000/v1?max_tokens=3", "openai-compatible:<base_url>#<model id>"),
])
def test_bad_query_parameters_are_named(spec: str, message: str) -> None:
    with pytest.raises(ModelConfigurationError, match=re.escape(message)):
        from_string(spec)


def test_agent_and_environment_take_the_query_form(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Agent(model="anthropic:claude-haiku-4-5?max_tokens=99").model.get_config()["max_tokens"] == 99
    monkeypatch.setenv("RAY_HARNESS_MODEL", "openai:gpt-4o?max_tokens=12")
    assert Agent().model.get_config()["params"] == {"max_completion_tokens": 12}
    monkeypatch.setenv("RAY_HARNESS_MODEL", "openai:gpt-4o?max_token=12")
    with pytest.raises(ModelConfigurationError, match="unknown parameter 'max_token'"):
        Agent()


@pytest.mark.parametrize(("spec", "expected"), [
    ("openai-compatible:http://h/v1#m", "openai-compatible:http://h/v1#m?max_tokens=256"),
    ("openai-compatible:http://h/v1#m?temperature=0", "openai-compatible:http://h/v1#m?temperature=0&max_tokens=256"),
    ("anthropic:claude-x?max_tokens=64", "anthropic:claude-x?max_tokens=64"),  # the spec's own value wins
])
def test_spec_with_defaults(spec: str, expected: str) -> None:
    assert spec_with_defaults(spec, max_tokens=256) == expected
