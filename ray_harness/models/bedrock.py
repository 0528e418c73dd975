"""``BedrockModel``: models on Amazon Bedrock through boto3's ``bedrock-runtime`` ``converse_stream``.

Our messages and stream events are Converse-shaped already, so they pass
through almost unchanged. boto3 blocks, so the call and the event-stream
iteration run in a worker thread that hands events to the event loop. The
boto3 client is built on first use and left out when the model is pickled;
credentials come from ``boto_session`` or the usual AWS chain
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, instance roles).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any, Literal

from pydantic import StrictBool, field_validator

from ray_harness.models._anthropic_cache import as_dict
from ray_harness.models._bedrock_cache import BedrockCache
from ray_harness.models._bedrock_format import converse_events, convert_event, format_messages, format_tool_config
from ray_harness.models._bedrock_guardrail import GuardrailRedactor
from ray_harness.models._bedrock_recovery import converse
from ray_harness.models._bedrock_settings import REQUEST_SETTINGS, with_settings
from ray_harness.models._config import ProviderConfig
from ray_harness.models._errors import is_overflow_message
from ray_harness.models._provider import ConfiguredModel, context_window_of
from ray_harness.models._thinking_binding import bedrock_fields_with_drop_block
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

__all__ = ("BedrockModel",)

logger = logging.getLogger(__name__)

DEFAULT_REGION = "us-west-2"
_AUTH_HELP = ("set AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) or pass "
              "boto_session=boto3.Session(...)")
_THROTTLE_CODES = {"throttlingexception", "servicequotaexceededexception", "serviceunavailableexception",
                   "toomanyrequestsexception"}
_AUTH_CODES = {"unrecognizedclientexception", "invalidsignatureexception", "expiredtokenexception",
               "accessdeniedexception", "incompletesignatureexception", "missingauthenticationtokenexception"}
_DONE = object()
# Model ids whose CountTokens call was refused for good (no permission, or the model cannot count): this process
# estimates for them instead of sending a request bound to fail before every model call.
_NO_NATIVE_COUNT: set[str] = set()


class BedrockConfig(ProviderConfig):
    """``get_config()`` of a ``BedrockModel``: besides ``model_id`` and ``params``, how requests are made."""

    streaming: bool = True
    cache_prompt: str | None = None
    cache_tools: str | CacheToolsConfig | None = None
    cache_config: CacheConfig | None = None
    strict_tools: StrictBool = False
    include_tool_result_status: Literal["auto"] | StrictBool = "auto"
    guardrail_redact_input: bool = True
    guardrail_redact_input_message: str = "[User input redacted.]"
    guardrail_redact_output: bool = False
    guardrail_redact_output_message: str = "[Assistant output redacted.]"
    guardrail_latest_message: bool = False
    use_native_token_count: StrictBool = False

    @field_validator("cache_config", "cache_tools", mode="before")
    @classmethod
    def _check_instances(cls, value: Any) -> Any:
        return as_dict(value)  # an instance given as is would skip validation of its fields

    @field_validator("include_tool_result_status", mode="before")
    @classmethod
    def _none_is_auto(cls, value: Any) -> Any:
        return "auto" if value is None else value  # Strands takes None for its default


class BedrockModel(ConfiguredModel):
    """Models on Amazon Bedrock (Converse API).

    Args:
        model_id: The model or inference profile, e.g. ``"us.anthropic.claude-sonnet-4-5-20250929-v1:0"``.
        region_name: AWS region; else the session's, else ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, else us-west-2.
            Not with ``boto_session`` (a ``ValueError``, as in Strands): the session's region is the one used.
        endpoint_url: A custom endpoint (VPC endpoint, a local test server).
        boto_session: A ``boto3.Session`` to take credentials and region from.
        api_key: An Amazon Bedrock API key, sent as a bearer token instead of signing requests with AWS
            credentials (as Strands' ``api_key=``).
        params: Further Converse request fields, sent as given: ``inferenceConfig`` (``maxTokens``,
            ``temperature``, ...), ``additionalModelRequestFields``, ``guardrailConfig``, ...
        max_tokens: Strands' ``BedrockModel`` setting, kept in ``params`` as ``inferenceConfig.maxTokens``
            (``update_config()`` takes it and the next four too).
        temperature: Strands' setting, kept as ``inferenceConfig.temperature``.
        top_p: Strands' setting, kept as ``inferenceConfig.topP``.
        stop_sequences: Strands' setting, kept as ``inferenceConfig.stopSequences``.
        additional_request_fields: Strands' setting, kept as ``additionalModelRequestFields``.
        additional_response_field_paths: Strands' setting, kept as ``additionalModelResponseFieldPaths``.
        additional_args: Strands' setting: further top-level request fields, kept in ``params`` as given.
        guardrail_id: Strands' setting, kept as ``guardrailConfig.guardrailIdentifier`` (with ``guardrail_version``,
            ``guardrail_trace`` — ``"enabled"`` unless given — and ``guardrail_stream_processing_mode``).
        guardrail_version: Strands' setting, kept as ``guardrailConfig.guardrailVersion``.
        guardrail_trace: Strands' setting, kept as ``guardrailConfig.trace``.
        guardrail_stream_processing_mode: Strands' setting, kept as ``guardrailConfig.streamProcessingMode``.
        guardrail_redact_input: When a guardrail blocked content, the prompt in the agent's history (and session)
            is replaced by ``guardrail_redact_input_message`` (default ``"[User input redacted.]"``); on by
            default, as in Strands. A tool-result turn keeps its results, their content replaced.
        guardrail_redact_input_message: The text that replaces a redacted prompt.
        guardrail_redact_output: When a guardrail blocked content, the assistant's answer is replaced by
            ``guardrail_redact_output_message`` (default ``"[Assistant output redacted.]"``); off by default.
        guardrail_redact_output_message: The text that replaces a redacted answer.
        guardrail_latest_message: Only the latest user message (its text and images) is given to the guardrail,
            wrapped in ``guardContent`` blocks, as Strands' setting.
        service_tier: Strands' setting, kept as ``serviceTier.type``.
        use_native_token_count: ``count_tokens()`` asks Bedrock's ``CountTokens`` API instead of estimating, as
            Strands' setting; a failed count falls back to the estimate (and logs a warning), and a model the
            credentials may not count for (``AccessDeniedException``) or that cannot count is not asked again.
        streaming: ``False`` calls ``converse`` (one response, then its events) instead of ``converse_stream``.
        cache_prompt: A cache point type (``"default"``) added after the system prompt, as Strands' setting.
        cache_tools: A cache point type (``"default"``) added after the tool specs, or a
            ``CacheToolsConfig(ttl=...)``, as Strands' setting; ``cache_config.tools_ttl`` overrides it when set.
        cache_config: Prompt caching for Claude models, as Strands' setting (``CacheConfig(ttl="1h")``): a cache
            point at the end of the system prompt (unless ``system_prompt_ttl=False``) and one on the last user
            message (cache points in earlier messages are dropped; one right after a non-PDF document moves ahead
            of it, as Bedrock refuses it there); ``tools_ttl`` caches the tool specs too. ``strategy="auto"`` acts
            only on a model id naming ``claude`` or ``anthropic`` (``"anthropic"`` on any model); otherwise no cache
            point is added, ``cache_tools`` included.
        strict_tools: Each tool spec is sent with ``"strict": true`` and ``"additionalProperties": false`` on every
            object of its schema, so Bedrock constrains tool inputs to the schemas, as Strands' setting (Bedrock
            refuses schemas using features strict mode lacks, e.g. ``oneOf``).
        include_tool_result_status: Whether tool results carry their ``status`` (``"success"`` / ``"error"``):
            ``True``, ``False``, or ``"auto"`` (the default, as in Strands): only for model ids containing
            ``anthropic.claude``, as other models may refuse the field.
        boto_client_config: A ``botocore.config.Config`` for the client (retries, timeouts, ...).
        context_window: The model's context window in tokens, if you want proactive compression.
        context_window_limit: Strands' name for ``context_window`` (either works, also in ``update_config()``).
        prices: Optional price table for cost accounting.
        rate_limit: Optional ``RateLimit`` shared cluster-wide by every model with the same key.
    """

    config_type = BedrockConfig
    provider = "Bedrock"
    config: BedrockConfig

    def __init__(
        self,
        model_id: str,
        *,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        boto_session: Any = None,
        params: dict[str, Any] | None = None,
        boto_client_config: Any = None,
        context_window: int | None = None,
        prices: ModelPrices | None = None,
        rate_limit: RateLimit | None = None,
        context_window_limit: int | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop_sequences: list[str] | None = None,
        additional_request_fields: dict[str, Any] | None = None,
        additional_response_field_paths: list[str] | None = None,
        additional_args: dict[str, Any] | None = None,
        guardrail_id: str | None = None,
        guardrail_version: str | None = None,
        guardrail_trace: str | None = None,
        guardrail_stream_processing_mode: str | None = None,
        service_tier: str | None = None,
        streaming: bool = True,
        cache_prompt: str | None = None,
        cache_tools: str | None = None,
        api_key: str | None = None,
        guardrail_redact_input: bool = True,
        guardrail_redact_input_message: str = "[User input redacted.]",
        guardrail_redact_output: bool = False,
        guardrail_redact_output_message: str = "[Assistant output redacted.]",
        guardrail_latest_message: bool = False,
        use_native_token_count: bool = False,
        cache_config: CacheConfig | None = None,
        strict_tools: bool = False,
        include_tool_result_status: Literal["auto"] | bool = "auto",
    ) -> None:
        if region_name and boto_session is not None:
            raise ValueError("BedrockModel takes region_name= or boto_session=, not both (as in Strands): the session "
                             "carries its region; build it with boto3.Session(region_name=...) instead")
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise ValueError("invalid Bedrock config: api_key must be a non-empty string")
        settings = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p,
                    "stop_sequences": stop_sequences, "additional_request_fields": additional_request_fields,
                    "additional_response_field_paths": additional_response_field_paths,
                    "additional_args": additional_args, "guardrail_id": guardrail_id,
                    "guardrail_version": guardrail_version, "guardrail_trace": guardrail_trace,
                    "guardrail_stream_processing_mode": guardrail_stream_processing_mode, "service_tier": service_tier}
        self._set_config({"model_id": model_id, "params": with_settings(params, settings), "streaming": streaming,
                          "cache_prompt": cache_prompt, "cache_tools": cache_tools,
                          "guardrail_redact_input": guardrail_redact_input,
                          "guardrail_redact_input_message": guardrail_redact_input_message,
                          "guardrail_redact_output": guardrail_redact_output,
                          "guardrail_redact_output_message": guardrail_redact_output_message,
                          "guardrail_latest_message": guardrail_latest_message,
                          "use_native_token_count": use_native_token_count, "cache_config": cache_config,
                          "strict_tools": strict_tools, "include_tool_result_status": include_tool_result_status})
        self.region_name = region_name
        self.endpoint_url = endpoint_url
        self.boto_session = boto_session
        self.boto_client_config = boto_client_config
        self.api_key = api_key
        self.context_window = context_window_of(context_window, context_window_limit)
        self.prices = prices
        self.rate_limit = checked_rate_limit(rate_limit)
        self._client: Any = None
        self._client_lock = threading.Lock()
        # The model ids a request was refused for and a retry fixed (see _bedrock_recovery): later requests to them
        # are built as the retry was.
        self._stale_thinking_model_id: str | None = None
        self._separate_turns_model_id: str | None = None

    def update_config(self, **model_config: Any) -> None:
        """Change ``model_id`` / ``params`` / ``streaming`` / ``cache_*``, or a Strands setting (``temperature=``, ...)."""
        settings = {key: model_config.pop(key) for key in list(model_config) if key in REQUEST_SETTINGS}
        if settings:
            model_config["params"] = with_settings(model_config.get("params", self.config.params), settings)
        super().update_config(**model_config)

    def get_config(self) -> dict[str, Any]:
        """The configuration: ``model_id``, ``params`` (the request fields) and every other setting that is set."""
        config = super().get_config()
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
        """Stream the answer to ``messages`` from Bedrock's ConverseStream API (or Converse: ``streaming=False``)."""
        request = self.format_request(messages, tool_specs, system_prompt, tool_choice)
        request_separated = functools.partial(self.format_request, messages, tool_specs, system_prompt, tool_choice,
                                              separate_tool_results=True)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()
        started = time.perf_counter()
        opened: list[Any] = []  # the worker puts the boto3 event stream here, so an early exit can close it
        worker = threading.Thread(target=self._pump, args=(request, request_separated, loop, queue, stop, opened),
                                  name="bedrock-converse-stream", daemon=True)
        worker.start()
        redactor = GuardrailRedactor(self.config)
        try:
            while True:
                item = await queue.get()
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    raise _map_error(item) from item
                event = convert_event(item, int((time.perf_counter() - started) * 1000))
                if event is not None:
                    for redaction in redactor.before(dict(event)):
                        yield redaction  # type: ignore[misc]
                    yield event
            for redaction in redactor.finish():
                yield redaction  # type: ignore[misc]
        finally:
            stop.set()
            if worker.is_alive() and opened:
                # The consumer stopped early: closing the HTTP stream unblocks the worker's read.
                with contextlib.suppress(Exception):
                    opened[0].close()

    async def count_tokens(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: SystemPrompt | None = None,
        system_prompt_content: SystemPrompt | None = None,
    ) -> int:
        """The input tokens of a request, from Bedrock's ``CountTokens`` with ``use_native_token_count``.

        Otherwise, or when that call fails, the estimate of :meth:`Model.count_tokens`.
        """
        model_id = self.config.model_id
        if not self.config.use_native_token_count or model_id in _NO_NATIVE_COUNT:
            return await super().count_tokens(messages, tool_specs, system_prompt, system_prompt_content)
        request = self.format_request(messages, tool_specs, system_prompt_content or system_prompt, None)
        converse: dict[str, Any] = {key: request[key] for key in ("messages", "system", "toolConfig") if key in request}
        try:
            response = await asyncio.to_thread(self._count, model_id, converse)
            return int(response["inputTokens"])
        except Exception as error:
            details = (getattr(error, "response", None) or {}).get("Error", {})
            if details.get("Code") == "AccessDeniedException" or "support counting tokens" in str(error):
                _NO_NATIVE_COUNT.add(model_id)
            logger.warning("model_id=<%s> | Bedrock CountTokens failed, using the estimate: %s", model_id, error)
        return await super().count_tokens(messages, tool_specs, system_prompt, system_prompt_content)

    def _count(self, model_id: str, converse: dict[str, Any]) -> Any:
        return self.client.count_tokens(modelId=model_id, input={"converse": converse})

    def format_request(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None,
        system_prompt: SystemPrompt | None,
        tool_choice: ToolChoice | None,
        *,
        separate_tool_results: bool | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments for ``converse_stream``.

        ``separate_tool_results``: a user message of tool results only and the user message after it go as two
        turns (see :mod:`ray_harness.models._bedrock_recovery`); unset, as this model was found to need.
        """
        model_id = self.config.model_id
        if separate_tool_results is None:
            separate_tool_results = self.__dict__.get("_separate_turns_model_id") == model_id
        if not tool_specs and has_tool_blocks(messages):
            messages = tool_blocks_as_text(messages)
        cache = BedrockCache(self.config.model_id, self.config.cache_config, self.config.cache_tools)
        request: dict[str, Any] = {"modelId": self.config.model_id,
                                   "messages": format_messages(cache.messages(messages),
                                                               guard_latest=self.config.guardrail_latest_message,
                                                               include_status=self._includes_status(),
                                                               model_id=model_id,
                                                               separate_tool_results=separate_tool_results)}
        system: list[Any] = [] if not system_prompt else [{"text": system_prompt}] if isinstance(system_prompt, str) \
            else list(system_prompt)  # Converse takes the blocks as they are (cache points included)
        if self.config.cache_prompt:
            system.append({"cachePoint": {"type": self.config.cache_prompt}})
        if system:
            request["system"] = cache.system(system)
        tool_config = format_tool_config(tool_specs, tool_choice, strict=self.config.strict_tools)
        if tool_config is not None:
            point = cache.tools_point()
            if point is not None:
                tool_config["tools"].append(point)
            request["toolConfig"] = tool_config
        request.update(self.config.params or {})
        if self.__dict__.get("_stale_thinking_model_id") == model_id:
            fields = bedrock_fields_with_drop_block(request.get("additionalModelRequestFields"))
            if fields is not None:
                request["additionalModelRequestFields"] = fields
        _relax_forced_choice_when_thinking(request)
        return request

    def _includes_status(self) -> bool:
        setting = self.config.include_tool_result_status
        return "anthropic.claude" in self.config.model_id if setting == "auto" else setting

    # -- the blocking side ---------------------------------------------------------------------------------

    def _pump(self, request: dict[str, Any], request_separated: Callable[[], dict[str, Any]],
              loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any], stop: threading.Event,
              opened: list[Any]) -> None:
        def put(item: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed under us: nobody is listening any more
                loop.call_soon_threadsafe(queue.put_nowait, item)

        stream = None
        try:
            call = self.client.converse_stream if self.config.streaming else self.client.converse
            response = converse(self, call, request, request_separated)
            if self.config.streaming:
                stream = response["stream"]
                opened.append(stream)
            events = stream if stream is not None else converse_events(response)
            for event in events:
                if stop.is_set():
                    break
                put(event)
        except Exception as error:
            if not stop.is_set():
                put(error)
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()
            put(_DONE)

    @property
    def client(self) -> Any:
        """The boto3 ``bedrock-runtime`` client (thread-safe; built on first use)."""
        with self._client_lock:
            if self._client is None:
                self._client = self._new_client()
            return self._client

    def _new_client(self) -> Any:
        import boto3

        session = self.boto_session or boto3.Session()
        region = (self.region_name or session.region_name or os.environ.get("AWS_REGION")
                  or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION)
        config = self.boto_client_config
        if self.api_key:
            from botocore import UNSIGNED
            from botocore.config import Config

            # An API key replaces SigV4: the request goes unsigned and carries the key as its bearer token.
            unsigned = Config(signature_version=UNSIGNED)
            config = config.merge(unsigned) if config is not None else unsigned
        client = session.client("bedrock-runtime", region_name=region, endpoint_url=self.endpoint_url, config=config)
        if self.api_key:
            api_key = self.api_key

            def bearer(request: Any, **_: Any) -> None:
                request.headers["Authorization"] = f"Bearer {api_key}"

            client.meta.events.register("before-send.bedrock-runtime.*", bearer)
        return client

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_client", None)
        state.pop("_client_lock", None)
        state["boto_session"] = _session_spec(self.boto_session)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        spec = state.pop("boto_session", None)
        state.setdefault("api_key", None)  # pickled before api_key= existed
        self.__dict__.update(state)
        self._refresh_config()
        self.boto_session = _session_from_spec(spec)
        self._client = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"BedrockModel(model_id={self.config.model_id!r})"


def _relax_forced_choice_when_thinking(request: dict[str, Any]) -> None:
    """With extended thinking on (Claude on Bedrock), a forced tool choice is an API error; ``auto`` is sent instead.

    As in ``AnthropicModel``: the structured-output tool is still offered and the prompt asks for it.
    """
    fields = request.get("additionalModelRequestFields") or {}
    thinking = fields.get("thinking") if isinstance(fields, dict) else None
    if not isinstance(thinking, dict) or thinking.get("type") not in {"enabled", "adaptive"}:
        return
    tool_config = request.get("toolConfig")
    if tool_config and set(tool_config.get("toolChoice") or {}) & {"any", "tool"}:
        request["toolConfig"] = {**tool_config, "toolChoice": {"auto": {}}}


def _session_spec(session: Any) -> dict[str, Any] | None:
    """What rebuilds ``session`` elsewhere: profile and region, plus keys only when they were given explicitly.

    A boto3 session does not pickle; refreshable credentials (roles, SSO) are re-resolved in the new process rather
    than frozen into the pickle, where they would expire.
    """
    if session is None:
        return None
    spec: dict[str, Any] = {"region_name": session.region_name}
    if session.profile_name and session.profile_name != "default":
        spec["profile_name"] = session.profile_name
    credentials = session.get_credentials()
    if credentials is not None and getattr(credentials, "method", None) == "explicit":
        frozen = credentials.get_frozen_credentials()
        spec.update(aws_access_key_id=frozen.access_key, aws_secret_access_key=frozen.secret_key,
                    aws_session_token=frozen.token)
    return spec


def _session_from_spec(spec: dict[str, Any] | None) -> Any:
    if spec is None:
        return None
    import boto3

    return boto3.Session(**spec)


def _map_error(error: BaseException) -> BaseException:
    """The harness exception for a botocore error (or the error itself when nothing maps)."""
    import botocore.exceptions as boto_errors

    if isinstance(error, boto_errors.NoCredentialsError | boto_errors.PartialCredentialsError):
        return ModelConfigurationError(f"AWS credentials for Bedrock not found: {_AUTH_HELP}")
    if isinstance(error, boto_errors.NoRegionError):
        return ModelConfigurationError("no AWS region for Bedrock: pass region_name= or set AWS_REGION")
    if not isinstance(error, boto_errors.ClientError):
        return error
    return _map_client_error(error)


def _map_client_error(error: Exception) -> BaseException:
    response: dict[str, Any] = getattr(error, "response", None) or {}
    details = response.get("Error", {})
    code = str(details.get("Code", "")).lower()
    message = str(details.get("Message", "") or error)
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in _THROTTLE_CODES or status == 429:
        return ModelThrottledException(f"Bedrock throttled the request: {message}")
    if code in _AUTH_CODES or status in (401, 403):
        return ModelConfigurationError(f"Bedrock rejected the AWS credentials ({details.get('Code')}: {message}); "
                                       f"{_AUTH_HELP}")
    if is_overflow_message(message):
        return ContextWindowOverflowException(f"Bedrock: {message}")
    return error
