"""A Strands user's model configuration keys: taken under Strands' name, or refused naming the key."""

from __future__ import annotations

import pickle
from collections.abc import Mapping

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
    assert model.get_config()["context_window_limit"] == 32_000  # a config key, as in Strands
    model.update_config(**model.get_config())  # what get_config() gives, update_config() takes
    assert model.context_window == 32_000


@pytest.mark.parametrize(("provider", "model_id", "window"), [
    (OpenAIModel, "gpt-4o", 128_000), (AnthropicModel, "claude-sonnet-4-5", 200_000),
    (BedrockModel, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", 200_000), (BedrockModel, "amazon.nova-pro-v1:0", 300_000),
])
def test_a_known_model_has_its_window_without_setting_one(provider: type[Model], model_id: str, window: int) -> None:
    model = provider(model_id)  # type: ignore[call-arg]

    assert (model.context_window, model.context_window_limit) == (window, window)
    assert model.get_config()["context_window_limit"] == window
    assert model.estimate_utilization(window // 2) == 0.5  # no warning: the window is known
    model.update_config(context_window_limit=1_000)
    assert model.context_window == 1_000  # a window set wins
    model.update_config(context_window_limit=None, model_id="not-a-known-model")
    assert model.context_window is None and "context_window_limit" not in model.get_config()
    model.update_config(model_id=model_id)
    assert model.context_window == window  # the known window follows the model id


@pytest.mark.parametrize("provider", PROVIDERS)
def test_get_config_has_no_key_for_a_setting_left_unset(provider: type[Model]) -> None:
    # Strands' get_config() is the dict of the keys given: `config.get("params", {})` is a dict, never None.
    model = provider("not-a-known-model")  # type: ignore[call-arg]
    config = model.get_config()

    assert "params" not in config and None not in config.values()
    model.update_config(params={"temperature": 0.5} if provider is not BedrockModel
                        else {"inferenceConfig": {"temperature": 0.5}})
    assert model.get_config().get("params", {}) != {}
    model.update_config(params=None)
    assert "params" not in model.get_config()


def test_a_model_pickled_when_the_window_was_an_attribute_keeps_it() -> None:
    model = OpenAIModel("m", context_window=4_096)
    state = model.__getstate__()
    state["context_window"] = state.pop("_context_window")  # what a pickle from before holds
    clone = OpenAIModel.__new__(OpenAIModel)

    clone.__setstate__(state)

    assert clone.context_window == 4_096 and pickle.loads(pickle.dumps(clone)).context_window == 4_096


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


@pytest.mark.parametrize(("provider", "key"), [(AnthropicModel, "bedrock_mantle_config"), (BedrockModel, "client_args")])
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


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_provider_is_stateful(provider: type[Model]) -> None:
    assert provider("m").stateful is False  # type: ignore[call-arg]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_config_reads_as_strands_config_dict(provider: type[Model]) -> None:
    model = provider("m", params={"temperature": 0.5})  # type: ignore[call-arg]
    config = model.config  # type: ignore[attr-defined]

    assert config["model_id"] == "m" and config.model_id == "m"  # a key, and still an attribute
    assert config.get("params") == {"temperature": 0.5} and "model_id" in config
    assert "cache_config" not in config and config.get("cache_config", "unset") == "unset"  # unset: no key
    with pytest.raises(KeyError, match="cache_config"):
        config["cache_config"]
    assert dict(config) == {**config} == dict(config.items()) == dict(zip(config.keys(), config.values(), strict=True))
    assert list(config) == list(config.keys()) and len(config) == len(config.keys())
    assert isinstance(config, Mapping) and "not_a_setting" not in config
    with pytest.raises(TypeError):
        config["model_id"] = "other"  # type: ignore[index]  # read-only: update_config() changes settings

    model.update_config(params=None, model_id="n")
    assert model.config.get("params", {}) == {} and model.config["model_id"] == "n"  # type: ignore[attr-defined]
    clone = pickle.loads(pickle.dumps(model))
    assert dict(clone.config) == dict(model.config) and clone.get_config() == model.get_config()  # type: ignore[attr-defined]
