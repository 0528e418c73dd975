"""What runs are doing right now, cluster-wide: the data behind ``ray-harness status``.

Every process that records harness metrics on Ray (orchestration hosts, pooled hosts, agent actors, the
driver of an evaluation) also has a :class:`RunReporter` sink. It keeps what the run and node scopes of
:mod:`ray_harness.telemetry.runs` tell it (a run started or ended, a node started or finished, a model
call's tokens and cost, an evaluation row) per run, and writes that record, once a second and only when
something changed, to the GCS key-value store under its own key (one per process, namespace
``ray_harness_runs``). Each record is JSON-encoded once per change, not at every write, and stays as large as
its run has nodes: a node's executions in flight are counted, not listed (an evaluation's rows run the same
nodes thousands of times). No actor is needed (an actor costs a process, ≈1 s to start). :func:`runs_snapshot`
merges the records of all processes — a graph's nodes come from its orchestrator, its tokens from the
hosts that ran them. Runs stay listed for :data:`KEEP_FINISHED_S` after they ended or went quiet.

A process that may go away right after a run publishes at its end rather than with the next tick: a run's
outermost scope wakes the writer when it ends, and an orchestrator or a host about to be killed flushes
(:func:`~ray_harness.runtime._telemetry.flush_metrics`). An evaluation's rows run on pooled hosts that see no
end of it, and die with their driver (a Ray Job's driver exits right after its summary): so an evaluation on
Ray asks its hosts to flush before it returns (``RayBackend.close``,
:func:`~ray_harness.runtime._telemetry.flush_hosts`), one call per host, after its last row.

**Cancel from outside** (``ray-harness cancel``). A run whose outermost scope was given a way to stop it
(Graphs, Swarms, evaluations: :func:`~ray_harness.telemetry.runs.cancel_run`) is published ``"cancellable"``.
:func:`request_cancel` writes a request under the run's id (namespace ``ray_harness_cancel``); the reporter of
the process that holds the run's outermost scope — the orchestration host of a Graph/Swarm started with
``runtime="ray"``, the driver of an evaluation or of an in-process run — looks for requests on each tick while it
has cancellable runs (one GCS call), deletes the one for its run and stops the run as its owner's ``cancel()``
does: a graph's stop is the one broadcast ``graph.cancel()`` sends, to every node of the run at once, and the
driver's call returns the CANCELLED result. A request nobody takes (the process is gone) is withdrawn by its
sender (:func:`withdraw_cancel`) or expires after :data:`KEEP_FINISHED_S`.

A run's kind, name and status are its outermost scope's (``run_started`` / ``run_finished``): a graph run inside
it — a graph per evaluation row on a host, a graph as a node — shares its id and only adds tokens and its own nodes
(listed as ``"<graph>/<node>"``, apart from the run's), so an evaluation of graph rows is one ``eval`` run, running
until its driver ends it.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
from typing import Any

import ray
from ray.experimental import internal_kv

from ray_harness.runtime._telemetry import job_id
from ray_harness.telemetry.metrics import BaseSink
from ray_harness.telemetry.runs import cancel_run, cancellable_runs, current_owner, current_tags

__all__ = ("KEEP_FINISHED_S", "RunReporter", "cancel_pending", "merge_records", "published", "request_cancel",
           "runs_snapshot", "withdraw_cancel")

logger = logging.getLogger(__name__)

KV_NAMESPACE = "ray_harness_runs"
CANCEL_NAMESPACE = "ray_harness_cancel"  # run id -> a pending cancel request (JSON: when it was made)
KEEP_FINISHED_S = 600.0
_FLUSH_INTERVAL_S = 1.0
_SUMMED = ("input_tokens", "output_tokens", "cost_usd", "rows_completed", "rows_failed")
# "cancellable": only the record of the process holding the run's outermost scope says (see request_cancel).
_FIRST = ("kind", "name", "job", "started_at", "ended_at", "cancellable")


class RunReporter(BaseSink):
    """A metrics sink that publishes this process's view of each run to the GCS (batched, once a second)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Held across a write to the GCS: a flush returns once what was recorded before it is published, and an
        # older record never overwrites a newer one (the flushing thread and an explicit flush may overlap).
        self._publishing = threading.Lock()
        self._runs: dict[str, dict[str, Any]] = {}
        self._encoded: dict[str, str] = {}  # run -> its record's JSON, as last published (unchanged since)
        self._changed = False
        self._key = f"{ray.get_runtime_context().get_worker_id()}".encode()
        self._job = job_id() or None
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._flush_periodically, name="ray_harness-runs", daemon=True)
        self._thread.start()
        atexit.register(self.flush)

    def _run(self, run: str) -> dict[str, Any]:
        """Return the record of ``run`` to update (the caller holds the lock)."""
        record = self._runs.get(run)
        if record is None:
            record = self._runs[run] = {"run": run, "nodes_running": {}, "nodes_finished": {}, "inner_running": {},
                                        "inner_finished": {}, **dict.fromkeys(_SUMMED, 0)}
        record["updated_at"] = time.time()
        self._encoded.pop(run, None)
        self._changed = True
        return record

    # -- MetricsSink (agent-level: only the tokens and cost a run's progress needs) ---------------------------

    def model_call(self, agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
        run = current_tags().get("run")
        if not run:
            return
        with self._lock:
            record = self._run(run)
            record["input_tokens"] += int(usage.get("inputTokens", 0))
            record["output_tokens"] += int(usage.get("outputTokens", 0))
            record["cost_usd"] += cost_usd

    # -- run-level ------------------------------------------------------------------------------------------

    def run_started(self, run: str, kind: str, name: str, nodes: int) -> None:
        job = current_tags().get("job")
        with self._lock:
            # The job of the driver that started the run (it came with the call), else this process's own.
            self._run(run).update(kind=kind, name=name, nodes_total=nodes, started_at=time.time(), status="running",
                                  job=job or self._job, cancellable=run in cancellable_runs())

    def run_finished(self, run: str, kind: str, name: str, status: str) -> None:
        with self._lock:
            self._run(run).update(status=status, ended_at=time.time())
        # Written now, not with the next tick: the process may be gone by then (a Graph's orchestrator actor
        # is killed with graph.shutdown(), a driver exits after its evaluation). By the flushing thread: a
        # GCS write must not block the run's event loop.
        self._wake.set()

    def node_started(self, run: str, node: str) -> None:
        with self._lock:
            key, running, _ = _node_entry(self._run(run), node)
            # How many executions of the node run now (an evaluation's rows run the same nodes many times over):
            # the record stays as large as the run has nodes, however many rows or revisits it has.
            running[key] = running.get(key, 0) + 1

    def node_finished(self, run: str, node: str, status: str, duration_s: float) -> None:
        with self._lock:
            key, running, finished = _node_entry(self._run(run), node)
            finished[key] = status
            count = running.get(key, 0) - 1
            if count > 0:
                running[key] = count
            else:
                running.pop(key, None)

    def eval_row(self, run: str, name: str, status: str, total: int) -> None:
        with self._lock:
            self._run(run)["rows_failed" if status == "failed" else "rows_completed"] += 1

    # -- publishing -----------------------------------------------------------------------------------------

    def flush(self) -> None:
        """Publish this process's records now, if they changed; return once they are in the GCS."""
        with self._publishing:
            with self._lock:
                if not self._changed:
                    return
                now = time.time()
                for run in [key for key, record in self._runs.items() if now - record["updated_at"] > KEEP_FINISHED_S]:
                    del self._runs[run]
                    self._encoded.pop(run, None)
                payload = published(now, self._runs, self._encoded)
                self._changed = False
            if ray.is_initialized():
                internal_kv._internal_kv_put(self._key, payload, overwrite=True, namespace=KV_NAMESPACE)

    def take_cancels(self) -> list[str]:
        """Stop the runs of this process that ``ray-harness cancel`` asked to stop; return their ids.

        One GCS call, and only while this process holds cancellable runs (an orchestration host running a graph,
        the driver of an evaluation).
        """
        mine = cancellable_runs()
        if not mine or not ray.is_initialized():
            return []
        taken = []
        for key in internal_kv._internal_kv_list(b"", namespace=CANCEL_NAMESPACE):
            run = key.decode()
            if run in mine:
                # Deleted first: the sender sees the request taken, and a second tick does not cancel twice.
                internal_kv._internal_kv_del(key, namespace=CANCEL_NAMESPACE)
                if cancel_run(run):
                    logger.info("run=<%s> | cancelled by a request from outside (ray-harness cancel)", run)
                    taken.append(run)
        return taken

    def _flush_periodically(self) -> None:
        while True:
            self._wake.wait(_FLUSH_INTERVAL_S)
            self._wake.clear()
            try:
                self.take_cancels()
            except Exception as error:  # best effort, as status: it must never disturb a run
                logger.warning("error=<%s> | could not look for cancel requests", error)
            try:
                self.flush()
            except Exception as error:  # status is best effort: it must never disturb a run
                logger.warning("error=<%s> | could not publish run progress", error)


def _node_entry(record: dict[str, Any], node: str) -> tuple[str, dict[str, int], dict[str, str]]:
    """Where a node of the current scope goes in ``record``: its key, its running counts and its finished statuses.

    A node of a graph run inside the record's run (a graph as a node, a graph per evaluation row) is no node of the
    run itself: it goes to the inner tables as ``"<graph>/<node>"``.
    """
    owner = current_owner()
    if owner and owner != record.get("name"):
        return f"{owner}/{node}", record["inner_running"], record["inner_finished"]
    return node, record["nodes_running"], record["nodes_finished"]


def published(now: float, runs: dict[str, dict[str, Any]], encoded: dict[str, str]) -> str:
    """``json.dumps({"updated_at": now, "runs": list(runs.values())})``, reusing ``encoded[run]`` where present.

    ``encoded`` gains the encodings it lacked; the caller drops a run's entry whenever its record changes.
    """
    parts = []
    for run, record in runs.items():
        text = encoded.get(run)
        if text is None:
            text = encoded[run] = json.dumps(record)
        parts.append(text)
    return f'{{"updated_at": {json.dumps(now)}, "runs": [{", ".join(parts)}]}}'


def merge_records(records: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """One entry per run from the records of every process; runs of an unknown kind (tokens only) left out."""
    merged: dict[str, dict[str, Any]] = {}
    for record in records:
        run = merged.setdefault(record["run"], {"run": record["run"], "status": "running", "nodes_total": 0,
                                                "running": set(), "finished": {}, "inner_running": set(),
                                                "inner_finished": {}, **dict.fromkeys(_SUMMED, 0),
                                                **dict.fromkeys(_FIRST)})
        for key in _FIRST:
            if run[key] is None and record.get(key) is not None:
                run[key] = record[key]
        if record.get("status") and record["status"] != "running":
            run["status"] = record["status"]
        run["nodes_total"] = max(run["nodes_total"], int(record.get("nodes_total") or 0))
        run["running"] |= set(record["nodes_running"])
        run["finished"].update(record["nodes_finished"])
        run["inner_running"] |= set(record.get("inner_running", ()))
        run["inner_finished"].update(record.get("inner_finished", {}))
        for key in _SUMMED:
            run[key] += record[key]
    shown = []
    for run in merged.values():
        if run["kind"] is None:
            continue
        finished, running = run.pop("finished"), run.pop("running")
        inner_finished, inner_running = run.pop("inner_finished"), run.pop("inner_running")
        # The nodes of inner graphs are listed as "<graph>/<node>" beside the run's own, and count for nothing else.
        run["nodes_done"] = {**finished, **inner_finished}
        run["nodes_running"] = sorted(running | inner_running) if run["status"] == "running" else []
        # A node running again (a revisit, the next row) counts once, as running.
        run["nodes_pending"] = max(0, run["nodes_total"] - len(set(finished) | running)) \
            if run["status"] == "running" else 0
        run["age_s"] = round((run["ended_at"] or now) - (run["started_at"] or now), 3)
        run["cancellable"] = bool(run["cancellable"])
        shown.append(run)
    return sorted(shown, key=lambda run: run["started_at"] or 0, reverse=True)


def runs_snapshot() -> list[dict[str, Any]]:
    """Return the runs of the connected cluster, merged from every process's record; stale records are removed."""
    now = time.time()
    records: list[dict[str, Any]] = []
    for key in internal_kv._internal_kv_list(b"", namespace=KV_NAMESPACE):
        raw = internal_kv._internal_kv_get(key, namespace=KV_NAMESPACE)
        if raw is None:
            continue
        published = json.loads(raw)
        if now - published["updated_at"] > KEEP_FINISHED_S:  # the process went quiet or away long ago
            internal_kv._internal_kv_del(key, namespace=KV_NAMESPACE)
            continue
        records.extend(published["runs"])
    return merge_records(records, now)


def request_cancel(run: str) -> None:
    """Ask the process that holds run ``run`` to cancel it (taken within a second, see :meth:`RunReporter.take_cancels`).

    Requests older than :data:`KEEP_FINISHED_S` (their sender went away before the run's process did) are dropped
    first: the runs' processes list the pending requests at every tick.
    """
    now = time.time()
    for key in internal_kv._internal_kv_list(b"", namespace=CANCEL_NAMESPACE):
        raw = internal_kv._internal_kv_get(key, namespace=CANCEL_NAMESPACE)
        if raw is None or now - float(json.loads(raw).get("requested_at", 0)) > KEEP_FINISHED_S:
            internal_kv._internal_kv_del(key, namespace=CANCEL_NAMESPACE)
    internal_kv._internal_kv_put(run.encode(), json.dumps({"requested_at": now}), overwrite=True,
                                 namespace=CANCEL_NAMESPACE)


def cancel_pending(run: str) -> bool:
    """Whether the cancel request for ``run`` is still waiting to be taken by the run's process."""
    return bool(internal_kv._internal_kv_exists(run.encode(), namespace=CANCEL_NAMESPACE))


def withdraw_cancel(run: str) -> bool:
    """Withdraw a cancel request nobody took; True if it was still there."""
    return bool(internal_kv._internal_kv_del(run.encode(), namespace=CANCEL_NAMESPACE))
