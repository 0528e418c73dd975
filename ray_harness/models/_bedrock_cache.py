"""Prompt caching for ``BedrockModel``: Strands' ``cache_config`` and ``cache_tools`` as Converse ``cachePoint`` blocks.

``cache_config`` acts on Claude models only (``strategy="auto"`` with a model id naming ``claude`` or
``anthropic``, or ``strategy="anthropic"``), as in Strands: a cache point at the end of the system prompt, one
on the last user message (those in earlier messages are dropped, as Bedrock allows four per request) and, with
``tools_ttl`` or the model's ``cache_tools``, one after the tool specs. For another model it does nothing, and it
turns ``cache_tools`` off with it.
"""

from __future__ import annotations

from typing import Any

from ray_harness.models._anthropic_cache import cached_messages, cached_system
from ray_harness.models.base import CacheConfig, CacheToolsConfig
from ray_harness.types.content import Message, Messages, SystemPrompt

__all__ = ("BedrockCache",)


class BedrockCache:
    """Where a request gets cache points, given a model's ``cache_config`` and ``cache_tools``."""

    def __init__(self, model_id: str, config: CacheConfig | None, cache_tools: str | CacheToolsConfig | None) -> None:
        self.config = config
        self.cache_tools = cache_tools
        lowered = model_id.lower()
        self.active = config is not None and (config.strategy == "anthropic"
                                              or "claude" in lowered or "anthropic" in lowered)

    def system(self, system_prompt: SystemPrompt | None) -> SystemPrompt | None:
        return cached_system(system_prompt, self.config) if system_prompt and self.active else system_prompt

    def messages(self, messages: Messages) -> Messages:
        if not self.active:
            return messages
        return [_clear_of_documents(message) for message in cached_messages(messages, self.config)]

    def tools_point(self) -> dict[str, Any] | None:
        """The ``cachePoint`` after the tool specs: ``cache_config.tools_ttl`` when set, else ``cache_tools``."""
        config = self.config
        if config is not None and not self.active:
            return None
        if config is not None and config.tools_ttl is not None:
            if config.tools_ttl is False:
                return None
            return _point("default", config.tools_ttl if isinstance(config.tools_ttl, str) else config.ttl)
        if not self.cache_tools:
            return None
        if isinstance(self.cache_tools, CacheToolsConfig):
            kind, ttl = self.cache_tools.type, self.cache_tools.ttl
        else:
            kind, ttl = self.cache_tools, None
        return _point(kind, ttl or (config.ttl if config is not None else None))


def _point(kind: str, ttl: str | None) -> dict[str, Any]:
    return {"cachePoint": {"type": kind, **({"ttl": ttl} if ttl else {})}}


def _clear_of_documents(message: Message) -> Message:
    """The message with its cache point moved ahead of the non-PDF documents right before it.

    Bedrock refuses a cache point that directly follows such a document; with nothing ahead of them to cache, the
    point is dropped.
    """
    content: list[Any] = list(message["content"])
    at = next((index for index, block in enumerate(content) if "cachePoint" in block), None)
    if at is None:
        return message
    target = at
    while target > 0 and "document" in content[target - 1] and content[target - 1]["document"].get("format") != "pdf":
        target -= 1
    if target == at:
        return message
    point = content.pop(at)
    if target > 0:
        content.insert(target, point)
    return {**message, "content": content}
