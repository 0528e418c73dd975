"""The ``Model`` protocol: an LLM provider that streams Converse events.

Providers subclass :class:`Model`. ``stream()`` is an async generator of
Converse stream events (see :mod:`ray_harness.types.streaming`); the agent loop
assembles them into the assistant message, usage and latency. Providers must
keep no per-run state and create their HTTP clients lazily, so a model pickles
into a Ray actor without carrying a live connection.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from ray_harness.types.content import Messages, SystemPrompt
from ray_harness.types.streaming import StreamEvent
from ray_harness.types.tools import ToolChoice, ToolSpec

__all__ = ("DEFAULT_CONTEXT_WINDOW_LIMIT", "CacheConfig", "CacheToolsConfig", "Model", "ModelPrices", "estimate_tokens",
           "system_prompt_text", "warn_default_context_window")

T = TypeVar("T", bound=BaseModel)

# The window ``estimate_utilization`` and proactive compression assume for a model that has none set: Strands'
# default (its name too), so a switched program computes the same ratio and compresses at the same size.
DEFAULT_CONTEXT_WINDOW_LIMIT = 200_000


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


@dataclass(frozen=True)
class CacheConfig:
    """Prompt caching, as Strands' ``CacheConfig`` (``cache_config=`` of every provider).

    ``AnthropicModel`` and ``BedrockModel`` place cache points; ``OpenAIModel`` uses only ``cache_key`` (its
    ``prompt_cache_key``) and a ``ttl`` of ``"in_memory"`` or ``"24h"`` (its ``prompt_cache_retention``).

    Attributes:
        strategy: ``"auto"`` or ``"anthropic"`` (the same for ``AnthropicModel``).
        ttl: The cache points' duration (``"5m"``, ``"1h"``); unset, the API's default.
        system_prompt_ttl: Cache the system prompt (a cache point at its end, unless it carries one): ``True``
            with ``ttl``, a string for its own duration, ``False`` not at all.
        cache_key: OpenAI's prompt-cache routing key (``False``: none); Anthropic and Bedrock have no cache key, so
            they do not send it.
        tools_ttl: Cache the tool definitions (a cache point on the last tool): ``True`` with ``ttl``, a string
            for its own duration, ``False`` not at all; ``None`` leaves it to the model's ``cache_tools``.
    """

    strategy: Literal["auto", "anthropic"] = "auto"
    ttl: str | None = None
    system_prompt_ttl: bool | str = True
    cache_key: str | Literal[False] | None = None
    tools_ttl: bool | str | None = None


@dataclass(frozen=True)
class CacheToolsConfig:
    """A cache point for the tool definitions with its own duration (``cache_tools=CacheToolsConfig(ttl="1h")``)."""

    type: str = "default"
    ttl: str | None = None


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
        """Stream the model's answer to ``messages`` as Converse events.

        An agent also passes ``agent_metadata=`` (a ``ray_harness.agent.AgentMetadata``: its session id), as
        Strands' loop does, when this method takes that keyword or ``**kwargs``.
        """

    @abstractmethod
    def update_config(self, **model_config: Any) -> None:
        """Change configuration (model id, parameters) for later calls."""

    @abstractmethod
    def get_config(self) -> dict[str, Any]:
        """The current configuration."""

    def structured_output(
        self,
        output_model: type[T],
        prompt: Messages | str,
        system_prompt: SystemPrompt | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """One model call that must fill ``output_model`` (Strands' ``model.structured_output``).

        The call offers a tool named after ``output_model`` and forces it, as ``Agent(structured_output_model=)``
        does; an answer with the JSON object as text is accepted too. Honours the model's ``rate_limit``.

        Args:
            output_model: A pydantic model class.
            prompt: The messages (or one user prompt as a string).
            system_prompt: The system prompt, as a string or as system blocks.
            **kwargs: Passed on to ``stream()``.

        Yields:
            The stream's events (``model_event``, ``text_delta``, ... as ``Agent.stream_async`` yields them),
            then ``{"type": "stop", "stop": (stop_reason, message, usage, metrics)}``, and last
            ``{"type": "output", "output": <output_model instance>}``.

        Raises:
            StructuredOutputException: The model did not call the tool (nor answered with a JSON object), or what it
                gave does not validate (the message names each bad field).
            TypeError: ``output_model`` is not a pydantic model class.
        """
        from ray_harness.models._structured_output import structured_output

        return structured_output(self, output_model, prompt, system_prompt, kwargs)

    async def count_tokens(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: SystemPrompt | None = None,
        system_prompt_content: SystemPrompt | None = None,
    ) -> int:
        """The input tokens ``messages`` (with the tools and system prompt) will take, as Strands' ``count_tokens``.

        An estimate (:func:`estimate_tokens`) for deciding when to compress a context, not for billing.
        ``AnthropicModel`` and ``BedrockModel`` ask their provider's token-counting API instead when built with
        ``use_native_token_count=True`` (and fall back to the estimate when that call fails).

        Args:
            messages: The messages to count.
            tool_specs: The tool specs to count with them.
            system_prompt: The system prompt, as a string or as system blocks.
            system_prompt_content: The system prompt as blocks (Strands' name); given, it is counted instead of
                ``system_prompt``.
        """
        return estimate_tokens(messages, system_prompt_content or system_prompt, tool_specs)

    def estimate_utilization(self, input_tokens: int) -> float:
        """The share of the context window ``input_tokens`` take (above 1.0: they overflow it), as in Strands.

        A model without a context window set is taken to have 200,000 tokens, with a ``UserWarning`` saying so
        (Strands' default).

        Raises:
            TypeError: ``input_tokens`` is not an integer.
            ValueError: ``input_tokens`` is negative.
        """
        if isinstance(input_tokens, bool) or not isinstance(input_tokens, int):
            raise TypeError(f"input_tokens must be a number of tokens (an int), got {input_tokens!r}")
        if input_tokens < 0:
            raise ValueError(f"input_tokens must not be negative, got {input_tokens}")
        window = self.context_window_limit
        if not window:
            window = DEFAULT_CONTEXT_WINDOW_LIMIT
            warn_default_context_window(self, "the utilization estimate", stacklevel=2)
        return input_tokens / window

    @property
    def context_window_limit(self) -> int | None:
        """Strands' name for :attr:`context_window`; unset, the ``context_window_limit`` of ``get_config()``.

        The second is where a model written for Strands keeps its window.
        """
        if self.context_window is not None:
            return self.context_window
        try:
            limit = self.get_config().get("context_window_limit")
        except Exception:  # a custom model's get_config is not ours to fail an agent with
            return None
        return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None

    @property
    def stateful(self) -> bool:
        """Whether the provider keeps the conversation server-side (Strands' property): ``False`` for every model here.

        The agent sends its whole history on every call, so it is the one copy of the conversation.
        """
        return False

    @property
    def model_id(self) -> str:
        """The configured ``model_id`` (the class name when none is set)."""
        return str(self.get_config().get("model_id", type(self).__name__))


def warn_default_context_window(model: Any, purpose: str, stacklevel: int = 2) -> None:
    """The ``UserWarning`` that ``purpose`` assumes :data:`DEFAULT_CONTEXT_WINDOW_LIMIT` for ``model`` (as Strands')."""
    warnings.warn(f"context_window_limit is not set on {type(model).__name__}, so {purpose} assumes "
                  f"{DEFAULT_CONTEXT_WINDOW_LIMIT} tokens: set context_window_limit (or context_window) on the model",
                  UserWarning, stacklevel=stacklevel + 1)


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
