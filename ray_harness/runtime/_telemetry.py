"""Telemetry inside actors: the driver's tracing configuration, trace context per call, Ray metrics.

* :func:`actor_env` — ``OTEL_*`` and ``RAY_HARNESS_CAPTURE_CONTENT`` variables of the driver, passed to
  every actor through ``runtime_env`` so actors export spans the same way (``telemetry.setup`` in the
  driver sets these variables).
* :func:`prepare_actor_process` — once per actor process: configure tracing from those variables and
  register :class:`RayMetricsSink`, so the harness metrics reach Ray's Prometheus endpoint (the
  dashboard's Grafana) as ``ray_harness_*`` tagged with the agent name.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ray.util import metrics as ray_metrics

from ray_harness.telemetry import metrics as harness_metrics
from ray_harness.telemetry.config import ensure_configured_from_env

__all__ = ("RayMetricsSink", "actor_env", "prepare_actor_process", "with_actor_env")

_ENV_PREFIXES = ("OTEL_", "RAY_HARNESS_CAPTURE_CONTENT")
_prepared = threading.Lock()
_state: dict[str, Any] = {"sink": None}
_LATENCY_BOUNDARIES = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]


def actor_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key.startswith(_ENV_PREFIXES)}


def with_actor_env(options: dict[str, Any]) -> dict[str, Any]:
    """Add the driver's telemetry variables to actor ``options`` (merged with any runtime_env given)."""
    env = actor_env()
    if not env:
        return options
    runtime_env = dict(options.get("runtime_env") or {})
    runtime_env["env_vars"] = {**env, **dict(runtime_env.get("env_vars") or {})}
    return {**options, "runtime_env": runtime_env}


class RayMetricsSink:
    """``ray.util.metrics`` counters and histograms for the harness metrics."""

    def __init__(self) -> None:
        self._calls = ray_metrics.Counter("ray_harness_model_calls", "Model calls", tag_keys=("agent",))
        self._tokens = ray_metrics.Counter("ray_harness_tokens", "Tokens", tag_keys=("agent", "direction"))
        self._cost = ray_metrics.Counter("ray_harness_cost_usd", "Model cost in USD", tag_keys=("agent",))
        self._latency = ray_metrics.Histogram("ray_harness_model_latency_s", "Model latency (s)",
                                              boundaries=_LATENCY_BOUNDARIES, tag_keys=("agent",))
        self._tools = ray_metrics.Counter("ray_harness_tool_calls", "Tool calls", tag_keys=("agent", "tool", "status"))
        self._tool_latency = ray_metrics.Histogram("ray_harness_tool_latency_s", "Tool latency (s)",
                                                   boundaries=_LATENCY_BOUNDARIES, tag_keys=("agent", "tool"))
        self._active = ray_metrics.Gauge("ray_harness_active_agents", "Running invocations", tag_keys=("agent",))
        self._pending = ray_metrics.Gauge("ray_harness_interrupts_pending", "Interrupts waiting for a human",
                                          tag_keys=("agent",))
        self._active_counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def model_call(self, agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
        tags = {"agent": agent}
        self._calls.inc(1, tags)
        for direction, key in (("input", "inputTokens"), ("output", "outputTokens")):
            count = int(usage.get(key, 0))
            if count > 0:  # Ray counters reject increments of 0
                self._tokens.inc(count, {**tags, "direction": direction})
        if cost_usd > 0:
            self._cost.inc(cost_usd, tags)
        self._latency.observe(latency_s, tags)

    def tool_call(self, agent: str, tool: str, status: str, latency_s: float) -> None:
        self._tools.inc(1, {"agent": agent, "tool": tool, "status": status})
        self._tool_latency.observe(latency_s, {"agent": agent, "tool": tool})

    def active_agents(self, agent: str, delta: int) -> None:
        with self._lock:
            count = max(0, self._active_counts.get(agent, 0) + delta)
            self._active_counts[agent] = count
        self._active.set(count, {"agent": agent})

    def interrupts_pending(self, agent: str, count: int) -> None:
        self._pending.set(count, {"agent": agent})


def prepare_actor_process() -> None:
    """Idempotent per process: tracing from the inherited ``OTEL_*`` variables, and Ray metrics.

    Only inside a Ray actor: a runner driven in the driver process (tests, local tools) leaves the driver's
    telemetry alone.
    """
    import ray

    if not ray.is_initialized() or ray.get_runtime_context().get_actor_id() is None:
        return
    with _prepared:
        if _state["sink"] is not None:
            return
        ensure_configured_from_env()
        _state["sink"] = harness_metrics.add_sink(RayMetricsSink())
