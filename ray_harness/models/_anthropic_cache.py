"""Prompt caching for ``AnthropicModel``: Strands' ``cache_config`` and ``cache_tools`` as ``cache_control`` marks.

With ``cache_config`` the request carries a cache point at the end of the system prompt and one on the last user
message (where a cache point already placed there is kept, and those in earlier messages are dropped: the API
allows four per request, and a point added every turn would use them up). ``cache_config.tools_ttl`` — or, left
unset, the model's ``cache_tools`` — puts one on the last tool, which caches every tool definition.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ray_harness.models.base import CacheConfig, CacheToolsConfig
from ray_harness.types.content import ContentBlock, Message, Messages, SystemPrompt

__all__ = ("as_dict", "cache_control", "cached_messages", "cached_system", "tools_cache_control")


def as_dict(value: Any) -> Any:
    """A ``CacheConfig`` / ``CacheToolsConfig`` instance as a dict, so pydantic validates its fields too."""
    return dataclasses.asdict(value) if isinstance(value, CacheConfig | CacheToolsConfig) else value


def cache_control(ttl: str | None) -> dict[str, Any]:
    """Anthropic's ``cache_control`` (``ephemeral`` is the only type it has), with a duration when one is set."""
    return {"type": "ephemeral", "ttl": ttl} if ttl else {"type": "ephemeral"}


def cached_messages(messages: Messages, config: CacheConfig | None) -> Messages:
    """``messages`` (copied when changed) with one cache point, at the end of the last user message with content.

    A cache point the caller placed in that message is kept instead; those in other messages are dropped.
    """
    if config is None:
        return messages
    target = next((index for index in range(len(messages) - 1, -1, -1) if messages[index]["role"] == "user"
                   and any("cachePoint" not in block for block in messages[index]["content"])), None)
    result: list[Message] = []
    for index, message in enumerate(messages):
        content: list[ContentBlock] = []
        kept = False
        for block in message["content"]:
            if "cachePoint" not in block:
                content.append(block)
            elif index == target and not kept:
                kept = True
                content.append(block)
        if index == target and not kept:
            point: dict[str, Any] = {"type": "default", **({"ttl": config.ttl} if config.ttl else {})}
            content.append({"cachePoint": point})
        result.append({"role": message["role"], "content": content})
    return result


def cached_system(system_prompt: SystemPrompt, config: CacheConfig | None) -> SystemPrompt:
    """The system prompt with a cache point at its end (``system_prompt_ttl``), unless it carries one already."""
    if config is None or config.system_prompt_ttl is False:
        return system_prompt
    ttl = config.system_prompt_ttl if isinstance(config.system_prompt_ttl, str) else config.ttl
    blocks: list[Any] = [{"text": system_prompt}] if isinstance(system_prompt, str) else list(system_prompt)
    if any("cachePoint" in block for block in blocks):
        return system_prompt
    return [*blocks, {"cachePoint": {"type": "default", **({"ttl": ttl} if ttl else {})}}]


def tools_cache_control(config: CacheConfig | None, cache_tools: str | CacheToolsConfig | None
                        ) -> dict[str, Any] | None:
    """The ``cache_control`` of the last tool: ``config.tools_ttl`` when set, else ``cache_tools``."""
    if config is not None and config.tools_ttl is not None:
        if config.tools_ttl is False:
            return None
        return cache_control(config.tools_ttl if isinstance(config.tools_ttl, str) else config.ttl)
    if not cache_tools:
        return None
    ttl = cache_tools.ttl if isinstance(cache_tools, CacheToolsConfig) else None
    return cache_control(ttl or (config.ttl if config is not None else None))
