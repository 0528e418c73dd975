"""The ``Model`` protocol: an LLM provider that streams Converse events.

Providers subclass :class:`Model`. ``stream()`` is an async generator of
Converse stream events (see :mod:`ray_harness.types.streaming`); the agent loop
assembles them into the assistant message, usage and latency. Providers must
keep no per-run state and create their HTTP clients lazily, so a model pickles
into a Ray actor without carrying a live connection.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from ray_harness.types.content import Messages, SystemPrompt
from ray_harness.types.streaming import StreamEvent
from ray_harness.types.tools import ToolChoice, ToolSpec

__all__ = ("Model", "ModelPrices", "estimate_tokens", "system_prompt_text")


@dataclass(frozen=True)
class ModelPrices:
    """USD per one million tokens; used for ``metrics.accumulated_cost_usd`` and the ``cost_usd`` limit."""

    input_per_million: float
    output_per_million: float
    cache_read_per_million: float | None = None

    def cost(self, usage: dict[str, int]) -> float:
        """The cost in USD of one call's ``usage`` (cache reads at their own price when one is set)."""
        cache_read = usage.get("cacheReadInputTokens", 0)
        cache_price = self.cache_read_per_million if self.cache_read_per_million is not None else self.input_per_million
        fresh_input = max(usage.get("inputTokens", 0) - cache_read, 0)
        return (
            fresh_input * self.input_per_million
            + cache_read * cache_price
            + usage.get("outputTokens", 0) * self.output_per_million
        ) / 1_000_000


class Model(ABC):
    """An LLM provider.

    Attributes:
        context_window: The model's context window in tokens, if known (proactive compression uses it).
        prices: Optional price table; when set, results report cost and ``Limits(cost_usd=)`` works.
        rate_limit: Optional ``RateLimit``: every call waits for a permit of its (cluster-wide) bucket.
    """

    context_window: int | None = None
    prices: ModelPrices | None = None
    rate_limit: Any = None

    @abstractmethod
    def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: SystemPrompt | None = None,
        *,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream the model's answer to ``messages`` as Converse events."""

    @abstractmethod
    def update_config(self, **model_config: Any) -> None:
        """Change configuration (model id, parameters) for later calls."""

    @abstractmethod
    def get_config(self) -> dict[str, Any]:
        """The current configuration."""

    @property
    def model_id(self) -> str:
        """The configured ``model_id`` (the class name when none is set)."""
        return str(self.get_config().get("model_id", type(self).__name__))


def system_prompt_text(system_prompt: SystemPrompt | None) -> str:
    """The text of a system prompt given as a string or as blocks (their texts, one per line; cache points dropped)."""
    if system_prompt is None or isinstance(system_prompt, str):
        return system_prompt or ""
    return "\n".join(block["text"] for block in system_prompt if "text" in block)


def estimate_tokens(messages: Messages, system_prompt: SystemPrompt | None = None,
                    tool_specs: list[ToolSpec] | None = None) -> int:
    """A documented, provider-independent estimate: one token per four characters of JSON.

    Used before a call (limits, proactive compression) when the provider has not reported usage yet.
    """
    import json

    size = len(system_prompt_text(system_prompt))
    for message in messages:
        for block in message["content"]:
            if "text" in block:
                size += len(block["text"])
            else:
                size += len(json.dumps(block, default=str))
    if tool_specs:
        size += len(json.dumps(tool_specs, default=str))
    return max(1, size // 4)
