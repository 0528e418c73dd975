"""Agent metrics, fanned out to pluggable sinks.

The loop reports each model call and tool call here. Sinks: OpenTelemetry metrics (installed by
:func:`enable_otel_metrics`; nothing installs them for you) and, inside Ray actors, ``ray.util.metrics``
(installed by ``ray_harness.runtime``, so the Ray dashboard's Prometheus endpoint shows ``ray_harness_*``).
With no sink a report costs one check.
Metric names: ``ray_harness_model_calls``, ``ray_harness_tokens`` (tag ``direction``),
``ray_harness_cost_usd``, ``ray_harness_model_latency_s``, ``ray_harness_tool_calls`` (tags ``tool``,
``status``), ``ray_harness_tool_latency_s``, ``ray_harness_active_agents``,
``ray_harness_interrupts_pending``; all tagged with ``agent`` and the scope of
:mod:`ray_harness.telemetry.runs` (``run``, ``graph``/``swarm``/``eval``, ``node``; on Ray ``job``, the job of
the driver whose call caused the work, see :func:`ray_harness.telemetry.runs.current_job`).
Run-level: ``ray_harness_runs_active`` (tag ``kind``), ``ray_harness_node_duration_s`` (tag ``status``),
``ray_harness_eval_rows`` (tags ``eval``, ``status``), ``ray_harness_rate_limit_wait_s`` (tag
``limiter``). Sinks implement the agent-level methods of :class:`MetricsSink`; the run-level ones are
optional (a sink without ``node_finished`` is not told about nodes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ("BaseSink", "MetricsSink", "OtelMetricsSink", "add_sink", "enable_otel_metrics", "live_sinks", "remove_sink",
           "sinks")


class MetricsSink(Protocol):
    """What a metrics sink receives: one call per model call, tool call and change of the agent counts.

    The run-level reports (``run_started``, ``node_finished``, ``eval_row``, ``rate_limit_wait``, ...) are
    optional methods: a sink that lacks one is not told about that event. ``run_started`` / ``run_finished`` report
    outermost runs only; a Graph/Swarm invocation inside another run (a graph per evaluation row, a graph or swarm
    as a node, one started by a tool) shares that run's id and comes as ``nested_run_started`` /
    ``nested_run_finished``, so a sink keeping one record per run keeps the outer run's kind, name and status.
    """

    def model_call(self, agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
        """Record one model call of ``agent``: its token ``usage``, ``latency_s`` and ``cost_usd``."""

    def tool_call(self, agent: str, tool: str, status: str, latency_s: float) -> None:
        """Record one call of ``tool`` by ``agent`` that ended with ``status`` after ``latency_s`` seconds."""

    def active_agents(self, agent: str, delta: int) -> None:
        """Add ``delta`` (+1 when an invocation of ``agent`` starts, -1 when it ends) to the running count."""

    def interrupts_pending(self, agent: str, count: int) -> None:
        """Set how many interrupts of ``agent`` wait for a human (an absolute count, not a delta)."""


class BaseSink:
    """A sink that ignores everything: subclass it and override what you record."""

    def model_call(self, agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
        """Ignore a model call; override to record it (arguments as in :meth:`MetricsSink.model_call`)."""
        return None

    def tool_call(self, agent: str, tool: str, status: str, latency_s: float) -> None:
        """Ignore a tool call; override to record it (arguments as in :meth:`MetricsSink.tool_call`)."""
        return None

    def active_agents(self, agent: str, delta: int) -> None:
        """Ignore a change of the running count; override to record it."""
        return None

    def interrupts_pending(self, agent: str, count: int) -> None:
        """Ignore the pending-interrupt count; override to record it."""
        return None


_lock = threading.Lock()
_sinks: list[MetricsSink] = []
live_sinks = _sinks
"""The installed sinks, the list :func:`sinks` returns: changed in place, never rebound, so the name imported stays
current. The loop tests ``if live_sinks:`` (no call) per invocation, model call, tool call and node; do not mutate it."""
_REPORTS = ("model_call", "tool_call", "active_agents", "interrupts_pending", "run_started", "run_finished",
            "nested_run_started", "nested_run_finished", "node_started", "node_finished", "eval_row", "rate_limit_wait")
_NO_OPS = frozenset(getattr(base, name) for base in (BaseSink, MetricsSink) for name in _REPORTS if hasattr(base, name))
# Report name -> the installed sinks' methods for it, made when a sink is added or removed: a report is a loop over
# bound methods, with no attribute lookup per sink, and no call of a method that does nothing (BaseSink's, the
# protocol's). A Ray host makes ≈20 reports per evaluation row to its two sinks.
_handlers: dict[str, tuple[Callable[..., None], ...]] = dict.fromkeys(_REPORTS, ())


def _dispatch(sinks: list[MetricsSink]) -> dict[str, tuple[Callable[..., None], ...]]:
    handlers: dict[str, tuple[Callable[..., None], ...]] = {}
    for name in _REPORTS:
        found = (getattr(sink, name, None) for sink in sinks)
        handlers[name] = tuple(method for method in found
                               if method is not None and getattr(method, "__func__", None) not in _NO_OPS)
    return handlers


def sinks() -> list[MetricsSink]:
    """The installed sinks, in the order they were added (the live list: do not mutate it)."""
    return _sinks


def add_sink(sink: MetricsSink) -> MetricsSink:
    """Install ``sink`` so it receives every report from now on; adding it twice is a no-op.

    Its report methods are looked up now: replace a method of an installed sink by removing and adding it again.

    Returns:
        The sink, so ``sink = add_sink(MySink())`` keeps a handle for :func:`remove_sink`.
    """
    with _lock:
        if sink not in _sinks:
            _sinks.append(sink)
            _handlers.update(_dispatch(_sinks))
    return sink


def remove_sink(sink: MetricsSink) -> None:
    """Uninstall ``sink``; a sink that is not installed is ignored."""
    with _lock:
        if sink in _sinks:
            _sinks.remove(sink)
            _handlers.update(_dispatch(_sinks))


def model_call(agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
    for handler in _handlers["model_call"]:
        handler(agent, usage, latency_s, cost_usd)


def tool_call(agent: str, tool: str, status: str, latency_s: float) -> None:
    for handler in _handlers["tool_call"]:
        handler(agent, tool, status, latency_s)


def active_agents(agent: str, delta: int) -> None:
    for handler in _handlers["active_agents"]:
        handler(agent, delta)


def interrupts_pending(agent: str, count: int) -> None:
    for handler in _handlers["interrupts_pending"]:
        handler(agent, count)


# The run-level reports are optional methods of a sink: a sink without one has no handler for it.


def run_started(run: str, kind: str, name: str, nodes: int) -> None:
    """A Graph/Swarm invocation or an evaluation (``kind``) began; ``nodes``: how many it has (0: unknown)."""
    for handler in _handlers["run_started"]:
        handler(run, kind, name, nodes)


def run_finished(run: str, kind: str, name: str, status: str) -> None:
    for handler in _handlers["run_finished"]:
        handler(run, kind, name, status)


def nested_run_started(run: str, kind: str, name: str, nodes: int) -> None:
    """A Graph/Swarm invocation began inside run ``run`` (whose id it shares), here or in the process that sent it."""
    for handler in _handlers["nested_run_started"]:
        handler(run, kind, name, nodes)


def nested_run_finished(run: str, kind: str, name: str, status: str) -> None:
    for handler in _handlers["nested_run_finished"]:
        handler(run, kind, name, status)


def node_started(run: str, node: str) -> None:
    for handler in _handlers["node_started"]:
        handler(run, node)


def node_finished(run: str, node: str, status: str, duration_s: float) -> None:
    for handler in _handlers["node_finished"]:
        handler(run, node, status, duration_s)


def eval_row(run: str, name: str, status: str, total: int) -> None:
    """An evaluation row of run ``run`` (evaluation ``name``, ``total`` rows when known) ended with ``status``."""
    for handler in _handlers["eval_row"]:
        handler(run, name, status, total)


def rate_limit_wait(limiter: str, wait_s: float) -> None:
    """A call waited ``wait_s`` seconds for rate limiter ``limiter`` (its name: a model id, a provider)."""
    for handler in _handlers["rate_limit_wait"]:
        handler(limiter, wait_s)


class OtelMetricsSink:
    """Records the harness metrics with an OpenTelemetry meter."""

    def __init__(self, meter_provider: Any = None) -> None:
        from opentelemetry import metrics

        meter = (meter_provider or metrics.get_meter_provider()).get_meter("ray_harness")
        self._calls = meter.create_counter("ray_harness_model_calls", description="Model calls")
        self._tokens = meter.create_counter("ray_harness_tokens", unit="{token}", description="Tokens")
        self._cost = meter.create_counter("ray_harness_cost_usd", unit="USD", description="Model cost")
        self._latency = meter.create_histogram("ray_harness_model_latency_s", unit="s", description="Model latency")
        self._tools = meter.create_counter("ray_harness_tool_calls", description="Tool calls")
        self._tool_latency = meter.create_histogram("ray_harness_tool_latency_s", unit="s",
                                                    description="Tool latency")
        self._active = meter.create_up_down_counter("ray_harness_active_agents", description="Running invocations")
        self._pending = meter.create_up_down_counter("ray_harness_interrupts_pending",
                                                     description="Interrupts waiting for a human")
        self._pending_by_agent: dict[str, int] = {}
        # Run-level, with the names and tags of the Ray sink (less ``job``, as the agent-level ones).
        self._runs = meter.create_up_down_counter("ray_harness_runs_active",
                                                  description="Graph/Swarm invocations and evaluations in progress")
        self._node_duration = meter.create_histogram("ray_harness_node_duration_s", unit="s",
                                                     description="Graph/Swarm node execution time")
        self._rows = meter.create_counter("ray_harness_eval_rows", description="Evaluation rows finished")
        self._rate_wait = meter.create_histogram("ray_harness_rate_limit_wait_s", unit="s",
                                                 description="Time spent waiting for a rate limiter")

    def model_call(self, agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
        """Count the call, its input/output tokens and cost, and record its latency, tagged by agent and run scope."""
        tags = _scope_tags(agent)
        self._calls.add(1, tags)
        self._tokens.add(int(usage.get("inputTokens", 0)), {**tags, "direction": "input"})
        self._tokens.add(int(usage.get("outputTokens", 0)), {**tags, "direction": "output"})
        if cost_usd:
            self._cost.add(cost_usd, tags)
        tags.pop("run", None)  # as the Ray sink: a histogram per run would be a series set per run
        self._latency.record(latency_s, tags)

    def tool_call(self, agent: str, tool: str, status: str, latency_s: float) -> None:
        """Count the tool call and record its latency, tagged by agent, run scope, tool and status."""
        tags = {**_scope_tags(agent), "tool": tool, "status": status}
        self._tools.add(1, tags)
        tags.pop("run", None)
        self._tool_latency.record(latency_s, tags)

    def active_agents(self, agent: str, delta: int) -> None:
        """Move the ``ray_harness_active_agents`` up-down counter by ``delta``."""
        self._active.add(delta, {"agent": agent})

    def interrupts_pending(self, agent: str, count: int) -> None:
        """Move ``ray_harness_interrupts_pending`` so that it shows ``count`` for ``agent``."""
        previous = self._pending_by_agent.get(agent, 0)
        self._pending_by_agent[agent] = count
        if count != previous:
            self._pending.add(count - previous, {"agent": agent})

    def run_started(self, run: str, kind: str, name: str, nodes: int) -> None:
        """Count a Graph/Swarm invocation or evaluation in progress (``kind``, ``name``)."""
        self._runs.add(1, {"kind": kind, "name": name})

    def run_finished(self, run: str, kind: str, name: str, status: str) -> None:
        """Count the run as no longer in progress."""
        self._runs.add(-1, {"kind": kind, "name": name})

    # Every Graph/Swarm invocation in progress counts, nested ones too (by their own kind and name), as on Ray.
    nested_run_started = run_started
    nested_run_finished = run_finished

    def node_finished(self, run: str, node: str, status: str, duration_s: float) -> None:
        """Record how long an execution of ``node`` took, tagged with its graph or swarm and how it ended."""
        scope = _scope_tags("")
        tags: dict[str, str] = {key: scope[key] for key in ("graph", "swarm") if key in scope}
        self._node_duration.record(duration_s, {**tags, "node": node, "status": status})

    def eval_row(self, run: str, name: str, status: str, total: int) -> None:
        """Count a finished evaluation row of evaluation ``name`` by ``status``."""
        from ray_harness.telemetry.runs import run_tags_enabled  # runs imports this module

        tags = {"eval": name, "status": status}
        if run and run_tags_enabled():
            tags["run"] = run
        self._rows.add(1, tags)

    def rate_limit_wait(self, limiter: str, wait_s: float) -> None:
        """Record a wait of ``wait_s`` seconds for rate limiter ``limiter``."""
        self._rate_wait.record(wait_s, {"limiter": limiter})


def _scope_tags(agent: str) -> dict[str, str]:
    """``agent`` and the run scope (graph/swarm/eval, node, run) of the call, as the Ray sink tags them.

    Without ``job``: a Ray job id, carried only by work that came from another process (the Ray sink tags the
    rest with its own process's job); OpenTelemetry tells processes apart by their resource.
    """
    from ray_harness.telemetry.runs import metric_tags  # runs imports this module

    tags = metric_tags(agent)
    tags.pop("job", None)
    return tags


def enable_otel_metrics(meter_provider: Any = None) -> OtelMetricsSink:
    """Record harness metrics through OpenTelemetry (the global meter provider unless one is given)."""
    return add_sink(OtelMetricsSink(meter_provider))  # type: ignore[return-value]
