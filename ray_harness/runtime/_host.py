"""``AgentHost``: one async actor serving many agent runs at once (the pooled half of the protocol).

A new actor costs ≈1 s and ≈50 MB, so one actor per agent run does not scale to graphs, swarms and
evaluations. A host (``max_concurrency`` 1000 by default) holds any number of agents keyed by run id
(ephemeral: built for one run, dropped after it) or by ``agent_key`` (resident: built once, kept with its
history, its runs queued in order), each in an :class:`~ray_harness.runtime._runner.AgentRunner`. Agent runs
are I/O-bound (model calls), so hundreds run concurrently in one process; sync tools run in threads.

Messages (typed requests of :mod:`ray_harness.runtime._wire`): ``run`` and ``stream`` (one
:class:`~ray_harness.runtime._wire.InvokeRequest`), ``run_batch`` (many, results back in groups), ``cancel``
(a :class:`~ray_harness.runtime._wire.CancelRequest`, in the control group), ``release``, ``resident_messages``,
``stats``. Hosts do not journal runs: a run that loses its process fails with ``RemoteActorError``.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import gc
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from typing import Any

import ray

from ray_harness.agent.result import AgentResult
from ray_harness.evaluation._records import SPENT_ATTRIBUTE, mark_spent
from ray_harness.models.rate_limit import register_rate_limits
from ray_harness.runtime._runner import AgentRunner
from ray_harness.runtime._spec import AgentSpec, cloudpickle
from ray_harness.runtime._telemetry import flush_metrics
from ray_harness.runtime._wire import CancelRequest, EventItem, InvokeRequest, ResultItem, SnapshotItem

__all__ = ("HOST_ACTOR_PREFIX", "AgentHost", "host_actor_name", "host_class")

HOST_ACTOR_PREFIX = "ray_harness:host:"
_CONTROL_GROUP = "control"
# cancel (and stats) run in their own group: never queued behind invocations that fill the default group.
_ACTOR_OPTIONS: dict[str, Any] = {"concurrency_groups": {_CONTROL_GROUP: 4}}
_KEPT_EARLY_CANCELS = 10_000


def host_actor_name(index: int) -> str:
    """Return the name of the pool's host number ``index`` (``ray_harness:host:<index>``)."""
    return f"{HOST_ACTOR_PREFIX}{index}"


class AgentHost:
    """The host actor class (plain; ``ray.remote`` is applied in :func:`host_class`).

    Args:
        index: The host's number in its pool.

    """

    def __init__(self, index: int) -> None:
        _tune_gc()
        self._index = index
        self._runs: dict[str, AgentRunner] = {}
        self._resident: dict[str, AgentRunner] = {}
        self._early: OrderedDict[str, None] = OrderedDict()  # cancels that overtook their run
        self._guard = threading.Lock()  # cancel() runs on the control group's thread

    async def ready(self) -> dict[str, Any]:
        """Return the host's index and process id, once it is up."""
        return {"index": self._index, "pid": os.getpid()}

    def _runner_for(self, spec: AgentSpec, agent_key: str | None) -> AgentRunner:
        if agent_key is None:
            return AgentRunner(spec.build(), mode="throw")
        runner = self._resident.get(agent_key)
        if runner is None:
            runner = self._resident[agent_key] = AgentRunner(spec.build(), mode="queue")
        return runner

    def _register(self, run_id: str, runner: AgentRunner) -> None:
        with self._guard:
            if run_id in self._runs:
                raise ValueError(f"run id {run_id!r} is already running on host {self._index}")
            self._runs[run_id] = runner
            if run_id in self._early:
                del self._early[run_id]
                runner.cancel(run_id)  # recorded by the runner; the run starts cancelled

    def _unregister(self, run_id: str) -> None:
        with self._guard:
            self._runs.pop(run_id, None)

    async def run(self, request: InvokeRequest, spec: AgentSpec) -> AgentResult:
        """Run one agent invocation (built from ``spec`` unless resident) and return its result."""
        runner = self._runner_for(spec, request.agent_key)
        self._register(request.invocation_id, runner)
        try:
            return await runner.invoke(request)
        except Exception as error:
            mark_spent(error, runner.agent)  # a failed run's tokens were billed: its caller accounts for them
            raise
        finally:
            self._unregister(request.invocation_id)

    async def stream(self, request: InvokeRequest, spec: AgentSpec
                     ) -> AsyncGenerator[EventItem | ResultItem | SnapshotItem, None]:
        """Run one agent invocation; its events as wire items (the last a ``ResultItem``)."""
        runner = self._runner_for(spec, request.agent_key)
        self._register(request.invocation_id, runner)
        try:
            async for item in runner.wire_stream(request):
                yield item
        finally:
            self._unregister(request.invocation_id)

    async def run_batch(self, spec: AgentSpec, requests: list[InvokeRequest],
                        digest: Callable[[Any], Any] | None = None
                        ) -> AsyncGenerator[list[tuple[str, bool, bytes, Any]], None]:
        """Run ``requests`` concurrently, as :meth:`run` each.

        Yields groups of finished runs, ``(run_id, ok, pickled result or exception, what a failed run spent)``:
        whatever finished while the previous group was being sent, so a batch costs a few Ray messages instead
        of one call per run. Each outcome is pickled on its own, so one unpicklable result fails only its run.
        With ``digest``, ``digest(result)`` travels instead of the result.
        """
        finished: collections.deque[tuple[str, asyncio.Task[Any]]] = collections.deque()
        wakeup = asyncio.Event()
        tasks: list[asyncio.Task[Any]] = []
        for request in requests:
            task = asyncio.ensure_future(self.run(request, spec))
            task.add_done_callback(functools.partial(_collect, finished, wakeup, request.invocation_id))
            tasks.append(task)
        try:
            remaining = len(tasks)
            while remaining:
                await wakeup.wait()
                wakeup.clear()
                group = [_outcome(run_id, task, digest) for run_id, task in finished]
                finished.clear()
                remaining -= len(group)
                yield group
        finally:
            for task in tasks:
                task.cancel()  # the caller went away: its runs stop with it

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def cancel(self, request: CancelRequest) -> int:
        """Cancel the request's runs (all runs when it names none); ids not running yet start cancelled."""
        with self._guard:
            targets = list(self._runs) if request.invocation_ids is None else list(request.invocation_ids)
            found = [(run_id, self._runs.get(run_id)) for run_id in targets]
            for run_id, runner in found:
                if runner is None:
                    self._early[run_id] = None
            while len(self._early) > _KEPT_EARLY_CANCELS:
                self._early.popitem(last=False)
        return sum(runner.cancel(run_id, message=request.message, after_current_tools=request.after_current_tools)
                   for run_id, runner in found if runner is not None)

    async def release(self, agent_key: str) -> bool:
        """Drop a resident agent (its history goes with it)."""
        return self._resident.pop(agent_key, None) is not None

    async def resident_messages(self, agent_key: str) -> list[Any]:
        """Return the history of a resident agent."""
        runner = self._resident.get(agent_key)
        if runner is None:
            raise KeyError(f"no resident agent {agent_key!r} on host {self._index}")
        return runner.agent.messages

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def register_rate_limits(self, limits: dict[str, Any]) -> None:
        """Limit models by key in this process (see ``ray_harness.models.rate_limit``)."""
        register_rate_limits(limits)

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def flush_metrics(self) -> None:
        """Hand buffered metrics to Ray now."""
        flush_metrics()

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def stats(self) -> dict[str, Any]:
        """Index, process id, running runs, resident agents, resident set size in bytes."""
        return {"index": self._index, "pid": os.getpid(), "running": len(self._runs),
                "resident": len(self._resident), "rss_bytes": _rss_bytes()}


_HOST_GC_YOUNG = 300_000
_HOST_GC_MIDDLE = 20


def _tune_gc() -> None:
    """Collect the youngest generation once 300,000 more containers are alive than after the last collection.

    A host keeps hundreds of runs in flight; their objects live for a model call or more, so with the
    default threshold (700) they survive young collections, reach the oldest generation and trigger full
    collections over everything alive: a third of a host's CPU in the P2 benchmark. The count is net of
    objects freed by reference counting (which frees a whole finished run: the core avoids reference
    cycles), so a host at a steady load rarely collects at all; at 10,000 collections still took a quarter
    of the CPU of a 1,000-row evaluation. The price is up to ≈300,000 unreachable cycles' worth of memory
    before they are found. Objects from start-up (modules, Ray) are frozen out of collections.
    """
    young, middle, old = gc.get_threshold()
    if 0 < young < _HOST_GC_YOUNG:
        gc.set_threshold(_HOST_GC_YOUNG, max(middle, _HOST_GC_MIDDLE), old)
    gc.freeze()


def _collect(finished: collections.deque[tuple[str, asyncio.Task[Any]]], wakeup: asyncio.Event, run_id: str,
             task: asyncio.Task[Any]) -> None:
    finished.append((run_id, task))
    wakeup.set()


def _outcome(run_id: str, task: asyncio.Task[Any], digest: Callable[[Any], Any] | None
             ) -> tuple[str, bool, bytes, Any]:
    """One finished run of a batch, pickled: its result, or the exception the caller should see.

    What a failed run spent travels beside its exception (an exception's own pickling may drop attributes).
    """
    error: BaseException
    if task.cancelled():
        error = asyncio.CancelledError(f"run {run_id!r} was cancelled")
    else:
        exception = task.exception()
        if exception is None:
            try:
                result = task.result()
                return run_id, True, cloudpickle.dumps(result if digest is None else digest(result)), None
            except Exception as pickling:  # as a single run: a result that cannot leave the host fails its run
                error = TypeError(f"the result of run {run_id!r} could not be returned: {pickling}")
        else:
            error = exception
    spent = getattr(error, SPENT_ATTRIBUTE, None)
    try:
        return run_id, False, cloudpickle.dumps(error), spent
    except Exception:
        return run_id, False, cloudpickle.dumps(RuntimeError(f"{type(error).__name__}: {error}")), spent


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


@functools.cache
def host_class() -> Any:
    """``AgentHost`` as a Ray actor class."""
    return ray.remote(**_ACTOR_OPTIONS)(AgentHost)
