"""``from_string`` model specs."""

from __future__ import annotations

import pickle

import pytest

from ray_harness import Agent
from ray_harness.models import AnthropicModel, BedrockModel, OpenAIModel, from_string
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
