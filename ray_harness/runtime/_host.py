"""``AgentHost``: one async actor serving many agent runs at once (the pooled half of the protocol).

A new actor costs ≈1 s and ≈50 MB, so one actor per agent run does not scale to graphs, swarms and
evaluations. A host (``max_concurrency`` 1000 by default) holds any number of agents keyed by run id
(ephemeral: built for one run, dropped after it) or by ``agent_key`` (resident: built once, kept with its
history, its runs queued in order), each in an :class:`~ray_harness.runtime._runner.AgentRunner`. Agent runs
are I/O-bound (model calls), so hundreds run concurrently in one process; sync tools run in threads.

A dedicated agent (:class:`~ray_harness.runtime.RemoteAgent`) is a host with one slot: the host is created
with a :class:`Slot` (the agent, its concurrency mode, its journal), which stays resident under
:data:`DEDICATED_KEY`; requests for it name that key. Such a slot journals its snapshot at every step (a
restarted actor restores it and continues a re-sent invocation by id); ephemeral pooled runs (evaluation rows,
``AgentPool.run``) that lose their process fail with ``RemoteActorError``.

Graph/Swarm agent nodes are resident **node slots**: a ``stream`` request with ``slot`` set runs in the slot
``agent_key`` (``"<uid>/<node id>"``), shipped with its first request only, journalled from its first tool result
on, dropped by ``release_prefix`` (one Graph/Swarm's slots) or after the idle timeout. The host delegates them to
:class:`~ray_harness.runtime._host_slots.HostSlots` (opening, requests, revisions, the idle sweep; see
:mod:`ray_harness.runtime._host_slots`); their runners are resident runners of the host like any other.

Messages (typed requests of :mod:`ray_harness.runtime._wire`): ``run`` and ``stream`` (one
:class:`~ray_harness.runtime._wire.InvokeRequest`), ``stream_many`` (several streams in one call, their items
multiplexed), ``run_batch`` (many, results back in groups), ``cancel``
(a :class:`~ray_harness.runtime._wire.CancelRequest`, in the control group), ``snapshot``, ``run_as_tool``,
``release``, ``release_prefix``, ``resident_messages``, ``resident_state``, ``slot_info``, ``forget``,
``stats``; and for Graph/Swarm orchestrations (:mod:`ray_harness.runtime._orchestration`): ``orchestrate`` (an
:class:`~ray_harness.runtime._wire.OrchestratorRequest`, streamed), ``cancel_orchestration`` and
``orchestrations``, ``release_orchestrations`` and ``resident_orchestrations`` (all three in the control group).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import gc
import logging
import os
import threading
import warnings
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.experimental import internal_kv

from ray_harness.agent.result import AgentResult
from ray_harness.agent.snapshot import AgentSnapshot
from ray_harness.models.rate_limit import (
    forwarded_rate_limits,
    parse_forwarded,
    register_rate_limits,
    registered_rate_limits,
)
from ray_harness.runtime import _asyncgens as asyncgens, _pickling, _sandbox_owner as sandboxes
from ray_harness.runtime._early import EarlyCancels
from ray_harness.runtime._errors import pickled_error, raise_portable
from ray_harness.runtime._host_slots import HostSlots, RunInFlight, register_when_free
from ray_harness.runtime._idle_gc import idle_collector
from ray_harness.runtime._multiplex import Entry, multiplex
from ray_harness.runtime._orchestration import Orchestrations
from ray_harness.runtime._resident import Residents
from ray_harness.runtime._runner import AgentRunner
from ray_harness.runtime._slots import slot_idle_timeout
from ray_harness.runtime._spec import AgentSpec
from ray_harness.runtime._store import FileAgentStore
from ray_harness.runtime._telemetry import flush_metrics
from ray_harness.runtime._wire import (
    CancelRequest,
    EventItem,
    InvokeRequest,
    OrchestratorRequest,
    ResultItem,
    SlotMissItem,
    SnapshotItem,
    SnapshotRequest,
)
from ray_harness.sandbox import _binding

__all__ = ("DEDICATED_KEY", "HOST_ACTOR_PREFIX", "AgentHost", "Slot", "host_actor_name", "host_class")

logger = logging.getLogger(__name__)

DEDICATED_KEY = "dedicated"
"""The resident key of a dedicated host's one slot."""

HOST_ACTOR_PREFIX = "ray_harness:host:"
ORCHESTRATION_HOST_PREFIX = "ray_harness:orchestrator:"
_CONTROL_GROUP = "control"
# cancel (and stats) run in their own group: never queued behind invocations that fill the default group.
_ACTOR_OPTIONS: dict[str, Any] = {"concurrency_groups": {_CONTROL_GROUP: 4}}
_KEPT_EARLY_CANCELS = 10_000


def host_actor_name(index: int, prefix: str = HOST_ACTOR_PREFIX) -> str:
    """Return the name of the pool's host number ``index`` (``ray_harness:host:<index>``)."""
    return f"{prefix}{index}"


@dataclass(frozen=True)
class Slot:
    """The one agent of a dedicated host (a ``RemoteAgent``), built when the host starts.

    Attributes:
        spec: The agent (by value or factory).
        mode: ``"queue"`` or ``"throw"`` for a call while another runs.
        store_dir: The journal's directory (``None``: the default state directory).
        persist: Journal the agent's snapshot after every message and tool result.

    """

    spec: AgentSpec
    mode: str = "queue"
    store_dir: str | None = None
    persist: bool = True


class AgentHost:
    """The host actor class (plain; ``ray.remote`` is applied in :func:`host_class`).

    Args:
        index: The host's number in its pool (0 for a dedicated host).
        slot: The one agent of a dedicated host (see :class:`Slot`); ``None`` for a pooled host.

    """

    def __init__(self, index: int, slot: Slot | None = None) -> None:
        _tune_gc()
        asyncgens.enable()  # its loops leave async generators unregistered (see _asyncgens)
        self._index = index
        self._runs: dict[str, AgentRunner] = {}
        self._resident: dict[str, AgentRunner] = {}
        self._early = EarlyCancels(_KEPT_EARLY_CANCELS)  # cancels that overtook their run
        self._guard = threading.Lock()  # cancel() runs on the control group's thread
        self._restored = False
        # Graph/Swarm node slots (see _host_slots.py); their runners are in _resident
        self._slots = HostSlots(index, self._resident, self._register, self._unregister, self._drop_resident)
        # Graph/Swarm runs shipped here, and the orchestrators kept between invocations (runtime._resident)
        self._orchestrations = Orchestrations(_run_orchestration, Residents(idle_timeout=slot_idle_timeout()))
        self._calls: collections.Counter[str] = collections.Counter()  # streamed calls served, for stats()
        self._slot_error: Exception | None = None
        if _was_reconstructed():
            _restore_rate_limits()
        # sandboxes: containers carry this actor's id; a restarted host removes those its dead process left
        sandboxes.claim(ray.get_runtime_context().get_actor_id(), reconstructed=_was_reconstructed())
        if slot is not None:
            try:
                self._open_slot(slot)
            except Exception as error:
                # Kept for the first call (RemoteAgent's own, at once): raised there, it reaches the caller as
                # itself. Raised here, Ray would report only "the actor died in its creation task".
                self._slot_error = error

    def _open_slot(self, slot: Slot) -> None:
        context = ray.get_runtime_context()
        store = FileAgentStore(slot.store_dir) if slot.persist else None
        key = f"{context.namespace}/{context.get_actor_name()}"
        runner = AgentRunner(sandboxes.build(slot.spec, sandboxes.resident_holder(DEDICATED_KEY)), mode=slot.mode,
                             store=store, key=key)
        self._resident[DEDICATED_KEY] = runner
        reconstructed = _was_reconstructed()
        if store is not None:
            if reconstructed:
                self._restored = runner.restore()
            else:
                store.delete(key)  # a new actor under an old name must not inherit its snapshot
        if reconstructed and not self._restored:
            runner.restarted_without_journal()

    def _resident_runner(self, agent_key: str | None) -> AgentRunner:
        runner = self._resident.get(agent_key or DEDICATED_KEY)
        if runner is None and agent_key is None and self._slot_error is not None:
            raise self._slot_error
        if runner is None:
            raise KeyError(f"no resident agent {agent_key!r} on host {self._index}")
        return runner

    async def ready(self) -> dict[str, Any]:
        """Return the host's index and process id, once it is up."""
        return {"index": self._index, "pid": os.getpid()}

    def _runner_for(self, spec: AgentSpec | None, agent_key: str | None, run_id: str) -> AgentRunner:
        if agent_key is None:
            if spec is None:
                raise ValueError("a run without an agent_key needs the agent's spec")
            return AgentRunner(sandboxes.build(spec, sandboxes.run_holder(run_id)), mode="throw")
        runner = self._resident.get(agent_key)
        if runner is None:
            if spec is None:
                raise KeyError(f"no resident agent {agent_key!r} on host {self._index}")
            agent = sandboxes.build(spec, sandboxes.resident_holder(agent_key))
            runner = self._resident[agent_key] = AgentRunner(agent, mode="queue")
        return runner

    @staticmethod
    def _holder(request: InvokeRequest) -> str:
        if request.agent_key is None:
            return sandboxes.run_holder(request.invocation_id)
        return sandboxes.resident_holder(request.agent_key)

    def _register(self, run_id: str, runner: AgentRunner) -> None:
        with self._guard:
            if run_id in self._runs:
                raise RunInFlight(f"run id {run_id!r} is already running on host {self._index}")
            self._runs[run_id] = runner
            if self._early.take(run_id):
                runner.cancel(run_id)  # recorded by the runner; the run starts cancelled

    def _unregister(self, run_id: str) -> None:
        with self._guard:
            self._runs.pop(run_id, None)

    async def run(self, request: InvokeRequest, spec: AgentSpec | None = None) -> AgentResult:
        """Run one agent invocation (built from ``spec`` unless resident) and return its result."""
        runner = self._runner_for(spec, request.agent_key, request.invocation_id)
        self._register(request.invocation_id, runner)
        try:
            await _binding.settled(self._holder(request))  # a sandbox still closing from a released holder
            return await runner.invoke(request)
        except Exception as error:
            # Imported on failure only: importing ray_harness.evaluation costs every host process ≈30 ms at start.
            from ray_harness.evaluation._records import mark_spent

            mark_spent(error, runner.agent)  # a failed run's tokens were billed: its caller accounts for them
            raise_portable(error)
            raise
        finally:
            self._unregister(request.invocation_id)
            if request.agent_key is None:  # an ephemeral run's sandboxes are held for the run
                await _binding.release(sandboxes.run_holder(request.invocation_id))

    async def stream(self, request: InvokeRequest, spec: AgentSpec | None = None, *, counted: bool = True
                     ) -> AsyncGenerator[EventItem | ResultItem | SnapshotItem | SlotMissItem, None]:
        """Run one agent invocation; its events as wire items (the last a ``ResultItem``).

        A node slot request (``request.slot``) runs in its resident slot (``HostSlots.stream``, see
        :mod:`ray_harness.runtime._host_slots`).
        """
        if counted:
            self._calls["stream"] += 1
        if request.slot is not None:
            slot_run = self._slots.stream(request, spec)
            try:
                async for slot_item in slot_run:
                    yield slot_item
            except Exception as error:
                raise_portable(error)
                raise
            finally:
                await slot_run.aclose()  # closed by its caller: the run ends before this returns
            return
        runner = self._runner_for(spec, request.agent_key, request.invocation_id)
        if request.agent_key is None:
            self._register(request.invocation_id, runner)
        else:  # a resident agent's run may be sent again while the lost one runs (a RemoteAgent node of a Graph)
            await register_when_free(self._register, request.invocation_id, runner)
        try:
            await _binding.settled(self._holder(request))
            run = runner.wire_stream(request)
            try:
                async for item in run:
                    yield item
            except Exception as error:
                raise_portable(error)
                raise
            finally:
                await run.aclose()
        finally:
            self._unregister(request.invocation_id)
            if request.agent_key is None:
                await _binding.release(sandboxes.run_holder(request.invocation_id))

    async def stream_many(self, requests: list[InvokeRequest], specs: list[AgentSpec | None]
                          ) -> AsyncGenerator[list[Entry], None]:
        """Run ``requests`` concurrently, as :meth:`stream` each (``specs[i]`` with ``requests[i]``), in one call.

        Yields groups of tagged entries (:mod:`ray_harness.runtime._multiplex`): whatever the runs streamed while
        the previous group was being sent, so the nodes of a Graph's batch on this host cost one Ray call and a
        few messages instead of a streamed call each. A run's error travels pickled in its ``ERROR`` entry.
        """
        if len(specs) != len(requests):
            raise ValueError(f"specs: expected {len(requests)} (one per request), got {len(specs)}")
        self._calls["stream_many"] += 1
        self._calls["stream_many_runs"] += len(requests)
        streams = {request.invocation_id: self.stream(request, spec, counted=False)
                   for request, spec in zip(requests, specs, strict=True)}
        if len(streams) != len(requests):
            raise ValueError("requests: invocation ids must be distinct within one call")
        async for group in multiplex(streams, pickled_error):
            self._calls["stream_many_groups"] += 1
            yield group

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
        """Cancel the request's runs; return how many were running.

        A request naming no runs stops what each agent runs now (not the runs queued behind it); ids not
        running yet start cancelled, and so does a named run that is sent again.
        """
        with self._guard:
            if request.invocation_ids is None:  # each agent's running invocation, not the ones queued behind it
                runners = {id(runner): runner for runner in self._runs.values()}
                found: list[tuple[str | None, AgentRunner | None]] = [(None, runner) for runner in runners.values()]
            else:
                found = [(run_id, self._runs.get(run_id)) for run_id in request.invocation_ids]
                # Running ones too: a driver that lost the orchestration host sends the run again under its id, and
                # that send may already wait here for the cancelled run to end (register_when_free).
                for run_id in request.invocation_ids:
                    self._early.remember(run_id)
        return sum(runner.cancel(run_id, message=request.message, after_current_tools=request.after_current_tools)
                   for run_id, runner in found if runner is not None)

    async def snapshot(self, request: SnapshotRequest) -> AgentSnapshot:
        """Return the :class:`~ray_harness.agent.AgentSnapshot` of a resident agent (default: the slot's)."""
        return self._resident_runner(request.agent_key).agent.snapshot()

    async def run_as_tool(self, request: InvokeRequest, preserve_context: bool, turn: dict[str, Any] | None = None
                          ) -> dict[str, Any]:
        """Run one call of a resident agent as a tool of another agent.

        See :func:`ray_harness.runtime.remote_tool.invoke_in_actor`: busy → refused; an interrupted call returns
        its turn; the context is reset unless ``preserve_context``.
        """
        from ray_harness.runtime.remote_tool import invoke_in_actor

        return await invoke_in_actor(self._resident_runner(request.agent_key), request, preserve_context, turn)

    async def slot_info(self, agent_key: str | None = None) -> dict[str, Any]:
        """Return a resident agent's name and id, the process id, whether a journal was restored, tools, busy."""
        runner = self._resident_runner(agent_key)
        agent = runner.agent
        info = {"agent_name": agent.name, "agent_id": agent.agent_id, "description": agent.description,
                "pid": os.getpid(),
                "restored": self._restored, "tool_names": agent.tool_names, "busy": runner.busy}
        info.update(self._slots.info(agent_key, runner))  # a node slot: builds, restores, runs, revision, journal
        return info

    async def resident_state(self, agent_key: str | None = None) -> dict[str, Any]:
        """Return a resident agent's state as a dict."""
        return self._resident_runner(agent_key).agent.state.to_dict()

    async def forget(self, agent_key: str | None = None) -> None:
        """Delete a resident agent's journal and hand buffered metrics to Ray (the actor is about to go)."""
        self._resident_runner(agent_key).forget()
        if agent_key is None:  # the dedicated slot: its sandboxes close with the actor
            await _binding.release(sandboxes.resident_holder(DEDICATED_KEY))
        flush_metrics()

    async def release(self, agent_key: str) -> bool:
        """Drop a resident agent (its history goes with it) and close the sandboxes only it held."""
        return await self._drop_resident(agent_key)

    async def release_prefix(self, prefixes: list[str]) -> int:
        """Drop the node slots whose keys start with any of ``prefixes`` (one Graph/Swarm's: ``"<uid>/"``)."""
        return sum([await self._drop_resident(key) for key in self._slots.with_prefix(prefixes)])

    async def _drop_resident(self, agent_key: str) -> bool:
        """Drop a resident runner: every path goes through here.

        Its slot bookkeeping and the sandboxes only it held go with it; a run still in flight finishes on its own.
        """
        self._slots.forget(agent_key)
        runner = self._resident.pop(agent_key, None)
        if runner is not None:
            runner.forget()  # a node slot's journal
        await _binding.release(sandboxes.resident_holder(agent_key))
        return runner is not None

    async def close_sandboxes(self) -> int:
        """Close every sandbox this host holds (the host is about to go); return how many were closed."""
        return len(await _binding.release_all())

    # -- Graph/Swarm orchestrations (see runtime._orchestration) -----------------------------------------------

    async def orchestrate(self, request: OrchestratorRequest) -> AsyncGenerator[Any, None]:
        """Run one shipped Graph/Swarm invocation here, streaming its events, session writes and end state."""
        async for item in self._orchestrations.stream(request):
            yield item

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def cancel_orchestration(self, request: CancelRequest) -> int:
        """Cancel the request's orchestrations (handed to their loop); ids not running yet start cancelled."""
        return self._orchestrations.cancel(request)

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def orchestrations(self) -> list[str]:
        """The ids of the orchestrations running here."""
        return self._orchestrations.running()

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def release_orchestrations(self, prefixes: list[str]) -> int:
        """Drop the resident orchestrators whose keys start with any of ``prefixes``; return how many."""
        return self._orchestrations.release(prefixes)

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def resident_orchestrations(self) -> list[str]:
        """The keys of the orchestrators kept here between invocations (least recently used first)."""
        return self._orchestrations.residents.keys()

    # -- Graph/Swarm node slots (see runtime._host_slots) ------------------------------------------------------

    async def drop_idle_slots(self) -> list[str]:
        """Drop the node slots idle for the idle timeout (see :mod:`ray_harness.runtime._slots`); their keys."""
        return await self._slots.drop_idle()

    async def resident_messages(self, agent_key: str | None = None) -> list[Any]:
        """Return the history of a resident agent (default: the slot's)."""
        return self._resident_runner(agent_key).agent.messages

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def register_rate_limits(self, limits: dict[str, Any]) -> None:
        """Limit models by key in this process (see ``ray_harness.models.rate_limit``); kept for a restart."""
        register_rate_limits(limits)
        value = forwarded_rate_limits()
        if value is not None:
            internal_kv._internal_kv_put(rate_limits_key(ray.get_runtime_context().get_actor_id()), value,
                                         overwrite=True, namespace=RATE_LIMITS_KV_NAMESPACE)

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def flush_metrics(self) -> None:
        """Hand buffered metrics to Ray now."""
        flush_metrics()

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def stats(self) -> dict[str, Any]:
        """Index, process id, running runs, resident agents, resident set size in bytes, streamed calls served."""
        return {"index": self._index, "pid": os.getpid(), "running": len(self._runs),
                "resident": len(self._resident), "slots": len(self._slots), "rss_bytes": _rss_bytes(),
                "rate_limits": sorted(registered_rate_limits()), "calls": dict(self._calls)}


def _run_orchestration(request: OrchestratorRequest, started: Callable[[Any], None],
                       residents: Residents) -> AsyncGenerator[Any, None]:
    from ray_harness.runtime._orchestrator import run_request  # the multi-agent layer, loaded on first use

    return run_request(request, started, residents)


RATE_LIMITS_KV_NAMESPACE = "ray_harness_rate_limits"


def rate_limits_key(actor_id: str | None) -> str:
    """Where a host keeps the limits registered in it by a call (Ray's internal KV), for its restarts."""
    return f"host/{actor_id}"


def _restore_rate_limits() -> None:
    """Give a restarted host back the limits its dead process had registered, so a pool's quota outlives a crash.

    The host's env only holds the limits given at its creation; those registered later by a call are kept in KV.
    """
    try:
        value = internal_kv._internal_kv_get(rate_limits_key(ray.get_runtime_context().get_actor_id()),
                                             namespace=RATE_LIMITS_KV_NAMESPACE)
        if value:
            register_rate_limits(parse_forwarded(value.decode(), "the host's kept rate limits"))
    except Exception:  # the host must come back even when its limits cannot: say so loudly
        logger.exception("a restarted host could not restore its rate limits; its models run unlimited")


def _was_reconstructed() -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Ray flags an internal deprecated call inside this property
        return bool(ray.get_runtime_context().was_current_actor_reconstructed)


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
    idle_collector.enable()  # and collect the young generation when no invocation runs (see _idle_gc)


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
                return run_id, True, _pickling.dumps_plain(result if digest is None else digest(result)), None
            except Exception as pickling:  # as a single run: a result that cannot leave the host fails its run
                error = TypeError(f"the result of run {run_id!r} could not be returned: {pickling}")
        else:
            error = exception
    from ray_harness.evaluation._records import SPENT_ATTRIBUTE  # failures only: see AgentHost.run

    spent = getattr(error, SPENT_ATTRIBUTE, None)
    return run_id, False, pickled_error(error), spent


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
