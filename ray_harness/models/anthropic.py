"""``AnthropicModel``: Claude through the official ``anthropic`` SDK (Messages API, streaming).

The client (``anthropic.AsyncAnthropic(**client_args)``) is built on the first
``stream()`` call, once per event loop, and is left out when the model is
pickled, so the model ships into a Ray actor as configuration. The API key
comes from ``client_args["api_key"]`` or the ``ANTHROPIC_API_KEY`` variable.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

from pydantic import Field, StrictBool, field_validator

from ray_harness.models._anthropic_cache import as_dict, cached_messages, cached_system, tools_cache_control
from ray_harness.models._anthropic_format import (
    AnthropicStreamState,
    format_messages,
    format_system,
    format_tool_choice,
    format_tools,
)
from ray_harness.models._anthropic_pause import MAX_CONTINUATIONS, RawContent
from ray_harness.models._clients import LoopClientCache
from ray_harness.models._config import ProviderConfig, split_params
from ray_harness.models._errors import is_overflow_message, retry_after_seconds
from ray_harness.models._provider import ConfiguredModel, context_window_of
from ray_harness.models._thinking_binding import anthropic_options_with_drop_block, is_thinking_binding_error
from ray_harness.models._tool_history import has_tool_blocks, tool_blocks_as_text
from ray_harness.models.base import CacheConfig, CacheToolsConfig, ModelPrices
from ray_harness.models.rate_limit import RateLimit, checked_rate_limit
from ray_harness.types.content import Messages, SystemPrompt
from ray_harness.types.exceptions import (
    ContextWindowOverflowException,
    ModelConfigurationError,
    ModelThrottledException,
)
from ray_harness.types.streaming import StreamEvent
from ray_harness.types.tools import ToolChoice, ToolSpec

__all__ = ("AnthropicModel",)

logger = logging.getLogger(__name__)

_AUTH_HELP = "set the ANTHROPIC_API_KEY environment variable or pass client_args={'api_key': ...}"
_THROTTLE_TYPES = {"rate_limit_error", "overloaded_error"}


class AnthropicConfig(ProviderConfig):
    max_tokens: int = Field(default=4096, ge=1)  # the API requires a positive cap; say so before the call
    cache_config: CacheConfig | None = None
    cache_tools: str | CacheToolsConfig | None = None
    anthropic_tools: list[dict[str, Any]] | None = None
    use_native_token_count: StrictBool = False

    @field_validator("cache_config", "cache_tools", mode="before")
    @classmethod
    def _check_instances(cls, value: Any) -> Any:
        return as_dict(value)  # an instance given as is would skip validation of its fields

    @field_validator("anthropic_tools")
    @classmethod
    def _server_tools_only(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if value and any("input_schema" in tool for tool in value):
            raise ValueError("anthropic_tools are Anthropic's server tools (web_search, code_execution, ...); "
                             "a function tool (with an input_schema) goes in the agent's tools=")
        return value


class AnthropicModel(ConfiguredModel):
    """Claude models on the Anthropic Messages API.

    Args:
        model_id: The model, e.g. ``"claude-sonnet-4-5"``.
        max_tokens: Output token cap for each call.
        params: Further request fields (``temperature``, ``thinking``, ``stop_sequences``, ``metadata``, ...), sent
            as given; ``extra_headers`` / ``extra_query`` / ``timeout`` are passed as SDK request options.
        client_args: Passed unchanged to ``anthropic.AsyncAnthropic(...)`` (``api_key``, ``base_url``,
            ``max_retries``, ``timeout``, ...).
        context_window: The model's context window in tokens, if you want proactive compression.
        context_window_limit: Strands' name for ``context_window`` (either works, also in ``update_config()``).
        prices: Optional price table for cost accounting.
        rate_limit: Optional ``RateLimit`` shared cluster-wide by every model with the same key.
        cache_config: Prompt caching, as Strands' setting (``CacheConfig(ttl="1h")``): a cache point at the end of
            the system prompt (unless ``system_prompt_ttl=False``) and one on the last user message (cache points
            in earlier messages are dropped); ``tools_ttl`` caches the tool definitions too.
        cache_tools: Cache the tool definitions (a cache point on the last tool): ``"default"`` or a
            ``CacheToolsConfig(ttl=...)``, as Strands' setting; ``cache_config.tools_ttl`` overrides it when set.
        anthropic_tools: Anthropic server tools (``{"type": "web_search_20250305", "name": "web_search"}``, ...)
            offered next to the agent's tools, as Strands' setting; left out of a call that forces a tool.
        use_native_token_count: ``count_tokens()`` asks Anthropic's token-counting endpoint
            (``messages.count_tokens``) instead of estimating, as Strands' setting; a failed count falls back to
            the estimate (and logs a warning).
    """

    config_type = AnthropicConfig
    provider = "Anthropic"
    config: AnthropicConfig

    def __init__(
        self,
        model_id: str,
        *,
        max_tokens: int = 4096,
        params: dict[str, Any] | None = None,
        client_args: dict[str, Any] | None = None,
        context_window: int | None = None,
        prices: ModelPrices | None = None,
        rate_limit: RateLimit | None = None,
        context_window_limit: int | None = None,
        cache_config: CacheConfig | None = None,
        cache_tools: str | CacheToolsConfig | None = None,
        anthropic_tools: list[dict[str, Any]] | None = None,
        use_native_token_count: bool = False,
    ) -> None:
        self._set_config({"model_id": model_id, "max_tokens": max_tokens, "params": params,
                          "cache_config": cache_config, "cache_tools": cache_tools, "anthropic_tools": anthropic_tools,
                          "use_native_token_count": use_native_token_count})
        self.client_args: dict[str, Any] = dict(client_args or {})
        self.context_window = context_window_of(context_window, context_window_limit)
        self.prices = prices
        self.rate_limit = checked_rate_limit(rate_limit)
        self._clients: LoopClientCache[Any] = LoopClientCache(self._new_client, _close_client)
        # Set once a request was refused for stale replayed thinking: later requests to it drop such blocks.
        self._stale_thinking_model_id: str | None = None

    def get_config(self) -> dict[str, Any]:
        """``model_id``, ``max_tokens``, and the ``params`` / caching / server-tool / token-count settings that are set."""
        config = super().get_config()
        if not config["use_native_token_count"]:
            del config["use_native_token_count"]
        for key in ("cache_config", "cache_tools"):
            value = getattr(self.config, key)
            if isinstance(value, CacheConfig | CacheToolsConfig):
                config[key] = value  # frozen: safe to hand out, and what was given
        return config

    # -- Model protocol ----------------------------------------------------------------------------------

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: SystemPrompt | None = None,
        *,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream the answer to ``messages`` from the Anthropic Messages API as Converse events."""
        options, _ = self.format_request(messages, tool_specs, system_prompt, tool_choice)
        started = time.perf_counter()
        state = AnthropicStreamState()
        try:
            client = await self._clients.get()
            for turn in range(MAX_CONTINUATIONS + 1):
                raw = RawContent()
                response, options = await self._create(client, options, first=turn == 0)
                async with response:
                    async for event in response:
                        raw.feed(event)
                        for converted in state.convert(event):
                            yield converted
                if not state.paused:
                    break
                # A paused server-tool turn goes on when its content is sent back, as Strands does.
                state.resume()
                options = {**options, "messages": [*options["messages"],
                                                   {"role": "assistant", "content": raw.blocks()}]}
            else:
                logger.warning("model_id=<%s> | a server-tool turn was still paused after %d continuations: it ends "
                               "with the answer so far", self.config.model_id, MAX_CONTINUATIONS)
        except Exception as error:
            raise _map_error(error) from error
        if not state.stopped:  # a stream cut short without message_stop still ends the message
            yield {"messageStop": {"stopReason": state.stop_reason}}
        yield {"metadata": {"usage": state.usage(),  # type: ignore[typeddict-item]
                            "metrics": {"latencyMs": int((time.perf_counter() - started) * 1000)}}}

    async def _create(self, client: Any, options: dict[str, Any], *, first: bool) -> tuple[Any, dict[str, Any]]:
        """Open the stream, retrying a turn's first request once when replayed thinking went stale (as Strands).

        Returns the response and the options it was opened with (continuations reuse them).
        """
        import anthropic

        if first and self.__dict__.get("_stale_thinking_model_id") == self.config.model_id:
            options = anthropic_options_with_drop_block(options, client.default_headers) or options
        try:
            return await client.messages.create(**options, stream=True), options
        except anthropic.BadRequestError as error:
            retry = anthropic_options_with_drop_block(options, client.default_headers) \
                if first and is_thinking_binding_error(error) else None
            if retry is None:
                raise
        logger.warning("model_id=<%s> | history edit invalidated replayed thinking blocks, retrying with drop_block",
                       self.config.model_id)
        self._stale_thinking_model_id = self.config.model_id  # the stale blocks stay in the history
        return await client.messages.create(**retry, stream=True), retry

    async def count_tokens(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: SystemPrompt | None = None,
        system_prompt_content: SystemPrompt | None = None,
    ) -> int:
        """The input tokens of a request, from Anthropic's ``messages.count_tokens`` with ``use_native_token_count``.

        Otherwise, or when that call fails, the estimate of :meth:`Model.count_tokens`.
        """
        if not self.config.use_native_token_count:
            return await super().count_tokens(messages, tool_specs, system_prompt, system_prompt_content)
        options, _ = self.format_request(messages, tool_specs, system_prompt_content or system_prompt, None)
        # The counting endpoint takes the prompt, not the inference settings (max_tokens, temperature, ...).
        request = {key: options[key] for key in ("model", "messages", "system", "tools", "tool_choice",
                                                 "extra_headers") if key in options}
        try:
            client = await self._clients.get()
            response = await client.messages.count_tokens(**request)
            return int(response.input_tokens)
        except Exception as error:
            logger.warning("model_id=<%s> | Anthropic token counting failed, using the estimate: %s",
                           self.config.model_id, _map_error(error))
        return await super().count_tokens(messages, tool_specs, system_prompt, system_prompt_content)

    # -- request -------------------------------------------------------------------------------------------

    def format_request(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None,
        system_prompt: SystemPrompt | None,
        tool_choice: ToolChoice | None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The keyword arguments for ``messages.create`` and the JSON body fields they produce."""
        options, extra = split_params(self.config.params)
        if not tool_specs and has_tool_blocks(messages):
            messages = tool_blocks_as_text(messages)
        cache = self.config.cache_config
        body: dict[str, Any] = {
            "model": self.config.model_id,
            "max_tokens": self.config.max_tokens,
            "messages": format_messages(cached_messages(messages, cache)),
        }
        if system_prompt:
            body["system"] = format_system(cached_system(system_prompt, cache))
        tools = format_tools(tool_specs)
        if self.config.anthropic_tools and (not tool_choice or "auto" in tool_choice):
            tools.extend(dict(tool) for tool in self.config.anthropic_tools)  # a forced call must use a function
        mark = tools_cache_control(cache, self.config.cache_tools)
        if tools and mark is not None:
            tools[-1] = {**tools[-1], "cache_control": mark}  # the last tool's mark caches every definition
        if tools:
            body["tools"] = tools
            thinking = (extra.get("thinking") or {}).get("type") in {"enabled", "adaptive"}
            choice = format_tool_choice(tool_choice, thinking=thinking)
            if choice is not None:
                body["tool_choice"] = choice
        typed: dict[str, Any] = {key: body[key] for key in ("model", "max_tokens", "messages", "system", "tools",
                                                             "tool_choice") if key in body}
        if extra:
            options["extra_body"] = extra
        return {**typed, **options}, {**body, **extra}

    # -- client --------------------------------------------------------------------------------------------

    def _new_client(self) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(**self.client_args)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_clients", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._refresh_config()
        self._clients = LoopClientCache(self._new_client, _close_client)

    def __repr__(self) -> str:
        return f"AnthropicModel(model_id={self.config.model_id!r})"


async def _close_client(client: Any) -> None:
    await client.close()


def _map_error(error: Exception) -> Exception:
    """The harness exception for an SDK error (or the error itself when nothing maps)."""
    import anthropic

    if isinstance(error, TypeError) and "authentication method" in str(error):
        return ModelConfigurationError(f"Anthropic API key is missing: {_AUTH_HELP}")
    if isinstance(error, anthropic.CredentialsError):  # no key, and no usable credentials profile either
        return ModelConfigurationError(f"Anthropic credentials are missing ({error}); {_AUTH_HELP}")
    if not isinstance(error, anthropic.APIStatusError):
        return error
    error_type = error.type or _body_error_type(error.body)
    message = error.api_message or error.message
    if error.status_code in (429, 529) or error_type in _THROTTLE_TYPES:
        return ModelThrottledException(f"Anthropic throttled the request: {message}",
                                       retry_after=retry_after_seconds(error.response.headers))
    if error.status_code in (401, 403) or error_type in {"authentication_error", "permission_error"}:
        return ModelConfigurationError(f"Anthropic rejected the credentials (HTTP {error.status_code}: {message}); "
                                       f"{_AUTH_HELP}")
    if error.status_code == 413 or is_overflow_message(str(message)):
        return ContextWindowOverflowException(f"Anthropic: {message}")
    return error


def _body_error_type(body: object) -> str | None:
    # An `event: error` in mid-stream arrives as an APIStatusError whose body is the whole SSE payload.
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and isinstance(inner.get("type"), str):
            return str(inner["type"])
    return None
