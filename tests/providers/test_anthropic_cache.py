"""AnthropicModel's Strands settings for prompt caching and server tools, as the API receives them."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.models import CacheConfig, CacheToolsConfig
from ray_harness.models.anthropic import AnthropicModel
from tests.providers.conftest import anthropic_model
from tests.providers.fake_servers import AnthropicServer, text, tool_use

EPHEMERAL = {"type": "ephemeral"}
SPEC = {"name": "lookup", "description": "Look up.", "inputSchema": {"json": {"type": "object"}}}
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}


def hi(*texts: str) -> list[dict]:
    return [{"role": "user", "content": [{"text": value} for value in texts]}]


async def send(model: Any, messages: list[Any], specs: list[Any] | None = None, system: object = None,
               **kwargs: object) -> None:
    [_ async for _ in model.stream(messages, specs, system, **kwargs)]


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found: {query}"


def test_cache_config_marks_system_prompt_and_last_user_message(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(tool_use("lookup", {"query": "x"}, "t1"), text("done"))
    agent = Agent(anthropic_model(anthropic_server, cache_config=CacheConfig()), tools=[lookup],
                  system_prompt="You look things up.")

    agent("look up x")

    first, second = anthropic_server.bodies
    assert first["system"] == [{"type": "text", "text": "You look things up.", "cache_control": EPHEMERAL}]
    assert first["messages"][-1]["content"] == [{"type": "text", "text": "look up x", "cache_control": EPHEMERAL}]
    assert "cache_control" not in first["tools"][-1]  # tools only with tools_ttl or cache_tools
    # The next turn moves the point to the tool results; the prompt's turn no longer carries one.
    assert second["messages"][0]["content"] == [{"type": "text", "text": "look up x"}]
    assert second["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert agent.messages[0]["content"] == [{"text": "look up x"}]  # the history itself is untouched


async def test_ttls_and_the_caller_placed_points(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(text("ok"))
    model = anthropic_model(anthropic_server, cache_config=CacheConfig(ttl="1h", system_prompt_ttl="5m",
                                                                        tools_ttl=True))
    history = [{"role": "user", "content": [{"text": "old"}, {"cachePoint": {"type": "default"}}]},
               {"role": "assistant", "content": [{"text": "ok"}]},
               {"role": "user", "content": [{"text": "a"}, {"cachePoint": {"type": "default", "ttl": "5m"}},
                                            {"text": "b"}]}]

    await send(model, history, [SPEC], "sys")

    body = anthropic_server.bodies[0]
    assert body["system"] == [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral", "ttl": "5m"}}]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][0]["content"] == [{"type": "text", "text": "old"}]  # an earlier point is dropped
    assert body["messages"][-1]["content"] == [  # the caller's point in the last user message is kept as placed
        {"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "ttl": "5m"}},
        {"type": "text", "text": "b"}]


async def test_system_prompt_caching_can_be_turned_off(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(text("ok"))
    model = anthropic_model(anthropic_server, cache_config=CacheConfig(system_prompt_ttl=False))

    await send(model, hi("q"), None, [{"text": "sys"}])

    assert anthropic_server.bodies[0]["system"] == [{"type": "text", "text": "sys"}]


@pytest.mark.parametrize(("cache_tools", "expected"), [
    ("default", EPHEMERAL),
    (CacheToolsConfig(ttl="1h"), {"type": "ephemeral", "ttl": "1h"}),
])
async def test_cache_tools_marks_the_last_tool(anthropic_server: AnthropicServer, cache_tools: object,
                                               expected: dict) -> None:
    anthropic_server.script(text("ok"))
    model = anthropic_model(anthropic_server, cache_tools=cache_tools)

    await send(model, hi("q"), [SPEC, {**SPEC, "name": "other"}], "sys")

    body = anthropic_server.bodies[0]
    assert [tool.get("cache_control") for tool in body["tools"]] == [None, expected]
    assert body["system"] == "sys"  # no cache_config: nothing else changes
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "q"}]}]


async def test_server_tools_go_with_the_function_tools_unless_a_tool_is_forced(
        anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(text("ok"), text("ok"))
    model = anthropic_model(anthropic_server, anthropic_tools=[WEB_SEARCH], cache_tools="default")

    await send(model, hi("q"), [SPEC])
    await send(model, hi("q"), [SPEC], tool_choice={"tool": {"name": "lookup"}})

    free, forced = anthropic_server.bodies
    assert [tool["name"] for tool in free["tools"]] == ["lookup", "web_search"]
    assert free["tools"][-1] == {**WEB_SEARCH, "cache_control": EPHEMERAL}
    assert [tool["name"] for tool in forced["tools"]] == ["lookup"]
    assert model.get_config()["anthropic_tools"] == [WEB_SEARCH]  # the config is not marked


def test_settings_are_config_validated_by_name() -> None:
    model = AnthropicModel("claude-test", cache_config=CacheConfig(ttl="1h"))
    assert model.get_config()["cache_config"] == CacheConfig(ttl="1h")
    assert pickle.loads(pickle.dumps(model)).get_config() == model.get_config()

    model.update_config(cache_tools="default", max_tokens=64)
    assert model.get_config()["cache_config"] == CacheConfig(ttl="1h")  # survives an update of other keys
    assert model.get_config()["cache_tools"] == "default"

    with pytest.raises(ValueError, match=r"cache_config\.strategy"):
        AnthropicModel("claude-test", cache_config=CacheConfig(strategy="sometimes"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="anthropic_tools are Anthropic's server tools"):
        AnthropicModel("claude-test", anthropic_tools=[{"name": "f", "input_schema": {"type": "object"}}])
    assert AnthropicModel("claude-test").get_config() == {"model_id": "claude-test", "max_tokens": 4096}
