"""``AgentPool``: a pre-started pool of agent hosts, and the client side of their protocol.

:class:`AgentPool` pre-starts ``size`` hosts (:class:`~ray_harness.runtime._host.AgentHost`, named
``ray_harness:host:<i>``) and places runs on them (resident agents by a stable hash of their key, other
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
import contextlib
import contextvars
import uuid
import zlib
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any

import ray
from ray.exceptions import RayError
from ray.experimental import internal_kv

from ray_harness.agent.agent import run_sync
from ray_harness.agent.limits import Limits
from ray_harness.agent.result import AgentResult
from ray_harness.multiagent.node_runner import EventFilter
from ray_harness.runtime._batching import Batcher
from ray_harness.runtime._cancel import RunHandle
from ray_harness.runtime._client import ActorClient
from ray_harness.runtime._cluster import actor_resources, current_namespace, ensure_initialized
from ray_harness.runtime._errors import call_sync, mark_stopped
from ray_harness.runtime._host import (
    HOST_ACTOR_PREFIX,
    RATE_LIMITS_KV_NAMESPACE,
    AgentHost,
    host_actor_name,
    rate_limits_key,
)
from ray_harness.runtime._host_registry import acquire_host, forget_host
from ray_harness.runtime._sandbox_owner import reap as reap_sandboxes, sandbox_affinity
from ray_harness.runtime._spec import AgentSpec, agent_spec
from ray_harness.runtime._stream_batching import StreamBatcher
from ray_harness.runtime._telemetry import with_actor_env
from ray_harness.runtime._wire import (
    CancelRequest,
    EventItem,
    InvokeRequest,
    ResultItem,
    SlotMissItem,
    SnapshotItem,
    invoke_request,
    pack_snapshot,
)
from ray_harness.telemetry.propagation import current_carrier
from ray_harness.types.exceptions import ActorStoppedError, RemoteActorError

__all__ = ("AgentHost", "AgentPool", "host_actor_name", "start_pools", "wait_ready")

HOST_LOSS_RESENDS = 8
"""Re-sends of a node slot's request whose host process died (Ray restarts hosts; ≈1 s each when warm)."""
_HOST_LOSS_PAUSE = 0.25  # seconds before the first re-send, doubling up to 4 s: a restart takes ≈1.25 s
_DEFER_READY: contextvars.ContextVar[bool] = contextvars.ContextVar("ray_harness_defer_ready", default=False)


class AgentPool:
    """A pre-started pool of :class:`AgentHost` actors (``ray_harness:host:<i>``).

    Args:
        size: Number of host actors (each one process; a few per node is plenty for I/O-bound agents).
        namespace: Ray namespace (default: the driver's). Hosts already running under these names in the
            namespace are reused, so pools in several drivers share them. Within one process, pools share
            the host handles and keep the hosts alive until :meth:`shutdown` (a later pool gets them warm).
        max_concurrency: Concurrent calls per host (runs plus control calls).
        num_cpus: CPUs reserved per host.
        resources: Custom Ray resources per host (``"GPU"``: GPUs); checked as for :class:`RemoteAgent`.
        max_restarts: Restarts of a host whose process died (its running runs fail; later runs proceed).
        name_prefix: The hosts' names are ``<name_prefix><i>`` (the runtime's orchestration hosts use
            ``ray_harness:orchestrator:``).

    """

    def __init__(self, size: int = 2, *, namespace: str | None = None, max_concurrency: int = 1000,
                 num_cpus: float = 0, resources: dict[str, float] | None = None, max_restarts: int = 1,
                 name_prefix: str = HOST_ACTOR_PREFIX) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive int, got {size!r}")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 2:
            raise ValueError(f"max_concurrency must be an int >= 2, got {max_concurrency!r}")
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < -1:
            raise ValueError(f"max_restarts must be an int >= -1, got {max_restarts!r}")
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise ValueError(f"namespace must be a non-empty string, got {namespace!r}")
        ensure_initialized()
        placement = actor_resources(num_cpus, resources, f"AgentPool hosts ({name_prefix}<i>)")
        self.namespace = namespace or current_namespace()
        options: dict[str, Any] = {"namespace": self.namespace, "get_if_exists": True,
                                   "max_concurrency": max_concurrency, "max_restarts": max_restarts, **placement}
        self.host_names = [host_actor_name(i, name_prefix) for i in range(size)]
        options = self._options = with_actor_env(options)
        # Asked for here, not waited for: each host's process starts while the next is asked for (and, with
        # start_pools, while other pools' hosts are).
        self._hosts = [acquire_host(self.namespace, name, i, options) for i, name in enumerate(self.host_names)]
        self._clients = [ActorClient(host, name) for host, name in zip(self._hosts, self.host_names, strict=True)]
        # The hosts' actor ids: an orchestration host tells the driver's pool by them (no GCS look-up).
        self.host_ids = tuple(host._actor_id.hex() for host in self._hosts)
        self._load = [0] * size
        self._where: dict[str, int] = {}
        self._placed: dict[str, int] = {}  # resident agents placed by sandbox affinity
        self._batcher = Batcher(self._clients)
        self._slot_streams = StreamBatcher(self._clients)
        if not _DEFER_READY.get():
            wait_ready([self])

    def _set_host(self, index: int, host: Any) -> None:
        """Put ``host`` in place ``index`` (its client, which the batchers hold, follows)."""
        self._hosts[index] = host
        self._clients[index].actor = host
        self.host_ids = tuple(handle._actor_id.hex() for handle in self._hosts)

    @property
    def size(self) -> int:
        """The number of hosts."""
        return len(self._hosts)

    @property
    def hosts(self) -> list[Any]:
        """The host actor handles, by index."""
        return list(self._hosts)

    # -- placement ----------------------------------------------------------------------------------------

    def prepare(self, agent_or_factory: Any) -> Any:
        """Pickle an agent source once and put it in the object store; pass the result to ``run`` many times."""
        return ray.put(agent_spec(agent_or_factory))

    def _pick(self, agent_key: str | None, spec: Any = None) -> int:
        if agent_key is not None:
            affinity = sandbox_affinity(spec)
            placed = self._placed.get(agent_key)
            if placed is not None:
                return placed
            index = zlib.crc32((affinity or agent_key).encode()) % len(self._hosts)
            if affinity is not None:  # later calls naming only the key (release, history) must find the host
                self._placed[agent_key] = index
            return index
        # An ephemeral run (an evaluation row, a one-off call) goes to the least-loaded host, sandbox or not:
        # funnelling every row of one agent onto one host would cost the pool its width. Each host then serves
        # the rows it runs from its one live sandbox of that object.
        return min(range(len(self._hosts)), key=self._load.__getitem__)

    @staticmethod
    def _spec(agent_or_factory: Any) -> Any:
        if isinstance(agent_or_factory, AgentSpec | ray.ObjectRef):
            return agent_or_factory
        return agent_spec(agent_or_factory)

    def slot_of(self, run_id: str) -> tuple[Any, str] | None:
        """Return the host actor and its name for a run in flight from this pool handle."""
        index = self._where.get(run_id)
        return None if index is None else (self._hosts[index], self.host_names[index])

    def run_handle(self, run_ids: Iterable[str], run_id: str | None = None) -> RunHandle:
        """Return a :class:`RunHandle` covering these pooled runs (runs not in flight go to every host)."""
        handle = RunHandle(run_id)
        for item in run_ids:
            indexes = [self._where[item]] if item in self._where else range(len(self._hosts))
            for index in indexes:
                handle.add_pool_run(self._hosts[index], self.host_names[index], item)
        return handle

    # -- runs -------------------------------------------------------------------------------------------

    def _start(self, run_id: str, agent_key: str | None, spec: Any = None, host: int | None = None) -> int:
        if run_id in self._where:
            raise ValueError(f"run id {run_id!r} is already in flight in this pool")
        index = self._pick(agent_key, spec) if host is None else host % len(self._hosts)
        self._where[run_id] = index
        self._load[index] += 1
        return index

    def _end(self, run_id: str, index: int) -> None:
        self._where.pop(run_id, None)
        self._load[index] -= 1

    def _replace_if_gone(self, index: int, error: RemoteActorError) -> None:
        """After a host failed a run: when it is gone for good, later runs go to a new host under its name.

        A host started by another driver dies with that driver (Ray kills an actor with its owner), and a
        host dies for good once its restarts are used up. A GCS look-up tells: a restarting host still holds
        its name; a dead one does not, and :func:`acquire_host` starts a new one (owned by this process).
        Only in a driver: an orchestration host's view of the pool is checked by the driver that sent it.
        """
        if error.actor_name != self.host_names[index] or ray.get_runtime_context().get_actor_id() is not None:
            return
        host = acquire_host(self.namespace, self.host_names[index], index, self._options)
        if host._actor_id != self._hosts[index]._actor_id:
            self._set_host(index, host)

    async def run(self, agent_or_factory: Any, prompt: Any = None, *, run_id: str | None = None,
                  agent_key: str | None = None, invocation_state: dict[str, Any] | None = None,
                  limits: Limits | None = None, structured_output_model: type | None = None) -> AgentResult:
        """Run an agent on a pooled host and return its result.

        ``agent_or_factory``: an Agent, pickled agent bytes, ``"module:function"``, a factory callable, or
        what :meth:`prepare` returned. With ``agent_key`` the agent stays resident on its host (built on
        first use, history kept, runs queued); without, it is built for this run and dropped after.
        """
        request = invoke_request(run_id or uuid.uuid4().hex, prompt, invocation_state=invocation_state,
                                 limits=limits, structured_output_model=structured_output_model, events="result",
                                 agent_key=agent_key)
        spec = self._spec(agent_or_factory)
        index = self._start(request.invocation_id, agent_key, spec)
        try:
            return await self._clients[index].call("run", request, spec)  # type: ignore[no-any-return]
        except RemoteActorError as error:
            self._replace_if_gone(index, error)
            raise
        finally:
            self._end(request.invocation_id, index)

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
        # Built with its trace context (what the batcher's ActorClient.traced would add): one request per run, not two.
        request = invoke_request(run_id or uuid.uuid4().hex, prompt, invocation_state=invocation_state,
                                 limits=limits, structured_output_model=structured_output_model, events="result",
                                 trace_context=current_carrier())
        spec = self._spec(agent_or_factory)
        index = self._start(request.invocation_id, None, spec)
        future: asyncio.Future[Any] | None = None
        try:
            future = self._batcher.submit(index, spec, digest, request)
            return await future
        except RemoteActorError as error:
            self._replace_if_gone(index, error)
            raise
        finally:
            # A raised exception's traceback holds this frame, whose future holds the exception: without this
            # the cycle would keep the pool (and its host handles) alive until the cyclic collector runs.
            future = None
            self._end(request.invocation_id, index)

    def run_sync(self, agent_or_factory: Any, prompt: Any = None, **kwargs: Any) -> AgentResult:
        """:meth:`run` from synchronous code."""
        return run_sync(self.run(agent_or_factory, prompt, **kwargs))  # type: ignore[no-any-return]

    async def stream(self, agent_or_factory: Any, prompt: Any = None, *, run_id: str | None = None,
                     agent_key: str | None = None, invocation_state: dict[str, Any] | None = None,
                     limits: Limits | None = None, structured_output_model: type | None = None,
                     events: EventFilter = "agent") -> AsyncGenerator[dict[str, Any], None]:
        """Like :meth:`run`, yielding the agent's events as they happen (last: ``{"type": "result"}``).

        ``events`` says which events come back (each streamed event is a Ray object): ``"agent"`` (default)
        all but the raw ``model_event`` chunks, ``"all"`` those too, ``"result"`` only the result (the agent
        runs quiet in the host).
        """
        request = invoke_request(run_id or uuid.uuid4().hex, prompt, invocation_state=invocation_state,
                                 limits=limits, structured_output_model=structured_output_model, events=events,
                                 agent_key=agent_key)
        async for item in self.stream_request(agent_or_factory, request):
            if isinstance(item, EventItem):
                yield item.event
            elif isinstance(item, ResultItem):
                yield item.event()

    async def stream_request(self, agent_or_factory: Any, request: InvokeRequest
                             ) -> AsyncGenerator[EventItem | ResultItem | SnapshotItem | SlotMissItem, None]:
        """Run one agent as ``request`` asks, streaming wire items.

        With ``request.snapshot`` the agent's snapshot comes beside the result, or alone before a failed run's
        exception.

        Raises:
            RemoteActorError: The host died mid-run (pooled runs are not journaled, so not re-sent).

        """
        async for item in self._stream(self._spec(agent_or_factory), request):
            yield item

    async def _stream(self, spec: Any, request: InvokeRequest, place: int | None = None
                      ) -> AsyncGenerator[EventItem | ResultItem | SnapshotItem | SlotMissItem, None]:
        run_id = request.invocation_id
        index = self._start(run_id, request.agent_key, spec, place)
        host = self._clients[index]
        try:
            if place is not None:  # a node slot's run: with the other runs for its host started now, in one call
                items = self._slot_streams.stream(index, request, spec)
            else:
                items = host.stream("stream", request, spec, what=f"run {run_id!r}",
                                    cancel=lambda: host.submit("cancel", CancelRequest(invocation_ids=(run_id,))))
            async for item in items:
                yield item
        except RemoteActorError as error:
            if place is None:  # a node slot's run is re-sent to its host by stream_slot (the host restarts)
                self._replace_if_gone(index, error)
            raise
        finally:
            self._end(run_id, index)

    async def stream_slot(self, agent: Any, request: InvokeRequest, *, host: int
                          ) -> AsyncGenerator[EventItem | ResultItem | SnapshotItem, None]:
        """Run ``request`` in the resident node slot ``request.agent_key`` (see :mod:`ray_harness.runtime._slots`).

        The slot lives on host ``host % size``: a Graph/Swarm spreads its nodes over the hosts (CPU-bound nodes of
        one batch run in parallel processes), and every request of a node goes to the same host. Slot runs started
        in the same event-loop iteration (a Graph's ready batch) go to each host in one streamed call
        (:mod:`ray_harness.runtime._stream_batching`); each keeps its own stream, errors and cancel.

        ``agent`` (the caller's copy, in line with the slot) ships only when ``request.slot`` says the slot is new
        (``revision`` ``None``, no snapshot) or when the host answers that it does not have the slot (a restarted
        host, a released or idle slot); a slot at another revision gets the copy's snapshot. Once each.

        When the host's process dies mid-run, the same request is sent again once the host is back (Ray restarts
        it; up to :data:`HOST_LOSS_RESENDS` times): the new process does not have the slot, so the agent ships
        again and the slot adopts the journal the run left (see :mod:`ray_harness.runtime._host_slots`). Events of the
        step that was running when the process died may come twice.

        Raises:
            RemoteActorError: The host stayed unreachable through every re-send.

        """
        sync = request.slot
        if sync is None:
            raise ValueError("stream_slot needs a slot request (InvokeRequest.slot)")
        spec = self._spec(agent) if sync.revision is None and sync.snapshot is None else None
        misses: set[str] = set()
        losses = 0
        host_name = self.host_names[host % self.size]
        while True:
            miss: SlotMissItem | None = None
            try:
                async for item in self._stream(spec, request, host):
                    if isinstance(item, SlotMissItem):
                        miss = item
                    else:
                        yield item
            except RemoteActorError as error:
                if error.actor_name != host_name or losses == HOST_LOSS_RESENDS or isinstance(error, ActorStoppedError):
                    raise  # not the host, re-sent enough, or the host was shut down (nothing would answer)
                # The host's process died (or is restarting): send the request again when it is back.
                await asyncio.sleep(_HOST_LOSS_PAUSE * 2 ** min(losses, 4))
                losses += 1
                misses.clear()
                continue
            if miss is None:
                return
            if miss.reason in misses:
                raise RuntimeError(f"host answered {miss.reason!r} twice for slot {miss.agent_key!r}")
            misses.add(miss.reason)
            if miss.reason == "unknown":  # the copy is the slot's state: open it again from it
                spec, sync = self._spec(agent), sync.model_copy(update={"revision": None, "snapshot": None})
            else:
                spec, sync = None, sync.model_copy(update={"revision": None,
                                                           "snapshot": pack_snapshot(agent.snapshot())})
            request = request.model_copy(update={"slot": sync})

    async def release_slots(self, prefixes: list[str]) -> int:
        """Drop the node slots whose keys start with any of ``prefixes``: one message per host, all at once."""
        counts = await asyncio.gather(*(client.call("release_prefix", list(prefixes)) for client in self._clients),
                                      return_exceptions=True)
        return sum(count for count in counts if isinstance(count, int))

    def release_slots_sync(self, prefixes: list[str], *, timeout: float = 10.0) -> int:
        """:meth:`release_slots` from synchronous code (hosts that are gone are skipped)."""
        refs = [client.submit("release_prefix", list(prefixes)) for client in self._clients]
        released = 0
        for ref, client in zip(refs, self._clients, strict=True):
            try:
                released += int(call_sync(ref, client.name, timeout=timeout))
            except Exception:  # a dead or unreachable host holds no slots worth waiting for
                continue
        return released

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
        """Drop the resident agent ``agent_key`` (its history and the sandboxes only it held go with it).

        Returns whether there was one.
        """
        index = self._pick(agent_key)
        self._placed.pop(agent_key, None)
        if await self._clients[index].call("release", agent_key):
            return True
        # Not where its key hashes: placed by sandbox affinity from another pool handle (an orchestrator's).
        others = [client for i, client in enumerate(self._clients) if i != index]
        return any(await asyncio.gather(*(client.call("release", agent_key) for client in others)))

    async def slot_info(self, agent_key: str) -> dict[str, Any] | None:
        """A resident agent's ``slot_info`` from whichever host holds it; ``None`` when none does.

        For a node slot it includes the slot's revision and how often it was built, restored and run.
        """
        answers = await asyncio.gather(*(client.call("slot_info", agent_key) for client in self._clients),
                                       return_exceptions=True)
        for answer in answers:
            if isinstance(answer, dict):
                return answer
            if not isinstance(answer, KeyError):
                raise answer
        return None

    async def resident_messages(self, agent_key: str) -> list[Any]:
        """Return the history of the resident agent ``agent_key``."""
        index = self._pick(agent_key)
        try:
            return list(await self._clients[index].call("resident_messages", agent_key))
        except KeyError:  # placed by sandbox affinity from another pool handle: ask the other hosts
            for i, client in enumerate(self._clients):
                if i != index:
                    with contextlib.suppress(KeyError):
                        return list(await client.call("resident_messages", agent_key))
            raise

    async def register_rate_limits(self, limits: dict[str, Any]) -> None:
        """Limit models by key (``{"<provider>:<model_id>": RateLimit}``) on every host of the pool."""
        await asyncio.gather(*(client.call("register_rate_limits", dict(limits)) for client in self._clients))

    async def stats(self) -> list[dict[str, Any]]:
        """Per host: index, pid, running runs, resident agents, resident set size in bytes, streamed calls served.

        ``calls``: ``stream`` calls, ``stream_many`` calls (node runs sent together), the runs and groups of items
        those carried (``stream_many_runs``, ``stream_many_groups``).
        """
        return list(await asyncio.gather(*(client.call("stats") for client in self._clients)))

    def shutdown(self) -> None:
        """Kill the host actors (shared with other pools in the namespace that use the same names).

        The hosts' node slots are released and their sandboxes closed first (created containers removed, slot
        journals deleted); containers a host that died left behind are removed by their owner label.
        """
        try:  # best effort: metrics buffered in the hosts (up to a second's worth) reach Ray first
            ray.get([host.flush_metrics.remote() for host in self._hosts], timeout=2)
        except (RayError, ValueError):
            pass
        try:  # every node slot (their journals are deleted), then what the hosts still hold
            ray.get([host.release_prefix.remote([""]) for host in self._hosts], timeout=30)
        except (RayError, ValueError):
            pass
        try:
            ray.get([host.close_sandboxes.remote() for host in self._hosts], timeout=30)
        except (RayError, ValueError):
            pass
        for name, host in zip(self.host_names, self._hosts, strict=True):
            mark_stopped(host)  # runs still in it fail with ActorStoppedError, not as a crash
            try:
                ray.kill(host, no_restart=True)
            except (RayError, ValueError):
                pass
            forget_host(self.namespace, name, host, retired=True)
            with contextlib.suppress(Exception):  # the kept limits of a host that is gone (see _host.py)
                internal_kv._internal_kv_del(rate_limits_key(host._actor_id.hex()), namespace=RATE_LIMITS_KV_NAMESPACE)
            reap_sandboxes(host._actor_id.hex())  # containers its (dead) processes left

    def __repr__(self) -> str:
        return f"AgentPool(size={self.size}, namespace={self.namespace!r})"


def wait_ready(pools: Iterable[AgentPool]) -> None:
    """Return once every host of ``pools`` answers; all are asked first, so their processes start in parallel.

    Pre-start: the first run does not pay for the process. A reused host that died for good (its restarts used
    up) is replaced by a new one under its name. Only in a driver: a blocking get inside an actor (an orchestrator
    attaching to the driver's pool) would stall an async actor's loop, and there the first run waits for its host.
    """
    if ray.get_runtime_context().get_actor_id() is not None:
        return
    asked = [(pool, i, pool._clients[i].submit("ready")) for pool in pools for i in range(pool.size)]
    for pool, i, ref in asked:
        name = pool.host_names[i]
        try:
            call_sync(ref, name)
        except RemoteActorError:  # a reused host that died for good (restarts used up): a new one
            forget_host(pool.namespace, name, pool._hosts[i], retired=True)
            pool._set_host(i, acquire_host(pool.namespace, name, i, pool._options))
            pool._clients[i].call_sync("ready")


def start_pools(*configs: dict[str, Any]) -> list[AgentPool]:
    """``AgentPool(**config)`` for each config, their hosts asked for in this order and then waited for together.

    On a small machine a host's process takes about a second to start, and Ray starts several at once: pools
    started together are ready in about the time of one, where one after the other each adds its own. Ray hands
    its pre-started worker processes to the first hosts asked for, so the pool needed first comes first.
    """
    token = _DEFER_READY.set(True)
    try:
        pools = [AgentPool(**config) for config in configs]
    finally:
        _DEFER_READY.reset(token)
    wait_ready(pools)
    return pools
