"""GenAI-convention spans for the agent loop.

``invoke_agent <name>`` (one per invocation, child of whatever span is current — a driver span, or
the context propagated into an actor) → ``execute_event_loop_cycle`` → ``chat`` (model call) and
``execute_tool <name>``. ``trace_attributes`` of the agent go on every span. When no SDK tracer
provider is installed, :func:`get_tracer` returns a no-op whose methods cost a call each.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from ray_harness.telemetry.config import capture_content_enabled, ensure_configured_from_env, sdk_provider
from ray_harness.telemetry.runs import outcome_status

__all__ = ("NOOP", "Tracer", "get_tracer", "span_scope")


class Tracer:
    """No-op base; :class:`_OtelTracer` records real spans."""

    enabled = False
    capture_content = False

    def start_span(self, name: str, parent: Any = None, attributes: dict[str, Any] | None = None) -> Any:
        """Start span ``name`` under ``parent`` (None: the current span); the no-op returns None."""
        return None

    def end_span(self, span: Any, attributes: dict[str, Any] | None = None, error: BaseException | None = None,
                 failed: str | None = None) -> None:
        """End ``span``, adding ``attributes``; ``error`` or ``failed`` (a description) mark it failed."""
        return None

    def invocation_attributes(self, agent: Any, messages: list[Any]) -> dict[str, Any]:
        """The attributes of an invocation span for ``agent`` and its input ``messages``."""
        return {}

    def attach(self, span: Any) -> Any:
        """Make ``span`` the current span; returns a token for :meth:`detach`."""
        return None

    def detach(self, token: Any) -> None:
        """Restore the current span that was current before :meth:`attach` returned ``token``."""
        return None


NOOP = Tracer()


class _OtelTracer(Tracer):
    enabled = True

    def __init__(self, provider: Any, capture_content: bool) -> None:
        from opentelemetry import context, trace

        self._trace = trace
        self._context = context
        self.provider = provider
        self._tracer = provider.get_tracer("ray_harness")
        self.capture_content = capture_content

    def start_span(self, name: str, parent: Any = None, attributes: dict[str, Any] | None = None) -> Any:
        ctx = self._trace.set_span_in_context(parent) if parent is not None else None
        clean = {k: v for k, v in (attributes or {}).items() if _is_attribute_value(v)}
        return self._tracer.start_span(name, context=ctx, attributes=clean)

    def end_span(self, span: Any, attributes: dict[str, Any] | None = None, error: BaseException | None = None,
                 failed: str | None = None) -> None:
        """End ``span`` with ``attributes``.

        ``error`` (recorded on the span) or ``failed`` (a description: an error result, no exception) set its
        status to ERROR, as the GenAI conventions ask of a failed operation. A cancellation (``error`` that is no
        ``Exception``: ``CancelledError``, ``GeneratorExit`` of a closed stream, ``KeyboardInterrupt``) is no
        failure: the status stays UNSET and ``ray_harness.cancellation.type`` names it, as Strands does.
        """
        if span is None:
            return
        for key, value in (attributes or {}).items():
            if _is_attribute_value(value):
                span.set_attribute(key, value)
        if error is not None and not isinstance(error, Exception):
            span.set_attribute("ray_harness.cancellation.type", type(error).__name__)
        elif error is not None or failed is not None:
            from opentelemetry.trace import Status, StatusCode

            if error is not None:
                span.record_exception(error)
            description = f"{type(error).__name__}: {error}" if error is not None else failed
            span.set_status(Status(StatusCode.ERROR, description))
        span.end()

    def attach(self, span: Any) -> Any:
        if span is None:
            return None
        return self._context.attach(self._trace.set_span_in_context(span))

    def detach(self, token: Any) -> None:
        if token is not None:
            try:
                self._context.detach(token)
            except ValueError:  # detached from another context (a generator finished elsewhere)
                pass


_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()
"""What :func:`span_scope` returns with tracing off (stateless, so one instance serves every block)."""


def span_scope(name: str, attributes: dict[str, Any] | None = None, *,
               outcome: Callable[[], object] | None = None) -> contextlib.AbstractContextManager[Any]:
    """A span that is current for the block (children created inside nest under it); no-op when off.

    With ``outcome`` (as for :func:`ray_harness.telemetry.runs.run_scope`: a graph, swarm or node result's status,
    asked when the block ends without an exception) the span gets ``ray_harness.status`` (``completed``,
    ``failed``, ``cancelled``, ``interrupted``), and status ERROR when that is ``failed``: a graph that ended
    FAILED under the "continue" policy raised nothing.
    With tracing off no generator-based context manager is created: graphs open one per node and per invocation.
    """
    tracer = get_tracer()
    if not tracer.enabled:
        return _NO_SPAN
    return _span_scope(tracer, name, attributes, outcome)


@contextlib.contextmanager
def _span_scope(tracer: Tracer, name: str, attributes: dict[str, Any] | None,
                outcome: Callable[[], object] | None) -> Iterator[Any]:
    span = tracer.start_span(name, None, attributes)
    token = tracer.attach(span)
    error: BaseException | None = None
    try:
        yield span
    except BaseException as caught:
        error = caught
        raise
    finally:
        tracer.detach(token)
        if error is None and outcome is not None:
            status = outcome_status(outcome)
            tracer.end_span(span, {"ray_harness.status": status}, failed=f"{name}: {status}"
                            if status == "failed" else None)
        else:
            tracer.end_span(span, error=error)  # a cancellation is told apart there


def get_tracer() -> Tracer:
    """The tracer for this process: recording spans when tracing is enabled, else the no-op ``NOOP``.

    One recording tracer serves every call while the provider and the content-capture setting stay the same:
    making one (the provider's ``get_tracer``) costs as much as a span, and an invocation asks two or three times.
    """
    ensure_configured_from_env()
    provider = sdk_provider()
    if provider is None:
        return NOOP
    capture = capture_content_enabled()
    cached = _recording
    if cached is not None and cached.provider is provider and cached.capture_content == capture:
        return cached
    return _recording_tracer(provider, capture)


_recording: _OtelTracer | None = None
"""The last tracer :func:`get_tracer` made, for its provider and content-capture setting."""


def _recording_tracer(provider: Any, capture: bool) -> _OtelTracer:
    global _recording
    tracer = _OtelTracer(provider, capture)
    _recording = tracer
    return tracer


def agent_attributes(agent: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent.name,
        "gen_ai.agent.id": agent.agent_id,
        "gen_ai.request.model": _model_id(agent),
        "gen_ai.provider.name": type(agent.model).__name__,
        "gen_ai.agent.tools": json.dumps(agent.tool_names),  # Strands' attribute: the tool names, as a JSON list
    }
    attributes.update(_custom(agent))
    return attributes


def chat_attributes(agent: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": _model_id(agent)}
    attributes.update(_custom(agent))
    chain = getattr(getattr(agent, "_invocation", None), "extensions", None)
    if chain is not None and chain.model_names:
        attributes["ray_harness.extensions"] = list(chain.model_names)  # the wrappers that observe this call
    return attributes


def chat_result_attributes(stop: Any, capture_content: bool) -> dict[str, Any]:
    usage = stop.usage or {}
    metrics = stop.metrics or {}
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.get("inputTokens", 0),
        "gen_ai.usage.output_tokens": usage.get("outputTokens", 0),
        "gen_ai.usage.total_tokens": usage.get("totalTokens"),
        # The GenAI conventions' cache counters (Strands sets them too), only when the provider reports them.
        "gen_ai.usage.cache_read.input_tokens": usage.get("cacheReadInputTokens"),
        "gen_ai.usage.cache_creation.input_tokens": usage.get("cacheWriteInputTokens"),
        "gen_ai.response.finish_reasons": [stop.stop_reason],
        "gen_ai.server.time_to_first_token": (metrics["timeToFirstByteMs"] / 1000)
        if "timeToFirstByteMs" in metrics else None,
        "ray_harness.model.latency_ms": metrics.get("latencyMs"),
        # Strands' name for the model latency (milliseconds, as Strands records it), when there is one.
        "gen_ai.server.request.duration": metrics.get("latencyMs") or None,
    }
    if capture_content:
        attributes["gen_ai.output.messages"] = _json([stop.message])
    return attributes


def tool_attributes(agent: Any, tool_use: Any, capture_content: bool) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool_use.get("name"),
        "gen_ai.tool.call.id": tool_use.get("toolUseId"),
    }
    if capture_content:
        attributes["gen_ai.tool.call.arguments"] = _json(tool_use.get("input"))
    attributes.update(_custom(agent))
    chain = getattr(getattr(agent, "_invocation", None), "extensions", None)
    if chain is not None and chain.tool_names:
        attributes["ray_harness.extensions"] = list(chain.tool_names)
    return attributes


def tool_result_attributes(result: Any, started: float, capture_content: bool) -> dict[str, Any]:
    status = result.get("status")
    attributes: dict[str, Any] = {"gen_ai.tool.status": status,  # Strands' name: dashboards built on it keep working
                                  "ray_harness.tool.status": status,
                                  "ray_harness.tool.duration_s": time.perf_counter() - started}
    if capture_content:
        attributes["gen_ai.tool.call.result"] = _json(result.get("content"))
    return attributes


def _custom(agent: Any) -> dict[str, Any]:
    return {key: value for key, value in agent.trace_attributes.items() if _is_attribute_value(value)}


def _is_attribute_value(value: Any) -> bool:
    """Whether OpenTelemetry accepts ``value`` as an attribute: a primitive, or a list or tuple of primitives.

    Strands keeps such lists in ``trace_attributes``; anything else (None, a dict) is left out instead of
    making the SDK log a warning per span.
    """
    if isinstance(value, str | int | float | bool):
        return True
    return isinstance(value, list | tuple) and all(isinstance(item, str | int | float | bool) for item in value)


def _model_id(agent: Any) -> str:
    try:
        return str(agent.model.model_id)
    except Exception:  # a custom model without config
        return type(agent.model).__name__


def _json(value: Any) -> str:
    return json.dumps(value, default=lambda o: f"<{type(o).__name__}>")[:8192]
