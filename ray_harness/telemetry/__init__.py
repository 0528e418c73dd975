"""OpenTelemetry for ray_harness: GenAI-convention spans, metrics, and their configuration.

Spans go to the global tracer provider. Configure it in code with
:func:`setup` or with the standard ``OTEL_*`` variables (``OTEL_TRACES_EXPORTER``,
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_PROTOCOL``): when any is set
and no provider exists yet, the first agent invocation in a process (a driver or
a Ray actor) configures one from them. With no provider, tracing costs nothing.
Message content is recorded only with ``capture_content=True`` or
``RAY_HARNESS_CAPTURE_CONTENT=1``: prompts can hold secrets.
"""

from ray_harness.telemetry import metrics
from ray_harness.telemetry.config import capture_content_enabled, setup, tracing_enabled
from ray_harness.telemetry.metrics import enable_otel_metrics
from ray_harness.telemetry.tracing import Tracer, get_tracer

__all__ = ["Tracer", "capture_content_enabled", "enable_otel_metrics", "get_tracer", "metrics", "setup",
           "tracing_enabled"]
