"""Configure tracing (and metrics) once per process, in code or from ``OTEL_*`` variables."""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ("capture_content_enabled", "ensure_configured_from_env", "setup", "tracing_enabled")

_lock = threading.Lock()
_state: dict[str, Any] = {"capture_content": None, "env_checked": False, "provider": None}
_ENV_KEYS = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def setup(exporter: Any = "console", *, endpoint: str | None = None, protocol: str | None = None,
          capture_content: bool = False, service_name: str = "ray_harness", headers: dict[str, str] | None = None,
          simple: bool = False) -> Any:
    """Install a global ``TracerProvider`` that exports ray_harness spans.

    Args:
        exporter: ``"console"``, ``"otlp"`` (protocol from ``protocol`` or ``OTEL_EXPORTER_OTLP_PROTOCOL``,
            default ``http/protobuf``), ``"otlp-http"``, ``"otlp-grpc"``, or a ``SpanExporter`` instance.
        endpoint: OTLP endpoint (else the standard ``OTEL_EXPORTER_OTLP_*`` variables apply). Over gRPC,
            ``http://host:4317`` is plaintext (a local collector), ``https://`` TLS, as OpenTelemetry decides.
        protocol: OTLP protocol for ``"otlp"``: ``"http/protobuf"`` or ``"grpc"``.
        capture_content: Record prompts and completions on spans (off by default).
        service_name: ``service.name`` resource attribute.
        headers: Extra OTLP headers (for example an auth token).
        simple: Export each span at once (tests) instead of batching.

    Returns:
        The installed ``TracerProvider``. Actors started afterwards by ``ray_harness.runtime`` receive the
        same configuration through ``OTEL_*`` environment variables.
    """
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    span_exporter = _make_exporter(exporter, endpoint, protocol, headers)
    with _lock:
        provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        processor = SimpleSpanProcessor(span_exporter) if simple else BatchSpanProcessor(span_exporter)
        provider.add_span_processor(processor)
        _install(trace, provider)
        _state["provider"] = provider
        _state["capture_content"] = capture_content
        _state["env_checked"] = True
        if isinstance(exporter, str):
            # Exported so actors (which inherit the driver's runtime env) configure themselves the same way.
            os.environ.setdefault("OTEL_TRACES_EXPORTER", "otlp" if exporter.startswith("otlp") else exporter)
            if endpoint:
                os.environ.setdefault("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
            if exporter == "otlp-grpc":
                os.environ.setdefault("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        if capture_content:
            os.environ["RAY_HARNESS_CAPTURE_CONTENT"] = "1"
    return provider


def _install(trace: Any, provider: Any) -> None:
    """Allow ``trace.set_tracer_provider`` again when no provider is installed.

    It refuses a second call even after the first provider was removed (tests, notebooks re-running setup).
    """
    once = getattr(trace, "_TRACER_PROVIDER_SET_ONCE", None)
    if once is not None and getattr(trace, "_TRACER_PROVIDER", None) is None and hasattr(once, "_done"):
        once._done = False
    trace.set_tracer_provider(provider)


def _make_exporter(exporter: Any, endpoint: str | None, protocol: str | None, headers: dict[str, str] | None) -> Any:
    if not isinstance(exporter, str):
        return exporter
    if exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if exporter == "otlp":
        protocol = protocol or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        exporter = "otlp-grpc" if protocol == "grpc" else "otlp-http"
    if exporter == "otlp-http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        if endpoint and not endpoint.rstrip("/").endswith("/v1/traces"):
            endpoint = endpoint.rstrip("/") + "/v1/traces"
        return OTLPSpanExporter(endpoint=endpoint, headers=headers)
    if exporter == "otlp-grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        # insecure=None lets the exporter decide as OpenTelemetry specifies: plaintext for an http:// endpoint (given
        # here or in OTEL_EXPORTER_OTLP_ENDPOINT, as actors get it), or as OTEL_EXPORTER_OTLP_INSECURE says.
        return GrpcExporter(endpoint=endpoint, headers=headers, insecure=None)
    raise ValueError(f"exporter must be 'console', 'otlp', 'otlp-http', 'otlp-grpc' or a SpanExporter, got {exporter!r}")


def ensure_configured_from_env() -> None:
    """Configure tracing from ``OTEL_*`` variables once, if they are set and nothing configured it yet."""
    if _state["env_checked"]:
        return
    with _lock:
        if _state["env_checked"]:
            return
        _state["env_checked"] = True
        wanted = os.environ.get("OTEL_TRACES_EXPORTER")
        if wanted == "none" or not any(os.environ.get(key) for key in _ENV_KEYS):
            return
        from opentelemetry import trace

        if _is_sdk_provider(trace.get_tracer_provider()):
            return
    exporter = wanted if wanted in ("console", "otlp") else "otlp"
    setup(exporter, capture_content=capture_content_enabled())


def tracing_enabled() -> bool:
    """Whether spans are recorded: a real ``TracerProvider`` is installed or configured by ``OTEL_*``."""
    return sdk_provider() is not None


def sdk_provider() -> Any:
    """The installed SDK ``TracerProvider`` (the one spans go to), or None when tracing is off."""
    # Asked per agent invocation and per graph node (get_tracer, span_scope): module globals, not cached calls.
    trace = _trace if _trace is not None else _load_otel()
    # get_tracer_provider() reads os.environ on every call until a provider is installed, so the installed one
    # (OpenTelemetry's module global) is looked at first.
    provider = getattr(trace, "_TRACER_PROVIDER", None)
    if provider is None:
        if not _provider_from_env:
            return None
        provider = trace.get_tracer_provider()
    return provider if _is_sdk_provider(provider) else None


_trace: Any = None
"""OpenTelemetry's ``trace`` module once :func:`_load_otel` imported it."""
_provider_from_env = False
"""Whether ``OTEL_PYTHON_TRACER_PROVIDER`` names a provider, as :func:`_load_otel` read it."""


def _load_otel() -> Any:
    """OpenTelemetry's ``trace`` module, imported once: an import statement per call costs ≈1 µs, per node and per turn.

    Also reads once whether ``OTEL_PYTHON_TRACER_PROVIDER`` names a provider: one named by environment is
    configured at start-up, not in the middle of a run.
    """
    global _provider_from_env, _trace
    from opentelemetry import trace

    _provider_from_env = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
    _trace = trace  # last: a thread that sees _trace set sees _provider_from_env set too
    return trace


def _is_sdk_provider(provider: Any) -> bool:
    name = type(provider).__name__
    return name not in ("ProxyTracerProvider", "NoOpTracerProvider", "_DefaultTracerProvider")


def capture_content_enabled() -> bool:
    """Whether spans record prompts and completions (``setup(capture_content=)``, else an env variable).

    The variable is ``RAY_HARNESS_CAPTURE_CONTENT`` (``1``, ``true`` or ``yes``).
    """
    configured = _state["capture_content"]
    if configured is not None:
        return bool(configured)
    return os.environ.get("RAY_HARNESS_CAPTURE_CONTENT", "").lower() in ("1", "true", "yes")
