"""Agent hosts: async actors that serve many agent runs at once, and a pre-started pool of them.

A new actor costs ≈1 s and ≈50 MB, so one actor per agent run does not scale
to graphs, swarms and evaluations. An :class:`AgentHost` is one async actor
(``max_concurrency`` 1000 by default) holding any number of agents keyed by run
id (ephemeral: built for one run, dropped after it) or by ``agent_key``
(resident: built once, kept with its history, its runs queued in order).
Agent runs are I/O-bound (model calls), so hundreds run concurrently in one
process; sync tools run in threads.

:class:`AgentPool` pre-starts ``size`` hosts named ``ray_harness:host:<i>``
and places runs on them (resident agents by a stable hash of their key, other
runs on the least-loaded host from this driver's view)::

    pool = AgentPool(size=4)
    result = await pool.run("my_pkg.agents:researcher", "Find X", run_id="row-17")
    async for event in pool.stream(agent, "hi", run_id="r2"): ...
    await pool.cancel("row-17")                 # one run, handled at once
    await pool.cancel_all(["r2", "r3"])         # one message per host, all hosts concurrently
    handle = pool.run_handle(["r2", "r3"])      # a RunHandle to merge with other actors of a run

Hosts do not snapshot runs: a pooled run that loses its process fails with
``RemoteActorError`` and the orchestrator (graph, swarm, evaluation) decides
whether to re-run it. Use :class:`RemoteAgent` for a long-lived agent that must
survive a crash mid-run.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import functools
import gc
import os
import pickle
import threading
import time
import uuid
import zlib
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayError

from ray_harness.agent.agent import run_sync
from ray_harness.agent.limits import Limits, validate_limits
from ray_harness.agent.result import AgentResult
from ray_harness.agent.snapshot import AgentSnapshot
from ray_harness.evaluation._records import SPENT_ATTRIBUTE, mark_spent
from ray_harness.models.rate_limit import register_rate_limits
from ray_harness.runtime._cancel import RunHandle
from ray_harness.runtime._cluster import current_namespace, ensure_initialized
from ray_harness.runtime._errors import await_ref, call_sync, stream_items, translate
from ray_harness.runtime._runner import AgentRunner
from ray_harness.runtime._spec import AgentSpec, agent_spec, cloudpickle
from ray_harness.runtime._telemetry import flush_metrics, task_name, with_actor_env
from ray_harness.telemetry.propagation import current_carrier
from ray_harness.types.exceptions import RemoteActorError

__all__ = ("HOST_ACTOR_PREFIX", "AgentHost", "AgentPool", "host_actor_name")

HOST_ACTOR_PREFIX = "ray_harness:host:"
_CONTROL_GROUP = "control"
# cancel (and stats) run in their own group: never queued behind invocations that fill the default group.
_ACTOR_OPTIONS: dict[str, Any] = {"concurrency_groups": {_CONTROL_GROUP: 4}}
_KEPT_EARLY_CANCELS = 10_000
_GONE_TIMEOUT_S = 60.0


def host_actor_name(index: int) -> str:
    return f"{HOST_ACTOR_PREFIX}{index}"


class AgentHost:
    """The host actor class (plain; ``ray.remote`` is applied in :func:`_host_class`)."""

    def __init__(self, index: int) -> None:
        _tune_gc()
        self._index = index
        self._runs: dict[str, AgentRunner] = {}
        self._resident: dict[str, AgentRunner] = {}
        self._early: OrderedDict[str, None] = OrderedDict()  # cancels that overtook their run
        self._guard = threading.Lock()  # cancel() runs on the control group's thread

    async def ready(self) -> dict[str, Any]:
        return {"index": self._index, "pid": os.getpid()}

    def _runner_for(self, run_id: str, spec: AgentSpec, agent_key: str | None) -> AgentRunner:
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

    async def run(self, run_id: str, spec: AgentSpec, prompt: Any, options: dict[str, Any],
                  agent_key: str | None = None) -> AgentResult:
        runner = self._runner_for(run_id, spec, agent_key)
        self._register(run_id, runner)
        try:
            return await runner.invoke(run_id, prompt, options)
        except Exception as error:
            mark_spent(error, runner.agent)  # a failed run's tokens were billed: its caller accounts for them
            raise
        finally:
            self._unregister(run_id)

    async def stream(self, run_id: str, spec: AgentSpec, prompt: Any, options: dict[str, Any],
                     agent_key: str | None, include_model_events: bool, quiet: bool = False, snapshot: bool = False
                     ) -> AsyncGenerator[dict[str, Any] | AgentSnapshot | _ResultAndSnapshot, None]:
        runner = self._runner_for(run_id, spec, agent_key)
        self._register(run_id, runner)
        try:
            async for event in runner.stream(run_id, prompt, options, quiet=quiet):
                kind = event.get("type")
                if snapshot and kind == "result":
                    # Control data beside the event, never inside it; one Ray object for both (a streamed item
                    # costs a round trip per node).
                    yield _ResultAndSnapshot(event, pickle.dumps(runner.agent.snapshot(), pickle.HIGHEST_PROTOCOL))
                elif quiet:
                    # A quiet agent still reports these (its runner may persist them); the caller does not.
                    if kind not in _QUIET_DROPPED:
                        yield event
                elif include_model_events or kind != "model_event":
                    yield event
        except Exception:
            if snapshot:  # a failed run still advanced the model and rolled the history back
                yield runner.agent.snapshot()
            raise
        finally:
            self._unregister(run_id)

    async def run_batch(self, spec: AgentSpec, runs: list[tuple[str, Any, dict[str, Any]]],
                        digest: Callable[[Any], Any] | None = None
                        ) -> AsyncGenerator[list[tuple[str, bool, bytes, Any]], None]:
        """Run ``runs`` (``(run_id, prompt, options)``) concurrently, as :meth:`run` each.

        Yields groups of finished runs, ``(run_id, ok, pickled result or exception, what a failed run spent)``:
        whatever finished
        while the previous group was being sent, so a batch costs a few Ray messages instead of one call
        per run. Each outcome is pickled on its own, so one unpicklable result fails only its run.
        With ``digest``, ``digest(result)`` travels instead of the result.
        """
        finished: collections.deque[tuple[str, asyncio.Task[Any]]] = collections.deque()
        wakeup = asyncio.Event()
        tasks: list[asyncio.Task[Any]] = []
        for run_id, prompt, options in runs:
            task = asyncio.ensure_future(self.run(run_id, spec, prompt, options))
            task.add_done_callback(functools.partial(_collect, finished, wakeup, run_id))
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
    async def cancel(self, run_ids: list[str] | None = None) -> int:
        """Cancel ``run_ids`` (all runs when ``None``); ids not running yet are cancelled when they start."""
        with self._guard:
            targets = list(self._runs) if run_ids is None else list(run_ids)
            found = [(run_id, self._runs.get(run_id)) for run_id in targets]
            for run_id, runner in found:
                if runner is None:
                    self._early[run_id] = None
            while len(self._early) > _KEPT_EARLY_CANCELS:
                self._early.popitem(last=False)
        return sum(runner.cancel(run_id) for run_id, runner in found if runner is not None)

    async def release(self, agent_key: str) -> bool:
        """Drop a resident agent (its history goes with it)."""
        return self._resident.pop(agent_key, None) is not None

    async def resident_messages(self, agent_key: str) -> list[Any]:
        runner = self._resident.get(agent_key)
        if runner is None:
            raise KeyError(f"no resident agent {agent_key!r} on host {self._index}")
        return runner.agent.messages

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def register_rate_limits(self, limits: dict[str, Any]) -> None:
        register_rate_limits(limits)

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def flush_metrics(self) -> None:
        flush_metrics()

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def stats(self) -> dict[str, Any]:
        return {"index": self._index, "pid": os.getpid(), "running": len(self._runs),
                "resident": len(self._resident), "rss_bytes": _rss_bytes()}


_QUIET_DROPPED = frozenset({"tool_result", "interrupt"})


@dataclass(frozen=True)
class _ResultAndSnapshot:
    """A run's result event and its agent's snapshot, as one streamed item (``stream(snapshot=True)``)."""

    event: dict[str, Any]
    snapshot: bytes
    """The pickled ``AgentSnapshot``: plain data, so the C pickler packs it (cloudpickle, which Ray would
    use, calls back into Python for every object inside)."""
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


_Queued = tuple[str, Any, dict[str, Any], "asyncio.Future[Any]"]
"""A run waiting for its batch: run id, prompt, options, the future its caller awaits."""
_Batch = tuple[Any, "Callable[[Any], Any] | None", list[_Queued]]
"""The runs of one host call: agent source, digest, runs."""


def _settle(future: asyncio.Future[Any], ok: bool, payload: bytes, spent: Any) -> None:
    try:
        value = cloudpickle.loads(payload)
    except Exception as error:  # e.g. the result's class cannot be imported here
        future.set_exception(error)
        return
    if ok:
        future.set_result(value)
    else:
        if spent is not None:
            with contextlib.suppress(Exception):
                setattr(value, SPENT_ATTRIBUTE, spent)
        future.set_exception(value)


def _fresh(error: BaseException) -> BaseException:
    """A copy per run: one exception object raised in many tasks would pile up their tracebacks."""
    try:
        clone = copy.copy(error)
    except Exception:
        return error
    clone.__cause__ = error.__cause__
    return clone


@functools.cache
def _host_class() -> Any:
    return ray.remote(**_ACTOR_OPTIONS)(AgentHost)


# The hosts this process holds, by (job, namespace, name), shared by every pool of this process. A pool does
# not release its hosts when it is collected: Ray destroys a named actor asynchronously once its last handle
# is gone, and the next pool's by-name lookup would get the dying actor (every row sent to it fails). Live
# hosts are reused instead (warm, no start-up cost); ``shutdown()`` retires them, and a later pool waits
# until a retired actor is gone before it creates a new one under its name.
_LIVE_HOSTS: dict[tuple[str, str, str], Any] = {}
_RETIRED_HOSTS: dict[tuple[str, str, str], Any] = {}
_HOSTS_LOCK = threading.Lock()


def _host_key(namespace: str, name: str) -> tuple[str, str, str]:
    return ray.get_runtime_context().get_job_id(), namespace, name


def _acquire_host(namespace: str, name: str, index: int, options: dict[str, Any]) -> Any:
    key = _host_key(namespace, name)
    with _HOSTS_LOCK:
        live = _LIVE_HOSTS.get(key)
        if live is not None:
            return live
        retired = _RETIRED_HOSTS.pop(key, None)
        if retired is not None:
            _wait_gone(name, namespace, retired)
        handle = _host_class().options(name=name, **options).remote(index)
        _LIVE_HOSTS[key] = handle
        return handle


def _forget_host(namespace: str, name: str, handle: Any, *, retired: bool) -> None:
    key = _host_key(namespace, name)
    with _HOSTS_LOCK:
        if _LIVE_HOSTS.get(key) is handle:
            del _LIVE_HOSTS[key]
        if retired:
            _RETIRED_HOSTS[key] = handle._actor_id


def _wait_gone(name: str, namespace: str, actor_id: Any) -> None:
    """Until the actor ``actor_id`` no longer holds ``name`` (a killed actor frees its name within seconds)."""
    deadline = time.monotonic() + _GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            current = ray.get_actor(name, namespace=namespace)
        except ValueError:
            return
        if current._actor_id != actor_id:
            return
        time.sleep(0.05)
    raise RemoteActorError(f"host actor {name!r} was shut down but still holds its name after "
                           f"{_GONE_TIMEOUT_S:.0f} s", actor_name=name)


class AgentPool:
    """A pre-started pool of :class:`AgentHost` actors (``ray_harness:host:<i>``).

    Args:
        size: Number of host actors (each one process; a few per node is plenty for I/O-bound agents).
        namespace: Ray namespace (default: the driver's). Hosts already running under these names in the
            namespace are reused, so pools in several drivers share them. Within one process, pools share
            the host handles and keep the hosts alive until :meth:`shutdown` (a later pool gets them warm).
        max_concurrency: Concurrent calls per host (runs plus control calls).
        num_cpus: CPUs reserved per host.
        resources: Custom Ray resources per host.
        max_restarts: Restarts of a host whose process died (its running runs fail; later runs proceed).
    """

    def __init__(self, size: int = 2, *, namespace: str | None = None, max_concurrency: int = 1000,
                 num_cpus: float = 0, resources: dict[str, float] | None = None, max_restarts: int = 1) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive int, got {size!r}")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 2:
            raise ValueError(f"max_concurrency must be an int >= 2, got {max_concurrency!r}")
        ensure_initialized()
        self.namespace = namespace or current_namespace()
        options: dict[str, Any] = {"namespace": self.namespace, "get_if_exists": True, "num_cpus": num_cpus,
                                   "max_concurrency": max_concurrency, "max_restarts": max_restarts}
        if resources:
            options["resources"] = dict(resources)
        self.host_names = [host_actor_name(i) for i in range(size)]
        options = with_actor_env(options)
        self._hosts = [_acquire_host(self.namespace, name, i, options) for i, name in enumerate(self.host_names)]
        if ray.get_runtime_context().get_actor_id() is None:
            # Pre-start: the first run does not pay for the process. Not inside an actor (an orchestrator
            # attaching to the driver's pool): a blocking get there would stall an async actor's loop.
            for i, name in enumerate(self.host_names):
                try:
                    call_sync(self._hosts[i].ready.remote(), name)
                except RemoteActorError:  # a reused host that died for good (restarts used up): a new one
                    _forget_host(self.namespace, name, self._hosts[i], retired=True)
                    self._hosts[i] = _acquire_host(self.namespace, name, i, options)
                    call_sync(self._hosts[i].ready.remote(), name)
        self._load = [0] * size
        self._where: dict[str, int] = {}
        # run_batched: runs waiting for this loop iteration's flush, per event loop, by (host index, spec).
        self._pending: dict[asyncio.AbstractEventLoop, dict[tuple[int, int, int], _Batch]] = {}
        self._senders: set[asyncio.Task[None]] = set()

    @property
    def size(self) -> int:
        return len(self._hosts)

    @property
    def hosts(self) -> list[Any]:
        return list(self._hosts)

    # -- placement ----------------------------------------------------------------------------------------

    def prepare(self, agent_or_factory: Any) -> Any:
        """Pickle an agent source once and put it in the object store; pass the result to ``run`` many times."""
        return ray.put(agent_spec(agent_or_factory))

    def _pick(self, agent_key: str | None) -> int:
        if agent_key is not None:
            return zlib.crc32(agent_key.encode()) % len(self._hosts)
        return min(range(len(self._hosts)), key=self._load.__getitem__)

    @staticmethod
    def _spec(agent_or_factory: Any) -> Any:
        if isinstance(agent_or_factory, AgentSpec | ray.ObjectRef):
            return agent_or_factory
        return agent_spec(agent_or_factory)

    def slot_of(self, run_id: str) -> tuple[Any, str] | None:
        """The host actor and its name for a run in flight from this pool handle."""
        index = self._where.get(run_id)
        return None if index is None else (self._hosts[index], self.host_names[index])

    def run_handle(self, run_ids: Iterable[str], run_id: str | None = None) -> RunHandle:
        """A :class:`RunHandle` covering these pooled runs (runs not in flight go to every host)."""
        handle = RunHandle(run_id)
        for item in run_ids:
            indexes = [self._where[item]] if item in self._where else range(len(self._hosts))
            for index in indexes:
                handle.add_pool_run(self._hosts[index], self.host_names[index], item)
        return handle

    # -- runs -------------------------------------------------------------------------------------------

    def _start(self, run_id: str | None, agent_key: str | None) -> tuple[str, int]:
        run_id = run_id or uuid.uuid4().hex
        if run_id in self._where:
            raise ValueError(f"run id {run_id!r} is already in flight in this pool")
        index = self._pick(agent_key)
        self._where[run_id] = index
        self._load[index] += 1
        return run_id, index

    def _end(self, run_id: str, index: int) -> None:
        self._where.pop(run_id, None)
        self._load[index] -= 1

    @staticmethod
    def _options(invocation_state: dict[str, Any] | None, limits: Limits | None,
                 structured_output_model: type | None) -> dict[str, Any]:
        options: dict[str, Any] = {"limits": validate_limits(limits), "structured_output_model": structured_output_model,
                                   "trace_context": current_carrier()}
        if invocation_state is not None:
            options["invocation_state"] = dict(invocation_state)
        return options

    async def run(self, agent_or_factory: Any, prompt: Any = None, *, run_id: str | None = None,
                  agent_key: str | None = None, invocation_state: dict[str, Any] | None = None,
                  limits: Limits | None = None, structured_output_model: type | None = None) -> AgentResult:
        """Run an agent on a pooled host and return its result.

        ``agent_or_factory``: an Agent, pickled agent bytes, ``"module:function"``, a factory callable, or
        what :meth:`prepare` returned. With ``agent_key`` the agent stays resident on its host (built on
        first use, history kept, runs queued); without, it is built for this run and dropped after.
        """
        options = self._options(invocation_state, limits, structured_output_model)
        spec = self._spec(agent_or_factory)
        run_id, index = self._start(run_id, agent_key)
        try:
            ref = self._hosts[index].run.options(name=task_name(options)).remote(run_id, spec, prompt, options,
                                                                                 agent_key)
            return await await_ref(ref, self.host_names[index])
        finally:
            self._end(run_id, index)

    async def run_batched(self, agent_or_factory: Any, prompt: Any = None, *, run_id: str | None = None,
                          invocation_state: dict[str, Any] | None = None, limits: Limits | None = None,
                          structured_output_model: type | None = None,
                          digest: Callable[[AgentResult], Any] | None = None) -> Any:
        """Like :meth:`run` (ephemeral agents only), for many runs started together.

        Runs started in the same event-loop iteration with the same agent source go to each host in one
        call, and their results come back in groups as they finish: a few Ray messages per host instead of
        one call per run (an evaluation's rows). Placement, cancel and errors are as with :meth:`run`;
        results and exceptions must pickle with cloudpickle. With ``digest`` (a picklable function, best a
        module-level one), the host returns ``digest(result)`` instead of the result, which stays there.
        """
        options = self._options(invocation_state, limits, structured_output_model)
        spec = self._spec(agent_or_factory)
        run_id, index = self._start(run_id, None)
        future: asyncio.Future[Any] | None = None
        try:
            future = self._enqueue(index, spec, digest, (run_id, prompt, options))
            return await future
        finally:
            # A raised exception's traceback holds this frame, whose future holds the exception: without this
            # the cycle would keep the pool (and its host handles) alive until the cyclic collector runs.
            future = None
            self._end(run_id, index)

    def _enqueue(self, index: int, spec: Any, digest: Callable[[Any], Any] | None,
                 run: tuple[str, Any, dict[str, Any]]) -> asyncio.Future[Any]:
        """Queue a run for this loop iteration's flush (scheduled by the first run queued)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = {}
            loop.call_soon(self._flush, loop)
        pending.setdefault((index, id(spec), id(digest)), (spec, digest, []))[2].append((*run, future))
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        for (index, _, _), (spec, digest, queued) in self._pending.pop(loop, {}).items():
            sender = loop.create_task(self._send_batch(index, spec, digest, queued))
            self._senders.add(sender)
            sender.add_done_callback(self._senders.discard)

    async def _send_batch(self, index: int, spec: Any, digest: Callable[[Any], Any] | None,
                          queued: list[_Queued]) -> None:
        name = self.host_names[index]
        futures = {run_id: future for run_id, _, _, future in queued}
        failure: BaseException | None = None
        try:
            generator = self._hosts[index].run_batch.options(name=task_name(*(run[2] for run in queued))).remote(
                spec, [(run_id, prompt, options) for run_id, prompt, options, _ in queued], digest)
            while futures:
                try:
                    group = await (await generator.__anext__())
                except StopAsyncIteration:
                    break
                except RayError as error:
                    failure = translate(error, name)
                    if failure is not error:
                        failure.__cause__ = error
                    break
                for run_id, ok, payload, spent in group:
                    future = futures.pop(run_id, None)
                    if future is not None and not future.done():
                        _settle(future, ok, payload, spent)
        finally:
            for future in futures.values():
                if future.done():
                    continue
                if failure is None and not asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    failure = RemoteActorError(f"host {name!r} ended a batch without a run's result",
                                               actor_name=name)
                if failure is None:
                    future.cancel()
                else:
                    future.set_exception(_fresh(failure))

    def run_sync(self, agent_or_factory: Any, prompt: Any = None, **kwargs: Any) -> AgentResult:
        return run_sync(self.run(agent_or_factory, prompt, **kwargs))  # type: ignore[no-any-return]

    async def stream(self, agent_or_factory: Any, prompt: Any = None, *, run_id: str | None = None,
                     agent_key: str | None = None, invocation_state: dict[str, Any] | None = None,
                     limits: Limits | None = None, structured_output_model: type | None = None,
                     include_model_events: bool = False, quiet: bool = False, snapshot: bool = False
                     ) -> AsyncGenerator[dict[str, Any] | AgentSnapshot, None]:
        """Like :meth:`run`, yielding the agent's events as they happen (last: ``{"type": "result"}``).

        ``quiet=True``: the agent runs quiet in the host and only its ``result`` event comes back (each
        streamed event is a Ray object; a graph node run for ``invoke_async`` needs none of the others).
        ``snapshot=True``: after the result (or before the run's exception) comes the agent's
        :class:`~ray_harness.agent.AgentSnapshot`, as the host left it.
        """
        options = self._options(invocation_state, limits, structured_output_model)
        spec = self._spec(agent_or_factory)
        run_id, index = self._start(run_id, agent_key)
        name = self.host_names[index]
        finished = False
        try:
            generator = self._hosts[index].stream.options(name=task_name(options)).remote(
                run_id, spec, prompt, options, agent_key, include_model_events, quiet, snapshot)
            async for event in stream_items(generator, name):
                if isinstance(event, _ResultAndSnapshot):
                    finished = True
                    yield event.event
                    yield pickle.loads(event.snapshot)
                    continue
                if not isinstance(event, AgentSnapshot):
                    finished = event.get("type") == "result"
                yield event
            if not finished:
                # Pooled runs are not snapshotted: a host that died mid-stream ends it early. Say so.
                raise RemoteActorError(f"host actor {name!r} stopped streaming run {run_id!r} before its result "
                                       "(its process died or restarted)", actor_name=name)
        finally:
            if not finished:
                self._hosts[index].cancel.remote([run_id])
            self._end(run_id, index)

    # -- cancel -----------------------------------------------------------------------------------------

    async def cancel(self, run_id: str) -> None:
        """Cancel one run (handled at once by its host, even mid model call or tool)."""
        await self.cancel_all([run_id])

    async def cancel_all(self, run_ids: Iterable[str] | None = None) -> int:
        """Cancel many runs with one message per host, sent to all hosts concurrently.

        ``None`` cancels every run in flight from this pool handle. Runs this handle does not know
        (started by another driver) are sent to every host. Returns how many hosts acknowledged.
        """
        ids = list(self._where) if run_ids is None else list(run_ids)
        if not ids:
            return 0
        return await self.run_handle(ids).cancel()

    # -- resident agents and lifetime -----------------------------------------------------------------------

    async def release(self, agent_key: str) -> bool:
        index = self._pick(agent_key)
        return bool(await await_ref(self._hosts[index].release.remote(agent_key), self.host_names[index]))

    async def resident_messages(self, agent_key: str) -> list[Any]:
        index = self._pick(agent_key)
        messages = await await_ref(self._hosts[index].resident_messages.remote(agent_key), self.host_names[index])
        return list(messages)

    async def register_rate_limits(self, limits: dict[str, Any]) -> None:
        """Limit models by key (``{"<provider>:<model_id>": RateLimit}``) on every host of the pool."""
        await asyncio.gather(*(await_ref(h.register_rate_limits.remote(dict(limits)), n)
                               for h, n in zip(self._hosts, self.host_names, strict=True)))

    async def stats(self) -> list[dict[str, Any]]:
        """Per host: index, pid, running runs, resident agents, resident set size in bytes."""
        return list(await asyncio.gather(*(await_ref(h.stats.remote(), n)
                                           for h, n in zip(self._hosts, self.host_names, strict=True))))

    def shutdown(self) -> None:
        """Kill the host actors (shared with other pools in the namespace that use the same names)."""
        try:  # best effort: metrics buffered in the hosts (up to a second's worth) reach Ray first
            ray.get([host.flush_metrics.remote() for host in self._hosts], timeout=2)
        except (RayError, ValueError):
            pass
        for name, host in zip(self.host_names, self._hosts, strict=True):
            try:
                ray.kill(host, no_restart=True)
            except (RayError, ValueError):
                pass
            _forget_host(self.namespace, name, host, retired=True)

    def __repr__(self) -> str:
        return f"AgentPool(size={self.size}, namespace={self.namespace!r})"
