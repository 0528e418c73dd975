"""A Strands user's model configuration keys: taken under Strands' name, or refused naming the key."""

from __future__ import annotations

import pytest

from ray_harness.models.anthropic import AnthropicModel
from ray_harness.models.base import Model
from ray_harness.models.bedrock import BedrockModel
from ray_harness.models.openai import OpenAIModel

PROVIDERS = [OpenAIModel, AnthropicModel, BedrockModel]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_context_window_limit_is_the_context_window(provider: type[Model]) -> None:
    model = provider("m", context_window_limit=8_000)  # type: ignore[call-arg]
    assert (model.context_window, model.context_window_limit) == (8_000, 8_000)

    model.update_config(context_window_limit=16_000)
    assert model.context_window == 16_000
    model.update_config(context_window=32_000)
    assert model.context_window_limit == 32_000
    assert "context_window_limit" not in model.get_config()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_bad_context_window_is_refused_by_name(provider: type[Model]) -> None:
    with pytest.raises(ValueError, match="context_window_limit must be a positive number of tokens"):
        provider("m", context_window_limit=0)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="disagree"):
        provider("m", context_window=10, context_window_limit=20)  # type: ignore[call-arg]
    model = provider("m", context_window=10)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="context_window must be a positive number of tokens"):
        model.update_config(context_window="big")
    assert model.context_window == 10


@pytest.mark.parametrize(("provider", "key"), [(OpenAIModel, "cache_config"), (OpenAIModel, "bedrock_mantle_config")])
def test_strands_keys_not_taken_are_refused_by_name(provider: type[Model], key: str) -> None:
    with pytest.raises(TypeError, match=key):
        provider("m", **{key: True})  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=key):
        provider("m").update_config(**{key: True})  # type: ignore[call-arg]


@pytest.mark.parametrize(("provider", "added"), [(OpenAIModel, "stream"), (AnthropicModel, "use_native_token_count"),
                                                 (BedrockModel, "strict_tools")])
def test_a_model_pickled_before_a_setting_existed_unpickles_with_its_default(provider: type[Model],
                                                                              added: str) -> None:
    model = provider("m")  # type: ignore[call-arg]
    state = model.__getstate__()  # type: ignore[attr-defined]
    state["config"] = state["config"].model_copy()
    del state["config"].__dict__[added]  # what a pickle from the release before the setting holds
    clone = provider.__new__(provider)

    clone.__setstate__(state)  # type: ignore[attr-defined]

    assert clone.get_config() == model.get_config()
