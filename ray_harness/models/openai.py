"""``OpenAIModel``: OpenAI Chat Completions (streamed, or not: ``stream=False``) through the official ``openai`` SDK.

Any OpenAI-compatible server works too (vLLM, llama.cpp server, Ollama, ...):
pass ``client_args={"base_url": "http://host:port/v1", "api_key": ...}``. The
client (``openai.AsyncOpenAI(**client_args)``) is built on the first
``stream()`` call, once per event loop, and is left out when the model is
pickled. The API key comes from ``client_args["api_key"]`` or ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncGenerator
from typing import Any

from pydantic import StrictBool, field_validator

from ray_harness.models._anthropic_cache import as_dict
from ray_harness.models._clients import LoopClientCache
from ray_harness.models._config import ProviderConfig, split_params
from ray_harness.models._errors import is_overflow_message, retry_after_seconds
from ray_harness.models._openai_bedrock import BedrockMantle
from ray_harness.models._openai_cache import apply_cache_config, warn_unused_fields
from ray_harness.models._openai_format import (
    OpenAIStreamState,
    completion_as_chunk,
    format_messages,
    format_tool_choice,
    format_tools,
)
from ray_harness.models._provider import ConfiguredModel, context_window_of
from ray_harness.models.base import CacheConfig, ModelPrices, estimate_tokens
from ray_harness.models.rate_limit import RateLimit, checked_rate_limit
from ray_harness.types.content import Messages, SystemPrompt
from ray_harness.types.exceptions import (
    ContextWindowOverflowException,
    ModelConfigurationError,
    ModelThrottledException,
)
from ray_harness.types.streaming import StreamEvent
from ray_harness.types.tools import ToolChoice, ToolSpec

__all__ = ("OpenAIModel",)

_AUTH_HELP = "set the OPENAI_API_KEY environment variable or pass client_args={'api_key': ...}"
# How servers word throttling in an error without a 429 status or code: one sent mid-stream, or a 503.
_THROTTLE_PHRASES = ("rate limit", "too many requests", "server busy", "currently overloaded")
# Keys of ``params`` that say how to call rather than what to send: ``format_request`` decides them.
_STREAM_KEYS = ("stream", "stream_options")


class OpenAIConfig(ProviderConfig):
    stream: StrictBool | None = None  # None: as params["stream"] says, else streamed
    cache_config: CacheConfig | None = None

    @field_validator("cache_config", mode="before")
    @classmethod
    def _check_instance(cls, value: Any) -> Any:
        return as_dict(value)  # an instance given as is would skip validation of its fields

    @field_validator("params")
    @classmethod
    def _stream_param_is_a_bool(cls, params: dict[str, Any] | None) -> dict[str, Any] | None:
        if params and "stream" in params and not isinstance(params["stream"], bool):
            raise ValueError(f"params.stream must be true or false, got {params['stream']!r}")
        return params


class OpenAIModel(ConfiguredModel):
    """Chat models on the OpenAI Chat Completions API or an OpenAI-compatible server.

    Args:
        model_id: The model, e.g. ``"gpt-4o"`` (or whatever name the compatible server serves).
        params: Further request fields (``temperature``, ``max_completion_tokens``, ``seed``, ...), sent as given;
            ``extra_headers`` / ``extra_query`` / ``timeout`` are passed as SDK request options.
        client_args: Passed unchanged to ``openai.AsyncOpenAI(...)`` (``api_key``, ``base_url``, ``max_retries``, ...).
        client: A client you built (an ``openai.AsyncOpenAI`` or a compatible wrapper), used for every request
            instead of one built from ``client_args`` and never closed by the model, as Strands' ``client=``. It
            belongs to one process and one event loop: such a model cannot be pickled (into a Ray actor), and
            it suits ``await agent.invoke_async(...)`` / ``stream_async`` on your loop rather than ``agent(...)``,
            which runs each call on a fresh loop.
        context_window: The model's context window in tokens, if you want proactive compression.
        context_window_limit: Strands' name for ``context_window`` (either works, also in ``update_config()``).
        prices: Optional price table for cost accounting.
        rate_limit: Optional ``RateLimit`` shared cluster-wide by every model with the same key.
        stream: ``False`` asks for one ``chat.completion`` per call (for a server that does not stream) and turns it
            into the same events a streamed answer gives; as in Strands, ``params={"stream": False}`` works too,
            and ``stream=`` wins when both are given. A key of ``get_config()`` / ``update_config()`` (left out of
            ``get_config()`` until set).
        cache_config: Prompt caching, as Strands' setting: ``CacheConfig(cache_key="...")`` is sent as
            ``prompt_cache_key`` and ``ttl="in_memory"`` / ``"24h"`` as ``prompt_cache_retention`` (a
            ``prompt_cache_key`` / ``prompt_cache_retention`` in ``params`` wins). Left unset, the key is
            ``strands-<session id>`` when ``stream()`` is given ``agent_metadata=`` with a ``session_id`` (an agent
            with a session manager gives it), as in Strands; ``cache_key=False`` sends none. The other fields, and
            another ``ttl``, have no effect on OpenAI: a ``UserWarning`` says so when the model is configured.
        bedrock_mantle_config: Send requests to Amazon Bedrock's OpenAI-compatible endpoints, as Strands' setting:
            ``{"endpoint": "bedrock-mantle" | "bedrock-runtime", "region": ..., "boto_session": ...,
            "credentials_provider": ..., "expiry": timedelta(...)}`` (every key optional). Each request carries a
            fresh Bedrock API key minted from AWS credentials (needs ``aws-bedrock-token-generator``); not with
            ``client=``, nor with ``base_url`` / ``api_key`` in ``client_args``.
    """

    config_type = OpenAIConfig
    provider = "OpenAI"
    config: OpenAIConfig

    def __init__(
        self,
        model_id: str,
        *,
        params: dict[str, Any] | None = None,
        client_args: dict[str, Any] | None = None,
        context_window: int | None = None,
        prices: ModelPrices | None = None,
        rate_limit: RateLimit | None = None,
        context_window_limit: int | None = None,
        client: Any = None,
        stream: bool | None = None,
        cache_config: CacheConfig | None = None,
        bedrock_mantle_config: dict[str, Any] | None = None,
    ) -> None:
        if client is not None and client_args:
            raise ValueError("OpenAIModel takes client= or client_args=, not both: client_args configure the client "
                             "the model builds, and client= is one already built")
        if bedrock_mantle_config is not None:
            clashing = sorted({"base_url", "api_key"} & set(client_args or {}))
            if client is not None or clashing:
                raise ValueError(f"bedrock_mantle_config sets the endpoint and the key itself: drop "
                                 f"{'client=' if client is not None else ', '.join(clashing) + ' from client_args'}")
        self.bedrock_mantle = BedrockMantle(bedrock_mantle_config) if bedrock_mantle_config is not None else None
        self._set_config({"model_id": model_id, "params": params, "stream": stream, "cache_config": cache_config})
        warn_unused_fields(self.config.cache_config)
        self.client_args: dict[str, Any] = dict(client_args or {})
        self.client = client
        self._client_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self.context_window = context_window_of(context_window, context_window_limit)
        self.prices = prices
        self.rate_limit = checked_rate_limit(rate_limit)
        self._clients: LoopClientCache[Any] = LoopClientCache(self._new_client, _close_client)

    def update_config(self, **model_config: Any) -> None:
        """Change configuration keys for later calls (see :meth:`ConfiguredModel.update_config`)."""
        super().update_config(**model_config)
        if "cache_config" in model_config:
            warn_unused_fields(self.config.cache_config)

    def get_config(self) -> dict[str, Any]:
        """``model_id``, and ``params`` / ``stream`` / ``cache_config`` once set."""
        config = super().get_config()
        if self.config.cache_config is not None:
            config["cache_config"] = self.config.cache_config  # frozen: safe to hand out, and what was given
        return config

    # -- Model protocol ----------------------------------------------------------------------------------

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: SystemPrompt | None = None,
        *,
        tool_choice: ToolChoice | None = None,
        agent_metadata: Any = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream the answer to ``messages`` from an OpenAI-compatible chat completions API as Converse events.

        With ``stream=False`` the one ``chat.completion`` is converted as a single chunk holding the whole message.
        ``agent_metadata`` (Strands' keyword: an object with a ``session_id``) names the session whose prompt-cache
        key ``cache_config`` derives when it sets none.
        """
        request = self.format_request(messages, tool_specs, system_prompt, tool_choice, agent_metadata=agent_metadata)
        started = time.perf_counter()
        state = OpenAIStreamState()
        output_chars = 0
        try:
            client = self._given_client() if self.client is not None else await self._clients.get()
            if self.bedrock_mantle is not None:  # a fresh token per request, as in Strands: agents outlive tokens
                client = client.with_options(**await asyncio.to_thread(self.bedrock_mantle.options,
                                                                        self.config.model_id))
            response = await client.chat.completions.create(**request)
            async with contextlib.aclosing(_chunks(response, request["stream"])) as chunks:
                yield {"messageStart": {"role": "assistant"}}
                async for chunk in chunks:
                    for event in state.convert(chunk):
                        output_chars += _delta_size(event)
                        yield event
        except Exception as error:
            raise _map_error(error) from error
        for event in state.finish():
            yield event
        usage = state.usage
        if usage is None:
            # A compatible server that ignores stream_options.include_usage: estimate, so token limits still bind.
            input_tokens = estimate_tokens(messages, system_prompt, tool_specs)
            output_tokens = max(1, output_chars // 4)
            usage = {"inputTokens": input_tokens, "outputTokens": output_tokens,
                     "totalTokens": input_tokens + output_tokens, "estimatedTokens": input_tokens + output_tokens}
        yield {"metadata": {"usage": usage,  # type: ignore[typeddict-item]
                            "metrics": {"latencyMs": int((time.perf_counter() - started) * 1000)}}}

    def format_request(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None,
        system_prompt: SystemPrompt | None,
        tool_choice: ToolChoice | None,
        *,
        agent_metadata: Any = None,
    ) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create``."""
        options, extra = split_params(self.config.params)
        apply_cache_config(extra, self.config.cache_config, getattr(agent_metadata, "session_id", None))
        given = {key: extra.pop(key) for key in _STREAM_KEYS if key in extra}
        streamed = self.config.stream if self.config.stream is not None else given.get("stream", True)
        request: dict[str, Any] = {
            "model": self.config.model_id,
            "messages": format_messages(messages, system_prompt),
            "stream": streamed,
        }
        if streamed:  # a server refuses stream_options on a non-streamed request
            request["stream_options"] = given.get("stream_options", {"include_usage": True})
        tools = format_tools(tool_specs)
        if tools:  # tool_choice without tools is an API error
            request["tools"] = tools
            choice = format_tool_choice(tool_choice)
            if choice is not None:
                request["tool_choice"] = choice
        if extra:
            options["extra_body"] = extra
        return {**request, **options}

    # -- client --------------------------------------------------------------------------------------------

    def _given_client(self) -> Any:
        """``client=``, checked to run on the event loop it was first used on.

        Its pooled connections belong to that loop; on another they fail with a bare "Event loop is closed".
        """
        loop = asyncio.get_running_loop()
        first = self._client_loop() if self._client_loop is not None else None
        if first is None:
            self._client_loop = weakref.ref(loop)
        elif first is not loop:
            raise ModelConfigurationError(
                "the client given to OpenAIModel(client=...) was first used on another event loop, which owns its "
                "connections: call the agent with `await agent.invoke_async(...)` / `stream_async` on one loop "
                "(`agent(...)` runs each call on a fresh loop), or pass client_args= so the model builds a client "
                "per loop")
        return self.client

    def _new_client(self) -> Any:
        import openai

        # With bedrock_mantle_config each request sets its endpoint and token (with_options): none are needed here.
        mantle: dict[str, Any] = {"api_key": "minted-per-request"} if self.bedrock_mantle is not None else {}
        try:
            return openai.AsyncOpenAI(**mantle, **self.client_args)
        except openai.OpenAIError as error:
            if "api_key" in str(error) or "credentials" in str(error).lower():
                raise ModelConfigurationError(f"OpenAI API key is missing: {_AUTH_HELP}") from error
            raise

    def __getstate__(self) -> dict[str, Any]:
        if self.client is not None:
            # A live client (connection pool, locks) does not cross processes; dropping it would send requests
            # elsewhere without a word.
            raise TypeError("an OpenAIModel given client= cannot be pickled (e.g. sent to a Ray actor): pass "
                            "client_args= so each process builds its own client, or run it in-process "
                            "(runtime=\"local\")")
        state = self.__dict__.copy()
        state.pop("_clients", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("client", None)  # pickled before client= existed
        state.setdefault("bedrock_mantle", None)
        state["_client_loop"] = None
        self.__dict__.update(state)
        self._refresh_config()
        self._clients = LoopClientCache(self._new_client, _close_client)

    def __repr__(self) -> str:
        base_url = self.client_args.get("base_url") or getattr(self.client, "base_url", None)
        where = f", base_url={str(base_url)!r}" if base_url else ""
        return f"OpenAIModel(model_id={self.config.model_id!r}{where})"


async def _chunks(response: Any, streamed: bool) -> AsyncGenerator[Any, None]:
    """The chunks of a streamed response (closed when done), or a whole completion as one chunk."""
    if not streamed:
        yield completion_as_chunk(response)
        return
    async with response:
        async for chunk in response:
            yield chunk


def _delta_size(event: StreamEvent) -> int:
    delta = event.get("contentBlockDelta", {}).get("delta", {})
    return len(delta.get("text", "")) + len(delta.get("toolUse", {}).get("input", ""))


async def _close_client(client: Any) -> None:
    await client.close()


def _says_throttled(message: str) -> bool:
    lowered = message.lower()
    return any(phrase in lowered for phrase in _THROTTLE_PHRASES)


def _map_error(error: Exception) -> Exception:
    """The harness exception for an SDK error (or the error itself when nothing maps)."""
    import openai

    if isinstance(error, ModelConfigurationError) or not isinstance(error, openai.APIError):
        return error
    message = str(getattr(error, "message", "") or error)
    code = str(getattr(error, "code", "") or "")
    status = error.status_code if isinstance(error, openai.APIStatusError) else None
    if code == "insufficient_quota":
        return ModelConfigurationError(f"OpenAI account is out of quota (not retried): {message}")
    worded = (status is None or status >= 500) and _says_throttled(message)  # a 4xx naming rate limits is no throttle
    if status == 429 or code == "rate_limit_exceeded" or worded:
        headers = error.response.headers if isinstance(error, openai.APIStatusError) else None
        return ModelThrottledException(f"OpenAI throttled the request: {message}",
                                       retry_after=retry_after_seconds(headers))
    if status in (401, 403) or code == "invalid_api_key":
        return ModelConfigurationError(f"OpenAI rejected the credentials (HTTP {status}: {message}); {_AUTH_HELP}")
    if code == "context_length_exceeded" or status == 413 or is_overflow_message(message):
        return ContextWindowOverflowException(f"OpenAI: {message}")
    return error
