"""Telemetry inside actors: the driver's tracing configuration, trace context per call, Ray metrics.

* :func:`actor_env` — ``OTEL_*`` and ``RAY_HARNESS_CAPTURE_CONTENT`` variables of the driver, passed to
  every actor through ``runtime_env`` so actors export spans the same way (``telemetry.setup`` in the
  driver sets these variables), and ``RAY_HARNESS_EXTENSIONS`` with the driver's entry-point extensions.
* :func:`prepare_actor_process` — once per actor process: configure tracing from those variables and
  register :class:`RayMetricsSink`, so the harness metrics reach Ray's Prometheus endpoint (the
  dashboard's Grafana) as ``ray_harness_*`` tagged with the agent name.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any

from ray.util import metrics as ray_metrics

from ray_harness.telemetry import metrics as harness_metrics
from ray_harness.telemetry.config import ensure_configured_from_env

__all__ = ("RayMetricsSink", "actor_env", "flush_metrics", "prepare_actor_process", "with_actor_env")

logger = logging.getLogger(__name__)

_Tags = tuple[tuple[str, str], ...]
_ENV_PREFIXES = ("OTEL_", "RAY_HARNESS_CAPTURE_CONTENT")
_prepared = threading.Lock()
_state: dict[str, Any] = {"sink": None}
_LATENCY_BOUNDARIES = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]


def actor_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key.startswith(_ENV_PREFIXES)}
    from ray_harness.extensions.loading import ENV_VAR, forwarded_names

    extensions = forwarded_names()  # the variable's and use(name)'s: every actor loads the driver's list
    if extensions:
        env[ENV_VAR] = ",".join(extensions)
    return env


def with_actor_env(options: dict[str, Any]) -> dict[str, Any]:
    """Add the driver's telemetry variables to actor ``options`` (merged with any runtime_env given)."""
    env = actor_env()
    if not env:
        return options
    runtime_env = dict(options.get("runtime_env") or {})
    runtime_env["env_vars"] = {**env, **dict(runtime_env.get("env_vars") or {})}
    return {**options, "runtime_env": runtime_env}


class RayMetricsSink:
    """``ray.util.metrics`` counters, gauges and histograms for the harness metrics.

    Each Ray metric call costs ≈2 µs plus tag handling, and an agent invocation makes about eight; a host
    runs thousands of invocations per second. Counters and gauges are therefore summed (last value kept)
    in plain dicts and handed to Ray by a background thread every :data:`FLUSH_INTERVAL_S` — Ray exports
    metrics every few seconds anyway. Histogram observations are queued and observed at the same time.
    """

    FLUSH_INTERVAL_S = 1.0

    def __init__(self, *, flush_interval_s: float | None = None) -> None:
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
        # Pending updates: (metric, tags) -> amount / last value; histogram observations in order.
        self._increments: dict[tuple[Any, _Tags], float] = {}
        self._gauge_values: dict[tuple[Any, _Tags], float] = {}
        self._observations: list[tuple[Any, float, _Tags]] = []
        self._interval = self.FLUSH_INTERVAL_S if flush_interval_s is None else flush_interval_s
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_periodically, name="ray_harness-metrics", daemon=True)
        self._flusher.start()
        atexit.register(self.flush)

    # -- MetricsSink ----------------------------------------------------------------------------------------

    def model_call(self, agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
        inputs, outputs = int(usage.get("inputTokens", 0)), int(usage.get("outputTokens", 0))
        with self._lock:
            increments = self._increments
            key: tuple[Any, _Tags] = (self._calls, (("agent", agent),))
            increments[key] = increments.get(key, 0) + 1
            if inputs > 0:  # Ray counters reject increments of 0
                key = (self._tokens, (("agent", agent), ("direction", "input")))
                increments[key] = increments.get(key, 0) + inputs
            if outputs > 0:
                key = (self._tokens, (("agent", agent), ("direction", "output")))
                increments[key] = increments.get(key, 0) + outputs
            if cost_usd > 0:
                key = (self._cost, (("agent", agent),))
                increments[key] = increments.get(key, 0) + cost_usd
            self._observations.append((self._latency, latency_s, (("agent", agent),)))

    def tool_call(self, agent: str, tool: str, status: str, latency_s: float) -> None:
        with self._lock:
            key = (self._tools, (("agent", agent), ("tool", tool), ("status", status)))
            self._increments[key] = self._increments.get(key, 0) + 1
            self._observations.append((self._tool_latency, latency_s, (("agent", agent), ("tool", tool))))

    def active_agents(self, agent: str, delta: int) -> None:
        with self._lock:
            count = max(0, self._active_counts.get(agent, 0) + delta)
            self._active_counts[agent] = count
            self._gauge_values[(self._active, (("agent", agent),))] = count

    def interrupts_pending(self, agent: str, count: int) -> None:
        with self._lock:
            self._gauge_values[(self._pending, (("agent", agent),))] = count

    # -- flushing -------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """Hand everything recorded so far to Ray."""
        with self._lock:
            increments, self._increments = self._increments, {}
            gauges, self._gauge_values = self._gauge_values, {}
            observations, self._observations = self._observations, []
        for (counter, tags), amount in increments.items():
            counter.inc(amount, dict(tags))
        for (gauge, tags), value in gauges.items():
            gauge.set(value, dict(tags))
        for histogram, value, tags in observations:
            histogram.observe(value, dict(tags))

    def close(self) -> None:
        self._stop.set()
        self.flush()

    def _flush_periodically(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.flush()
            except Exception as error:  # metrics must never take the host down
                logger.warning("error=<%s> | could not export harness metrics to Ray", error)


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


def flush_metrics() -> None:
    """Hand this process's buffered harness metrics to Ray now (before the actor is killed, for example)."""
    sink = _state["sink"]
    if sink is not None:
        sink.flush()
