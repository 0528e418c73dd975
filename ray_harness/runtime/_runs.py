"""What runs are doing right now, cluster-wide: the data behind ``ray-harness status``.

Every process that records harness metrics on Ray (orchestrator actors, pooled hosts, agent actors, the
driver of an evaluation) also has a :class:`RunReporter` sink. It folds what the run and node scopes of
:mod:`ray_harness.telemetry.runs` report (a run started, a node started or finished, a model call's
tokens and cost, an evaluation row) into per-run deltas and sends them, once a second and only when
something changed, to one detached actor per cluster, :class:`RunRegistry` (``ray_harness:runs`` in
namespace ``ray_harness``). The registry merges the deltas — a graph's nodes come from its orchestrator,
its tokens from the hosts that ran the nodes — and keeps finished runs for :data:`KEEP_FINISHED_S`.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from typing import Any

import ray

from ray_harness.runtime._telemetry import job_id
from ray_harness.telemetry.metrics import BaseSink
from ray_harness.telemetry.runs import current_tags

__all__ = ("REGISTRY_NAME", "RunRegistry", "RunReporter", "runs_snapshot")

logger = logging.getLogger(__name__)

REGISTRY_NAME = "ray_harness:runs"
REGISTRY_NAMESPACE = "ray_harness"
KEEP_FINISHED_S = 600.0
_FLUSH_INTERVAL_S = 1.0


class RunRegistry:
    """The merged state of runs (plain class; ``ray.remote`` in :func:`_registry`)."""

    def __init__(self) -> None:
        self._runs: dict[str, dict[str, Any]] = {}

    def report(self, deltas: list[dict[str, Any]]) -> None:
        now = time.time()
        for delta in deltas:
            run = self._runs.setdefault(delta["run"], _empty_run(delta["run"]))
            for key in ("kind", "name", "started_at", "ended_at", "status", "job"):
                if delta.get(key) is not None:
                    run[key] = delta[key]
            run["nodes_total"] = max(run["nodes_total"], int(delta.get("nodes_total") or 0))
            run["nodes_running"] = sorted((set(run["nodes_running"]) | set(delta.get("nodes_started", ())))
                                          - set(delta.get("nodes_finished", {})))
            run["nodes_done"].update(delta.get("nodes_finished", {}))
            for key in ("input_tokens", "output_tokens", "cost_usd", "rows_completed", "rows_failed"):
                run[key] += delta.get(key, 0)
            run["updated_at"] = now
        self._forget(now)

    def snapshot(self) -> list[dict[str, Any]]:
        """Runs with a known kind (a Graph, Swarm or evaluation), newest first; ``age_s`` computed now."""
        now = time.time()
        self._forget(now)
        shown = []
        for run in self._runs.values():
            if run["kind"] is None:  # only tokens seen so far (an agent invocation, or a run not reported yet)
                continue
            nodes_done = len(run["nodes_done"])
            pending = max(0, run["nodes_total"] - nodes_done - len(run["nodes_running"])) \
                if run["status"] == "running" else 0
            shown.append({**run, "nodes_done": dict(run["nodes_done"]), "nodes_pending": pending,
                          "age_s": round((run["ended_at"] or now) - (run["started_at"] or now), 3)})
        return sorted(shown, key=lambda run: run["started_at"] or 0, reverse=True)

    def _forget(self, now: float) -> None:
        stale = [key for key, run in self._runs.items()
                 if (run["ended_at"] or (run["kind"] is None and run["updated_at"])) and
                 now - (run["ended_at"] or run["updated_at"]) > KEEP_FINISHED_S]
        for key in stale:
            del self._runs[key]


def _empty_run(run: str) -> dict[str, Any]:
    return {"run": run, "kind": None, "name": None, "status": "running", "job": None, "started_at": None,
            "ended_at": None, "updated_at": None, "nodes_total": 0, "nodes_running": [], "nodes_done": {},
            "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "rows_completed": 0, "rows_failed": 0}


class RunReporter(BaseSink):
    """A metrics sink that reports run progress to the :class:`RunRegistry` (batched, once a second)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deltas: dict[str, dict[str, Any]] = {}
        self._registry: Any = None
        self._job = job_id() or None
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._flush_periodically, name="ray_harness-runs", daemon=True)
        self._thread.start()
        atexit.register(self.flush)

    def _delta(self, run: str) -> dict[str, Any]:
        delta = self._deltas.get(run)
        if delta is None:
            delta = self._deltas[run] = {"run": run}
        return delta

    # -- MetricsSink (agent-level: only the tokens and cost a run's progress needs) --------------------------

    def model_call(self, agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
        run = current_tags().get("run")
        if not run:
            return
        with self._lock:
            delta = self._delta(run)
            delta["input_tokens"] = delta.get("input_tokens", 0) + int(usage.get("inputTokens", 0))
            delta["output_tokens"] = delta.get("output_tokens", 0) + int(usage.get("outputTokens", 0))
            delta["cost_usd"] = delta.get("cost_usd", 0.0) + cost_usd

    # -- run-level ------------------------------------------------------------------------------------------

    def run_started(self, run: str, kind: str, name: str, nodes: int) -> None:
        with self._lock:
            self._delta(run).update(kind=kind, name=name, nodes_total=nodes, started_at=time.time(),
                                    status="running", job=self._job)

    def run_finished(self, run: str, kind: str, name: str, status: str) -> None:
        with self._lock:
            self._delta(run).update(status=status, ended_at=time.time())
        # Sent now, not with the next tick: the process may be gone by then (a Graph's orchestrator actor is
        # killed with graph.shutdown(), a driver exits after its evaluation). By the flushing thread: the
        # first report looks the registry up in the GCS, which must not block the run's event loop.
        self._wake.set()

    def node_started(self, run: str, node: str) -> None:
        with self._lock:
            self._delta(run).setdefault("nodes_started", []).append(node)

    def node_finished(self, run: str, node: str, status: str, duration_s: float) -> None:
        with self._lock:
            self._delta(run).setdefault("nodes_finished", {})[node] = status

    def eval_row(self, run: str, name: str, status: str, total: int) -> None:
        key = "rows_failed" if status == "failed" else "rows_completed"
        with self._lock:
            delta = self._delta(run)
            delta[key] = delta.get(key, 0) + 1

    # -- sending --------------------------------------------------------------------------------------------

    def flush(self) -> None:
        with self._lock:
            deltas, self._deltas = list(self._deltas.values()), {}
        if not deltas or not ray.is_initialized():
            return
        if self._registry is None:
            self._registry = _registry()
        self._registry.report.remote(deltas)

    def _flush_periodically(self) -> None:
        while True:
            self._wake.wait(_FLUSH_INTERVAL_S)
            self._wake.clear()
            try:
                self.flush()
            except Exception as error:  # status is best effort: it must never disturb a run
                self._registry = None
                logger.warning("error=<%s> | could not report run progress", error)


def _registry() -> Any:
    actor_class = ray.remote(num_cpus=0, max_restarts=-1)(RunRegistry)
    return actor_class.options(name=REGISTRY_NAME, namespace=REGISTRY_NAMESPACE, lifetime="detached",
                               get_if_exists=True).remote()


def runs_snapshot() -> list[dict[str, Any]]:
    """The registry's runs (empty when no run was ever reported on this cluster)."""
    try:
        registry = ray.get_actor(REGISTRY_NAME, namespace=REGISTRY_NAMESPACE)
    except ValueError:
        return []
    return list(ray.get(registry.snapshot.remote(), timeout=30))

