"""Telemetry inside actors: the driver's tracing configuration, trace context per call, Ray metrics.

* :func:`actor_env` — ``OTEL_*`` and ``RAY_HARNESS_CAPTURE_CONTENT`` variables of the driver, passed to
  every actor through ``runtime_env`` so actors export spans the same way (``telemetry.setup`` in the
  driver sets these variables), ``RAY_HARNESS_EXTENSIONS`` with the driver's entry-point extensions, and
  ``RAY_HARNESS_RATE_LIMITS`` with the rate limits registered by key in the starting process.
* :func:`task_name` — the name of an actor call that runs a graph/swarm node or an evaluation row, so the
  dashboard's task view says which (``ray_harness.node:<graph>/<node>``, ``ray_harness.row:<eval>/<id>``).
* :func:`prepare_actor_process` — once per actor process: configure tracing from those variables and
  register :class:`RayMetricsSink`, so the harness metrics reach Ray's Prometheus endpoint (the
  dashboard's Grafana) as ``ray_harness_*`` tagged with the agent, run, graph/swarm/eval, node and job.
  The job is the one the work is for (:func:`ray_harness.telemetry.runs.current_job`): the driver whose call
  led to it. This module registers :func:`job_id` as the process's own job: its own work's, and what its
  calls carry when no job came with the work.
* :func:`flush_metrics` — hand this process's buffered metrics and run records (``ray-harness status``) to Ray
  now; :func:`flush_hosts` — the same in this process and in host actors (an evaluation's, at its end).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import ray
from ray.util import metrics as ray_metrics

from ray_harness.telemetry import metrics as harness_metrics
from ray_harness.telemetry.config import ensure_configured_from_env
from ray_harness.telemetry.propagation import TASK_KEY
from ray_harness.telemetry.runs import TAG_KEYS, current_tags, metric_tags, run_tags_enabled, set_job_source

__all__ = ("RayMetricsSink", "actor_env", "flush_hosts", "flush_metrics", "flush_spans", "prepare_actor_process",
           "prepare_driver_process", "task_name", "with_actor_env")

logger = logging.getLogger(__name__)

_Tags = tuple[tuple[str, str], ...]
_ENV_PREFIXES = ("OTEL_", "RAY_HARNESS_CAPTURE_CONTENT", "RAY_HARNESS_SLOT_IDLE_TIMEOUT")
_prepared = threading.Lock()
_state: dict[str, Any] = {"sink": None, "runs": None, "actor": False}
_LATENCY_BOUNDARIES = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]


def job_id() -> str:
    """This process's Ray job id: its own as a driver, its creator's as an actor (``""`` when not connected)."""
    if not ray.is_initialized():  # asked first: get_runtime_context() would start a local Ray
        return ""
    try:
        return str(ray.get_runtime_context().get_job_id() or "")
    except Exception:  # not connected: no job
        return ""


# Work with no job of its own (a driver's, an actor's own) is for this process's job; a call carries it onward.
set_job_source(job_id)


def actor_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key.startswith(_ENV_PREFIXES)}
    from ray_harness.extensions.loading import ENV_VAR, forwarded_names

    extensions = forwarded_names()  # the variable's and use(name)'s: every actor loads the driver's list
    if extensions:
        env[ENV_VAR] = ",".join(extensions)
    from ray_harness.models.rate_limit import ENV_VAR as RATE_LIMITS_VAR, forwarded_rate_limits

    rate_limits = forwarded_rate_limits()  # evaluate(rate_limits=) reaches a row's RemoteAgent / node actors
    if rate_limits:
        env[RATE_LIMITS_VAR] = rate_limits
    return env


def with_actor_env(options: dict[str, Any]) -> dict[str, Any]:
    """Add the driver's telemetry variables to actor ``options`` (merged with any runtime_env given)."""
    env = actor_env()
    if not env:
        return options
    runtime_env = dict(options.get("runtime_env") or {})
    runtime_env["env_vars"] = {**env, **dict(runtime_env.get("env_vars") or {})}
    return {**options, "runtime_env": runtime_env}


_MAX_TASK_NAME = 120
"""Longer names (a batch of many rows) are cut: the dashboard shows one line per task."""


def task_name(*options: dict[str, Any] | None) -> str:
    """The Ray task name of an actor call carrying these run ``options`` (one per run it carries).

    Each run's ``trace_context`` (see :func:`ray_harness.telemetry.propagation.current_carrier`) says which
    node or row it is. One run: its label, e.g. ``ray_harness.node:review/writer`` or
    ``ray_harness.row:my_eval/17``; a batch of rows of one evaluation: ``ray_harness.row:my_eval/3,4,9``;
    nothing known: ``""`` (Ray's default, the method name).
    """
    found: dict[str, None] = {}  # distinct labels in order (a batch carries hundreds of rows: no list search)
    for item in options:
        carrier = (item or {}).get("trace_context") or {}
        label = carrier.get(TASK_KEY)
        if label:
            found[label] = None
    labels = list(found)
    if len(labels) <= 1:
        return labels[0] if labels else ""
    prefix, _, _ = labels[0].rpartition("/")
    if not all(label.rpartition("/")[0] == prefix for label in labels):
        return labels[0] + f" (+{len(labels) - 1})"  # mixed batches are not made by the harness; say so anyway
    ids = [label.rpartition("/")[2] for label in labels]
    name = f"{prefix}/{','.join(ids)}"
    if len(name) <= _MAX_TASK_NAME:
        return name
    shown = prefix + "/"
    for count, row in enumerate(ids):
        rest = f",+{len(ids) - count}"
        if len(shown) + len(row) + 1 + len(rest) > _MAX_TASK_NAME:
            return shown.rstrip(",") + rest
        shown += row + ","
    return shown.rstrip(",")


class RayMetricsSink:
    """``ray.util.metrics`` counters, gauges and histograms for the harness metrics.

    Each Ray metric call costs ≈2 µs plus tag handling, and an agent invocation makes about eight; a host
    runs thousands of invocations per second. Counters are therefore summed in plain dicts (a model call's four
    under one entry per tag set) and handed to Ray by a background thread every :data:`FLUSH_INTERVAL_S` — Ray
    exports metrics every few seconds anyway; a gauge is set at a flush when it was moved since the last one (a
    pending-interrupt count reported again unchanged is not). Histogram observations are queued per series, in
    order, and recorded at the same time: one ``record`` each (Ray takes one value per call; ≈25 k instructions
    with six tags, most of it Ray encoding the tags).

    Tags: ``agent`` and the scope of :mod:`ray_harness.telemetry.runs` (``run``, ``graph``, ``swarm``,
    ``eval``, ``node``), plus ``job``: the job the work is for (the driver whose call caused it, carried with
    the call), else this process's own (the default tag). Histograms leave ``run`` out: one set of buckets per
    run would multiply their series by the number of runs. The gauges count per job too.
    """

    FLUSH_INTERVAL_S = 1.0

    def __init__(self, *, flush_interval_s: float | None = None) -> None:
        scoped = ("agent", *TAG_KEYS)
        bucketed = tuple(key for key in scoped if key != "run")
        self._calls = self._metric(ray_metrics.Counter, "ray_harness_model_calls", "Model calls", scoped)
        self._tokens = self._metric(ray_metrics.Counter, "ray_harness_tokens", "Tokens", (*scoped, "direction"))
        self._cost = self._metric(ray_metrics.Counter, "ray_harness_cost_usd", "Model cost in USD", scoped)
        self._latency = self._metric(ray_metrics.Histogram, "ray_harness_model_latency_s", "Model latency (s)",
                                     bucketed)
        self._tools = self._metric(ray_metrics.Counter, "ray_harness_tool_calls", "Tool calls",
                                   (*scoped, "tool", "status"))
        self._tool_latency = self._metric(ray_metrics.Histogram, "ray_harness_tool_latency_s", "Tool latency (s)",
                                          (*bucketed, "tool"))
        self._active = self._metric(ray_metrics.Gauge, "ray_harness_active_agents", "Running invocations",
                                    ("agent", "job"))
        self._pending = self._metric(ray_metrics.Gauge, "ray_harness_interrupts_pending",
                                     "Interrupts waiting for a human", ("agent", "job"))
        self._runs = self._metric(ray_metrics.Gauge, "ray_harness_runs_active",
                                  "Graph/Swarm invocations and evaluations in progress", ("kind", "name", "job"))
        self._node_duration = self._metric(ray_metrics.Histogram, "ray_harness_node_duration_s",
                                           "Graph/Swarm node execution time (s)",
                                           ("graph", "swarm", "node", "status", "job"))
        self._rows = self._metric(ray_metrics.Counter, "ray_harness_eval_rows", "Evaluation rows finished",
                                  ("run", "eval", "status", "job"))
        self._rate_wait = self._metric(ray_metrics.Histogram, "ray_harness_rate_limit_wait_s",
                                       "Time spent waiting for a rate limiter (s)", ("limiter", "job"))
        self._job = job_id()  # the default tag: this process's own work
        self._lock = threading.Lock()
        # Pending updates, handed to Ray at the next flush. Model calls: scope tags -> [calls, input tokens, output
        # tokens, cost, latencies] (one entry updated per call, made into four counters and the latencies'
        # observations at the flush); other counters: (metric, tags) -> amount; other histograms: (histogram, tags)
        # -> the values observed, in order. A series' observations keep their order (its sum adds them in it).
        self._model: dict[_Tags, list[Any]] = {}
        self._increments: dict[tuple[Any, _Tags], float] = {}
        self._observations: dict[tuple[Any, _Tags], list[float]] = {}
        # Gauges: their counts, and the keys whose value changed since the last flush (the flush sets only those).
        self._active_counts: dict[tuple[str, ...], int] = {}  # (agent, job) -> invocations running
        self._run_counts: dict[tuple[str, ...], int] = {}  # (kind, name, job) -> runs in progress
        self._pending_counts: dict[tuple[str, ...], int] = {}  # (agent, job) -> interrupts pending
        self._pending_jobs: dict[str, str] = {}  # agent -> the job of its latest pending-interrupt count
        self._active_changed: set[tuple[str, ...]] = set()
        self._runs_changed: set[tuple[str, ...]] = set()
        self._pending_changed: set[tuple[str, ...]] = set()
        self._recorders: dict[tuple[Any, _Tags], Callable[[float], None]] = {}  # used by the flushing thread
        self._interval = self.FLUSH_INTERVAL_S if flush_interval_s is None else flush_interval_s
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_periodically, name="ray_harness-metrics", daemon=True)
        self._flusher.start()
        atexit.register(self.flush)

    @staticmethod
    def _metric(kind: Any, name: str, description: str, tag_keys: tuple[str, ...]) -> Any:
        metric = kind(name, description, tag_keys=tag_keys, **({"boundaries": _LATENCY_BOUNDARIES}
                                                                if kind is ray_metrics.Histogram else {}))
        # Ray wants a value for every tag key: tags a call does not carry are empty (absent in Prometheus).
        metric.set_default_tags({key: job_id() if key == "job" else "" for key in tag_keys})
        return metric

    def _add(self, metric: Any, tags: dict[str, str], amount: float) -> None:
        key = (metric, tuple(tags.items()))
        self._increments[key] = self._increments.get(key, 0) + amount

    # -- MetricsSink ----------------------------------------------------------------------------------------

    def model_call(self, agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
        inputs, outputs = int(usage.get("inputTokens", 0)), int(usage.get("outputTokens", 0))
        scope = current_tags()
        # ``agent`` and the scope's tags, in metric_tags' order, as one tuple: the key of the call's four counters
        # (three calls per evaluation row on a host). The latency's tags (without ``run``) are made at the flush.
        tags: _Tags = (("agent", agent), *scope.items())
        if "run" in scope and not run_tags_enabled():
            tags = tuple(item for item in tags if item[0] != "run")
        with self._lock:
            totals = self._model.get(tags)
            if totals is None:
                totals = self._model[tags] = [0, 0, 0, 0.0, []]
            totals[0] += 1
            if inputs > 0:  # Ray counters reject increments of 0 (and none is negative)
                totals[1] += inputs
            if outputs > 0:
                totals[2] += outputs
            if cost_usd > 0:
                totals[3] += cost_usd
            totals[4].append(latency_s)

    def tool_call(self, agent: str, tool: str, status: str, latency_s: float) -> None:
        tags = metric_tags(agent)
        with self._lock:
            self._add(self._tools, {**tags, "tool": tool, "status": status}, 1)
            tags.pop("run", None)
            self._observe(self._tool_latency, (*tags.items(), ("tool", tool)), latency_s)

    def active_agents(self, agent: str, delta: int) -> None:
        self._count(self._active_counts, self._active_changed, (agent, current_tags().get("job") or self._job), delta)

    def _count(self, counts: dict[tuple[str, ...], int], changed: set[tuple[str, ...]], key: tuple[str, ...],
               delta: int) -> None:
        """Add ``delta`` to the gauge count of ``key`` (its job last) and mark the key moved since the last flush."""
        with self._lock:
            current = counts.get(key, 0)
            if current or delta >= 0:
                count = current + delta
                counts[key] = count if count > 0 else 0
            else:  # an end with nothing running under its job: see _lost_job
                key = _lost_job(counts, key, delta)
            changed.add(key)

    def interrupts_pending(self, agent: str, count: int) -> None:
        job = current_tags().get("job") or self._job
        with self._lock:
            previous = self._pending_jobs.get(agent)
            if previous == job and self._pending_counts.get((agent, job)) == count:
                return  # unchanged (reported at the end of every invocation): nothing to set
            changed = self._pending_changed
            if previous is not None and previous != job:  # the agent's count moved to another job's series
                self._pending_counts[(agent, previous)] = 0
                changed.add((agent, previous))
            self._pending_jobs[agent] = job
            self._pending_counts[(agent, job)] = count
            changed.add((agent, job))

    def run_started(self, run: str, kind: str, name: str, nodes: int) -> None:
        self._count_run(kind, name, 1)

    def run_finished(self, run: str, kind: str, name: str, status: str) -> None:
        self._count_run(kind, name, -1)

    # ``runs_active`` counts every Graph/Swarm invocation in progress, nested ones too (by their own kind and name).
    nested_run_started = run_started
    nested_run_finished = run_finished

    def _count_run(self, kind: str, name: str, delta: int) -> None:
        self._count(self._run_counts, self._runs_changed, (kind, name, current_tags().get("job") or self._job), delta)

    def node_finished(self, run: str, node: str, status: str, duration_s: float) -> None:
        scope = current_tags()
        tags = (("graph", scope.get("graph", "")), ("swarm", scope.get("swarm", "")), ("node", node),
                ("status", status), ("job", scope.get("job") or self._job))
        with self._lock:
            self._observe(self._node_duration, tags, duration_s)

    def eval_row(self, run: str, name: str, status: str, total: int) -> None:
        with self._lock:
            self._add(self._rows, {"run": run if run_tags_enabled() else "", "eval": name, "status": status,
                                   "job": current_tags().get("job") or self._job}, 1)

    def rate_limit_wait(self, limiter: str, wait_s: float) -> None:
        with self._lock:
            self._observe(self._rate_wait, (("limiter", limiter), ("job", current_tags().get("job") or self._job)),
                          wait_s)

    def _observe(self, histogram: Any, tags: _Tags, value: float) -> None:
        values = self._observations.get((histogram, tags))
        if values is None:
            values = self._observations[(histogram, tags)] = []
        values.append(value)

    # -- flushing -------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """Hand everything recorded so far to Ray."""
        with self._lock:
            model, self._model = self._model, {}
            increments, self._increments = self._increments, {}
            observations, self._observations = self._observations, {}
            gauges = [(gauge, key, counts[key]) for gauge, counts, changed in (
                (self._active, self._active_counts, self._active_changed),
                (self._runs, self._run_counts, self._runs_changed),
                (self._pending, self._pending_counts, self._pending_changed)) for key in changed]
            for changed in (self._active_changed, self._runs_changed, self._pending_changed):
                changed.clear()
        for tags, (calls, inputs, outputs, cost, _) in model.items():
            labels = dict(tags)
            self._calls.inc(calls, labels)
            if inputs:
                self._tokens.inc(inputs, {**labels, "direction": "input"})
            if outputs:
                self._tokens.inc(outputs, {**labels, "direction": "output"})
            if cost:
                self._cost.inc(cost, labels)
        for (counter, tags), amount in increments.items():
            counter.inc(amount, dict(tags))
        for gauge, key, count in gauges:
            gauge.set(count, dict(zip(_GAUGE_TAGS[gauge is self._runs], key, strict=True)))
        for tags, totals in model.items():
            record = self._recorder(self._latency, tags)
            for latency in totals[4]:
                record(latency)
        for (histogram, tags), values in observations.items():
            record = self._recorder(histogram, tags)
            for value in values:
                record(value)

    def _recorder(self, histogram: Any, tags: _Tags) -> Callable[[float], None]:
        """``histogram.observe(value, tags)`` for one tag set, as a function of the value (made once per tag set)."""
        key = (histogram, tags)
        record = self._recorders.get(key)
        if record is None:
            if len(self._recorders) >= _MAX_RECORDERS:  # tag sets that come and go (graph ids made per run)
                self._recorders.clear()
            # Histograms leave ``run`` out (a model call's tags have it: one recorder per run and scope here).
            labels = {name: value for name, value in tags if name != "run"}
            bucketed = (histogram, tuple(labels.items()))
            record = self._recorders.get(bucketed)
            if record is None:
                record = self._recorders[bucketed] = _histogram_recorder(histogram, labels)
            self._recorders[key] = record
        return record

    def close(self) -> None:
        self._stop.set()
        self.flush()

    def _flush_periodically(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.flush()
            except Exception as error:  # metrics must never take the host down
                logger.warning("error=<%s> | could not export harness metrics to Ray", error)


def _lost_job(counts: dict[tuple[str, ...], int], counted: tuple[str, ...], delta: int) -> tuple[str, ...]:
    """Count an end (``delta`` < 0) for which ``counted`` (a key, its job last) has nothing running; return the key.

    An end reported outside its start's context (a generator closed elsewhere) has lost the job: it ends a
    running one of the same key instead, so the counts stay right per key. The caller holds the lock.
    """
    found = next((key for key, count in counts.items() if count and key[:-1] == counted[:-1]), None)
    if found is not None:
        counted = found
    counts[counted] = max(0, counts.get(counted, 0) + delta)
    return counted


_GAUGE_TAGS = (("agent", "job"), ("kind", "name", "job"))
"""The tag keys of the gauges' counted keys: the agent gauges', then ``runs_active``'s."""

_MAX_RECORDERS = 10_000
"""Tag sets whose merged tags a sink keeps (it starts again past this: their number is the user's to bound)."""


def _histogram_recorder(histogram: Any, tags: dict[str, str]) -> Callable[[float], None]:
    """``lambda value: histogram.observe(value, tags)``, with the tags merged and checked once, not per value.

    Ray's ``observe`` merges the tags into the metric's defaults and checks them against its tag keys at every call,
    then makes one ``record`` call on its inner (C++) metric; a host flushes six observations per evaluation row
    under a handful of tag sets. The same ``record`` call, with the same merged tags, is made here. A Ray without
    that inner metric (another version's layout) gets ``observe`` itself.
    """
    record = getattr(getattr(histogram, "_metric", None), "record", None)
    merge = getattr(histogram, "_get_final_tags", None)
    check = getattr(histogram, "_validate_tags", None)
    if getattr(histogram, "_discard_metric", False) is True:  # an invalid name: Ray records nothing for it either
        return _ignore
    if not (callable(record) and callable(merge) and callable(check)):
        return functools.partial(histogram.observe, tags=tags)
    final = dict(merge(tags))  # a copy: Ray hands out its own defaults dict for empty tags
    check(final)  # raises as observe() would, at the first value
    return functools.partial(record, tags=final)


def _ignore(value: float) -> None:
    return None


def prepare_actor_process() -> None:
    """Idempotent per process: tracing from the inherited ``OTEL_*`` variables, and Ray metrics.

    Only inside a Ray actor: a runner driven in the driver process (tests, local tools) leaves the driver's
    telemetry alone.
    """
    if _state["actor"]:  # called at every invocation: once prepared, Ray is not asked again
        return
    if not ray.is_initialized() or ray.get_runtime_context().get_actor_id() is None:
        return
    with _prepared:
        if _state["actor"]:
            return
        ensure_configured_from_env()
        if _state["sink"] is None:
            _install_sinks()
        _state["actor"] = True


def prepare_driver_process() -> None:
    """Idempotent: Ray metrics for what a driver records itself (evaluation rows, local runs); tracing untouched."""
    with _prepared:
        if _state["sink"] is None:
            _install_sinks()


def _install_sinks() -> None:
    from ray_harness.runtime._runs import RunReporter  # imports this module

    _state["sink"] = harness_metrics.add_sink(RayMetricsSink())
    _state["runs"] = harness_metrics.add_sink(RunReporter())


def flush_metrics() -> None:
    """Hand this process's buffered harness metrics to Ray now (before the actor is killed, for example)."""
    for key in ("sink", "runs"):
        sink = _state.get(key)
        if sink is not None:
            sink.flush()


FLUSH_HOSTS_TIMEOUT_S = 5.0
"""How long :func:`flush_hosts` waits for the hosts' answers (a host that is gone or busy is not waited for)."""


async def flush_hosts(hosts: Sequence[Any], names: Sequence[str], *, timeout_s: float = FLUSH_HOSTS_TIMEOUT_S
                      ) -> None:
    """Publish now what this process and the host actors ``hosts`` (named ``names``) recorded: metrics, run records.

    A host publishes its run records once a second, and not at all when it is killed first: hosts die with the
    driver that started them (a Ray Job's driver exits right after its evaluation's summary). One call per host,
    concurrently; returns once each answered (its records are in the GCS) or after ``timeout_s``.
    """
    from ray_harness.runtime._client import ActorClient  # imports this module

    flush_metrics()
    calls = [ActorClient(host, name).call("flush_metrics") for host, name in zip(hosts, names, strict=True)]
    try:
        outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), timeout_s)
    except TimeoutError:
        logger.warning("timeout_s=<%s> | hosts did not publish their metrics in time", timeout_s)
        return
    for name, outcome in zip(names, outcomes, strict=True):
        if isinstance(outcome, Exception):  # status is best effort: a host that is gone has nothing more to say
            logger.warning("host=<%s>, error=<%s> | could not publish the host's metrics", name, outcome)


def flush_spans() -> None:
    """Export the spans this process has ended so far (its process may be killed right after a run)."""
    from ray_harness.telemetry.config import tracing_enabled

    if not tracing_enabled():
        return
    from opentelemetry import trace

    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush is not None:
        flush(2000)
