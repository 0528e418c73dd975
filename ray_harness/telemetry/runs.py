"""Which run, graph or swarm, node and job some work belongs to: the tags of metrics and the progress of runs.

:func:`run_scope` (a Graph/Swarm invocation or an evaluation) and :func:`node_scope` (one node execution)
set context variables that every metric recorded inside them is tagged with (``run``, ``graph`` or
``swarm`` or ``eval``, ``node``). They travel across actor calls with the trace context
(:mod:`ray_harness.telemetry.propagation`), so a pooled host's model calls carry the tags of the graph
node that sent them. On enter and exit the scopes report to the metric sinks (``runs_active``,
``node_duration_s``; the Ray runtime also feeds ``ray-harness status`` from them).

``job`` travels the same way: a call leaves with the job of the work that makes it — the one it received, else
the calling process's own (:func:`set_job_source`; on Ray the driver's job id) — so the work a driver causes in
actors another driver started (a named detached RemoteAgent, shared pooled hosts) counts for the driver that
caused it. :func:`current_job` says which job the current work is for.

A run whose owner gave a way to stop it (``run_scope(..., cancel=graph.cancel)``: Graphs, Swarms and evaluations
do) is *cancellable* from outside the code that started it: :func:`cancel_run` (what ``ray-harness cancel`` reaches,
through the Ray runtime's run reporter) calls it on the run's event loop while the run's outermost scope is open.

Cardinality: ``graph``, ``swarm``, ``eval`` and ``node`` take the ids of your graphs, swarms, evaluations
and nodes (bounded by your code), ``job`` one value per driver; ``run`` takes one value per invocation
(unbounded over time: Prometheus keeps one series per run). ``RAY_HARNESS_METRICS_RUN_TAGS=0`` leaves ``run``
empty on every metric.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ray_harness.telemetry import metrics

__all__ = ("TAG_KEYS", "cancel_run", "cancellable_runs", "current_job", "current_owner", "current_row", "current_tags",
           "eval_row_finished", "metric_tags", "node_scope", "outcome_status", "own_job", "row_scope", "run_scope",
           "run_tags_enabled", "scoped", "set_job_source", "task_label")

TAG_KEYS = ("run", "graph", "swarm", "eval", "node", "job")
_tags: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("ray_harness_metric_tags", default=None)
# The evaluation row being run: it names the row's Ray task, and is no metric tag (one value per row).
_row: contextvars.ContextVar[str | None] = contextvars.ContextVar("ray_harness_row", default=None)
# The name of the innermost run scope entered in this process (tags hold a graph and a swarm key side by side).
_owner: contextvars.ContextVar[str | None] = contextvars.ContextVar("ray_harness_run_owner", default=None)
# This process's own job (``set_job_source``): the runtime registers it; without one there is no job.
_job_source: list[Callable[[], str]] = []
# The outermost runs open in this process that can be stopped from outside: run id -> (stop, the run's event loop).
_cancellers: dict[str, tuple[Callable[[], None], asyncio.AbstractEventLoop | None]] = {}
_cancellers_guard = threading.Lock()  # cancel_run() comes from another thread (the run reporter's)


@functools.cache
def run_tags_enabled() -> bool:
    """Whether metrics carry the run tags (``run``, ``graph``, ``node``, ...).

    ``RAY_HARNESS_METRICS_RUN_TAGS=0`` turns them off (fewer Prometheus series).
    """
    return os.environ.get("RAY_HARNESS_METRICS_RUN_TAGS", "1").lower() not in ("0", "false", "no")


def current_tags() -> dict[str, str]:
    """The tags of the innermost scope (``run``, ``graph``/``swarm``/``eval``, ``node``); empty outside.

    ``job`` is among them only when the work came from another process (see :func:`current_job`).
    """
    return _tags.get() or {}


def set_job_source(source: Callable[[], str] | None) -> None:
    """Say how to find this process's own job (``""``: none); None forgets it. The Ray runtime registers its job id."""
    _job_source[:] = [] if source is None else [source]


def own_job() -> str:
    """This process's own job (``""`` without a job source): its work, when no job came with it, is this job's."""
    return _job_source[0]() if _job_source else ""


def current_job() -> str:
    """The job the current work is for: the one that came with the call that caused it, else :func:`own_job`.

    On Ray that is the id of the driver whose (outermost) call led here, through any number of actor calls.
    """
    return current_tags().get("job") or own_job()


def scoped(tags: dict[str, str]) -> _Scoped:
    """Make ``tags`` (from another process, see propagation) current for the block; keys already set win."""
    return _Scoped(tags)


class _Scoped:
    # A class, not a generator-based context manager: one is entered per call a host runs (per evaluation row).
    __slots__ = ("_tags", "_token")

    def __init__(self, tags: dict[str, str]) -> None:
        self._tags = tags

    def __enter__(self) -> None:
        known = {key: str(value) for key, value in self._tags.items() if key in TAG_KEYS and value}
        self._token = _tags.set({**known, **current_tags()}) if known else None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        if self._token is not None:
            _reset(_tags, self._token)


Outcome = Callable[[], object]
"""What a block that ended without an exception came to: a status (``Status.CANCELLED``, ``"failed"``, ...) or None."""


def run_scope(kind: str, name: str, *, nodes: int = 0, run_id: str | None = None,
              outcome: Outcome | None = None, cancel: Callable[[], None] | None = None) -> _RunScope:
    """One Graph/Swarm invocation (``kind`` ``"graph"``/``"swarm"``) or evaluation (``"eval"``) named ``name``.

    A run nested in another (a graph as a node, a graph per evaluation row) keeps the outer ``run`` id.
    A context manager; entering it yields the run id. ``outcome``, asked when the block ends without an
    exception, gives the run's status: a graph cancelled by ``graph.cancel()``, failed under the "continue"
    policy or stopped for an interrupt returns a result without raising (see :func:`node_scope`).
    ``cancel`` stops the run (``graph.cancel``); given to an outermost scope, it makes the run cancellable by
    :func:`cancel_run` while the scope is open (a nested scope's is not used: the outer run's stop reaches it).
    """
    return _RunScope(kind, name, nodes, run_id, outcome, cancel)


def node_scope(node_id: str, *, outcome: Outcome | None = None) -> _NodeScope:
    """One execution of node ``node_id`` of the current run; records its duration and status on exit.

    The status is ``failed`` or ``cancelled`` when the block raised, else what ``outcome`` returns (the node's
    ``NodeResult.status``: an agent that cancelled itself or stopped for an interrupt raises nothing) if it is
    ``failed``, ``cancelled`` or ``interrupted``, else ``completed``.
    """
    return _NodeScope(node_id, outcome)


class _RunScope:
    # A class, not a generator-based context manager: one is entered per Graph/Swarm invocation (per evaluation
    # row), where the generator's setup costs more than the scope's own work.
    __slots__ = ("_cancel", "_kind", "_name", "_nested", "_nodes", "_outcome", "_owner", "_run", "_run_id", "_token")

    def __init__(self, kind: str, name: str, nodes: int, run_id: str | None, outcome: Outcome | None,
                 cancel: Callable[[], None] | None) -> None:
        self._kind, self._name, self._nodes, self._run_id, self._outcome = kind, name, nodes, run_id, outcome
        self._cancel = cancel

    def __enter__(self) -> str:
        outer = current_tags()
        inherited = outer.get("run")
        self._nested = bool(inherited)  # part of the outer run: its report stays the outer run's
        # 16 random hex digits, as uuid4().hex[:16] gave, at a third of its cost (one run per graph invocation).
        run = self._run = inherited or self._run_id or os.urandom(8).hex()
        tags = dict(outer)  # the outer scope's tags, less its node, with this run's (in the order they were set)
        tags.pop("node", None)
        tags[self._kind] = self._name
        tags["run"] = run
        self._token = _tags.set(tags)
        self._owner = _owner.set(self._name)
        if self._cancel is not None and not self._nested:
            # Before the start is reported: the report says whether the run can be cancelled from outside.
            _register_canceller(run, self._cancel)
        report = metrics.nested_run_started if self._nested else metrics.run_started
        report(run, self._kind, self._name, self._nodes)
        return run

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        _reset(_tags, self._token)
        _reset(_owner, self._owner)
        if self._cancel is not None and not self._nested:
            with _cancellers_guard:
                _cancellers.pop(self._run, None)
        if metrics.live_sinks:  # the status is for the sinks (none in most processes)
            report = metrics.nested_run_finished if self._nested else metrics.run_finished
            report(self._run, self._kind, self._name, _status(kind, self._outcome))


def _register_canceller(run: str, cancel: Callable[[], None]) -> None:
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:  # a scope entered in synchronous code: its stop is called from the caller's thread
        loop = None
    with _cancellers_guard:
        _cancellers[run] = (cancel, loop)


def cancellable_runs() -> frozenset[str]:
    """The ids of the runs open in this process that :func:`cancel_run` can stop (their outermost scope is here)."""
    with _cancellers_guard:
        return frozenset(_cancellers)


def cancel_run(run: str) -> bool:
    """Stop run ``run`` as its owner's ``cancel()`` does (from any thread); False: no such cancellable run here.

    The stop runs on the run's event loop (a Graph's ``cancel()`` expects to be called from it, as in-process code
    does), or in this thread for a run entered without one.
    """
    with _cancellers_guard:
        entry = _cancellers.get(run)
    if entry is None:
        return False
    cancel, loop = entry
    if loop is None:
        cancel()
        return True
    try:
        loop.call_soon_threadsafe(cancel)
    except RuntimeError:  # the loop closed: the run ended meanwhile
        return False
    return True


class _NodeScope:
    __slots__ = ("_node", "_outcome", "_run", "_started", "_token")  # a class for the reason of _RunScope's

    def __init__(self, node_id: str, outcome: Outcome | None) -> None:
        self._node, self._outcome = node_id, outcome

    def __enter__(self) -> None:
        outer = current_tags()
        self._token = _tags.set({**outer, "node": self._node})
        self._run = outer.get("run", "")
        metrics.node_started(self._run, self._node)
        self._started = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        _reset(_tags, self._token)
        if metrics.live_sinks:  # the status and duration are for the sinks (none in most processes: one per node)
            metrics.node_finished(self._run, self._node, _status(kind, self._outcome),
                                  time.perf_counter() - self._started)


@contextlib.contextmanager
def row_scope(row_id: str) -> Iterator[None]:
    """Row ``row_id`` of the current evaluation runs in the block (the Ray task that runs it is named after it)."""
    token = _row.set(str(row_id))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            _row.reset(token)


def current_owner() -> str | None:
    """The name of the innermost run scope (Graph/Swarm id, evaluation name) entered in this process; None outside."""
    return _owner.get()


def current_row() -> str | None:
    """The id of the evaluation row of :func:`row_scope` (None outside one)."""
    return _row.get()


def task_label() -> str:
    """What the current work is, as the dashboard shows its Ray task (``""`` outside a node or a row).

    ``ray_harness.node:<graph or swarm>/<node>`` inside a node, ``ray_harness.row:<eval>/<row>`` inside an
    evaluation row; the innermost wins (a graph run per row names its node tasks by node, a swarm nested in a
    graph by the swarm).
    """
    tags = current_tags()
    graph, swarm = tags.get("graph"), tags.get("swarm")
    # Tags hold a graph and a swarm key side by side; the innermost run scope of this process says which one the
    # node is of. Tags that came from another process carry no owner: the graph is named then.
    innermost = current_owner()
    owner = innermost if innermost is not None and innermost in (graph, swarm) else graph or swarm
    if tags.get("node") and owner:
        return f"ray_harness.node:{owner}/{tags['node']}"
    row = _row.get()
    if row is not None and tags.get("eval"):
        return f"ray_harness.row:{tags['eval']}/{row}"
    return ""


def eval_row_finished(status: str) -> None:
    """A row of the current evaluation (see :func:`run_scope`) ended: ``"completed"`` or ``"failed"``."""
    tags = current_tags()
    metrics.eval_row(tags.get("run", ""), tags.get("eval", ""), status, 0)


def metric_tags(agent: str) -> dict[str, str]:
    """The tags of a metric recorded now: ``agent`` and the current scope (``run`` only when enabled).

    ``job`` is there when the work came with one (:func:`current_tags`); a sink fills in its own process's job
    otherwise (:func:`own_job`).
    """
    tags = {"agent": agent, **current_tags()}
    if not run_tags_enabled():
        tags.pop("run", None)
    return tags


def _reset(var: contextvars.ContextVar[Any], token: contextvars.Token[Any]) -> None:
    # A scope inside an async generator that is closed from another context cannot be reset (and needs not).
    # try/except, not contextlib.suppress: two to three resets per node and per invocation.
    try:
        var.reset(token)
    except ValueError:
        pass


_ENDED_SHORT = frozenset({"failed", "cancelled", "interrupted"})


def outcome_status(outcome: Outcome | None) -> str:
    """The status of a block that ended without an exception (``outcome``: what it came to, or None).

    ``failed``, ``cancelled`` or ``interrupted`` when ``outcome`` says so, else ``completed``.
    """
    told = outcome() if outcome is not None else None
    told = getattr(told, "value", told)  # a Status, or its value
    return told if told in _ENDED_SHORT else "completed"


def _status(kind: type[BaseException] | None, outcome: Outcome | None = None) -> str:
    """How a scope's block ended: ``completed``, ``failed``, ``cancelled`` or ``interrupted``.

    Cancelled: a task cancel, a generator closed, a cancelled result; interrupted: a result waiting for a human.
    """
    if kind is None:
        return outcome_status(outcome)
    if issubclass(kind, asyncio.CancelledError | GeneratorExit):
        return "cancelled"
    return "failed"
