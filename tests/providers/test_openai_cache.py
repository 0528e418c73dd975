"""Strands' ``OpenAIModel(cache_config=...)``: OpenAI's prompt-cache key and retention, through the official client."""

from __future__ import annotations

import pickle
import warnings
from types import SimpleNamespace
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.models import CacheConfig
from ray_harness.models.openai import OpenAIModel
from tests.providers.conftest import openai_model
from tests.providers.fake_servers import OpenAIServer, text

HI = [{"role": "user", "content": [{"text": "hi"}]}]


async def drain(model: Any, *args: Any, **kwargs: Any) -> list[Any]:
    return [event async for event in model.stream(*args, **kwargs)]


async def test_cache_key_and_retention_reach_the_request(openai_server: OpenAIServer) -> None:
    openai_server.script(text("a"), text("b"))
    await drain(openai_model(openai_server, cache_config=CacheConfig(cache_key="tenant-7", ttl="24h")), HI)
    await drain(openai_model(openai_server), HI)

    cached, plain = openai_server.bodies
    assert (cached["prompt_cache_key"], cached["prompt_cache_retention"]) == ("tenant-7", "24h")
    assert "prompt_cache_key" not in plain and "prompt_cache_retention" not in plain


async def test_params_win_and_false_sends_no_key(openai_server: OpenAIServer) -> None:
    openai_server.script(text("a"), text("b"))
    given = openai_model(openai_server, cache_config=CacheConfig(cache_key="from-config", ttl="in_memory"),
                         params={"prompt_cache_key": "from-params", "prompt_cache_retention": "24h"})
    await drain(given, HI)
    await drain(openai_model(openai_server, cache_config=CacheConfig(cache_key=False)), HI,
                agent_metadata=SimpleNamespace(session_id="s1"))

    from_params, opted_out = openai_server.bodies
    assert (from_params["prompt_cache_key"], from_params["prompt_cache_retention"]) == ("from-params", "24h")
    assert "prompt_cache_key" not in opted_out


async def test_an_unset_key_is_derived_from_the_session_as_strands_does(openai_server: OpenAIServer) -> None:
    openai_server.script(text("a"), text("b"))
    model = openai_model(openai_server, cache_config=CacheConfig())
    await drain(model, HI, agent_metadata=SimpleNamespace(session_id="s1"))
    await drain(model, HI)  # no session: no key

    with_session, without = openai_server.bodies
    assert with_session["prompt_cache_key"] == "strands-s1"
    assert "prompt_cache_key" not in without and "prompt_cache_retention" not in without


def test_an_agent_sends_the_configured_key(openai_server: OpenAIServer) -> None:
    openai_server.script(text("hello"))
    agent = Agent(model=openai_model(openai_server, cache_config=CacheConfig(cache_key="k")))

    assert str(agent("hi")).strip() == "hello"
    assert openai_server.bodies[0]["prompt_cache_key"] == "k"


def test_an_agent_with_a_session_derives_the_key_from_it(openai_server: OpenAIServer, tmp_path: Any) -> None:
    from ray_harness.session import FileSessionManager

    openai_server.script(text("hello"), text("again"))
    model = openai_model(openai_server, cache_config=CacheConfig())
    Agent(model=model, session_manager=FileSessionManager("tenant-7", storage_dir=str(tmp_path)))("hi")
    Agent(model=model)("hi")  # the same model in an agent without a session: no key

    with_session, without = openai_server.bodies
    assert with_session["prompt_cache_key"] == "strands-tenant-7"
    assert "prompt_cache_key" not in without


def test_fields_openai_cannot_use_are_warned_about_when_configured(openai_server: OpenAIServer) -> None:
    with pytest.warns(UserWarning, match=r"\['strategy', 'tools_ttl'\] have no effect on OpenAI"):
        OpenAIModel("gpt-test", cache_config=CacheConfig(strategy="anthropic", tools_ttl=True))
    model = OpenAIModel("gpt-test")
    with pytest.warns(UserWarning, match=r"ttl='1h' is not an OpenAI retention"):
        model.update_config(cache_config=CacheConfig(ttl="1h"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        OpenAIModel("gpt-test", cache_config=CacheConfig(cache_key="k", ttl="24h"))  # all of it is used: no warning


def test_cache_config_is_a_config_key() -> None:
    model = OpenAIModel("gpt-test")
    assert "cache_config" not in model.get_config()

    model.update_config(cache_config=CacheConfig(cache_key="k"))
    assert model.get_config()["cache_config"] == CacheConfig(cache_key="k")
    assert pickle.loads(pickle.dumps(model)).get_config() == model.get_config()
    model.update_config(cache_config=None)
    assert "cache_config" not in model.get_config()


def test_a_bad_cache_config_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="cache_config"):
        OpenAIModel("gpt-test", cache_config="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"cache_config\.strategy"):
        OpenAIModel("gpt-test").update_config(cache_config={"strategy": "everything"})


@pytest.mark.parametrize("stream", [True, False])
async def test_cache_reads_and_writes_are_in_the_usage(openai_server: OpenAIServer, stream: bool) -> None:
    openai_server.script(text("a", input_tokens=40, cache_read=30, cache_write=6))

    events = await drain(openai_model(openai_server, stream=stream, cache_config=CacheConfig(cache_key="k")), HI)

    assert events[-1]["metadata"]["usage"] == {"inputTokens": 40, "outputTokens": 7, "totalTokens": 47,
                                               "cacheReadInputTokens": 30, "cacheWriteInputTokens": 6}
