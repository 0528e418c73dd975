"""The driver's side of a Graph/Swarm run on an orchestration host: :class:`OrchestratorClient`.

How the run goes, end to end, is told in :mod:`ray_harness.runtime._orchestrator` (the host's side,
:func:`~ray_harness.runtime._orchestrator.run_request`). Here: which host an object is keyed to and the
pools it checks, what an invocation ships (the pickled orchestrator, or what changed since the host's
resident copy), reading the run's stream (events yielded, relayed session writes saved, the end state
applied to the driver's objects), aborting it when the caller stops reading, and sending it again when
the host is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import zlib
from collections.abc import AsyncGenerator
from typing import Any, Literal

import ray

from ray_harness.multiagent._persistence import write_state
from ray_harness.multiagent.base import MultiAgentBase
from ray_harness.multiagent.node_runner import EventFilter
from ray_harness.multiagent.swarm import Swarm
from ray_harness.runtime._client import ActorClient
from ray_harness.runtime._cluster import ensure_initialized
from ray_harness.runtime._host_registry import retirements
from ray_harness.runtime._multiagent_pool import default_pool, orchestration_pool
from ray_harness.runtime._orchestration import AbortRequest
from ray_harness.runtime._orchestrator_wire import (
    agent_baselines,
    apply_end,
    dump_orchestrator,
    dumps,
    loads,
    object_table,
)
from ray_harness.runtime._resend import RUN_RESENDS, ReportedRuns, resendable
from ray_harness.runtime._resident import DriverCopy
from ray_harness.runtime._slot_lease import SlotLease
from ray_harness.runtime._slots import RunBaseline
from ray_harness.runtime._wire import (
    BatchItem,
    CancelRequest,
    EndItem,
    OrchestratorEventItem,
    OrchestratorRequest,
    ResidentMissItem,
)
from ray_harness.runtime.pool import AgentPool
from ray_harness.types.exceptions import RemoteActorError

__all__ = ("ABORT_WAIT_S", "POOL_CHECK_INTERVAL_S", "OrchestratorClient")

# The records keep the logger name they had when the client was part of _orchestrator.py.
logger = logging.getLogger("ray_harness.runtime._orchestrator")

_DONE = object()


class _Shielded:
    """Reads a stream's items so that cancelling the reader's task stops its wait, not the stream.

    Each item is awaited in a task of its own, shielded: after a cancellation of the reader (``asyncio.timeout`` or
    ``wait_for`` around an invocation) the item in flight stays in :attr:`step` and the stream can still be read
    to its end (:meth:`OrchestratorClient._abort`). :meth:`aclose` stops the step in flight, then the stream.
    """

    def __init__(self, items: AsyncGenerator[Any, None]) -> None:
        self.items = items
        self.step: asyncio.Future[Any] | None = None

    def __aiter__(self) -> _Shielded:
        return self

    async def __anext__(self) -> Any:
        step = self.step
        if step is None:
            step = self.step = asyncio.ensure_future(anext(self.items, _DONE))
        try:
            item = await asyncio.shield(step)
        except asyncio.CancelledError:
            raise  # the reader's task was cancelled: the step (maybe done already) is for the next read
        except BaseException:
            self.step = None
            raise
        self.step = None
        if item is _DONE:
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        step, self.step = self.step, None
        if step is not None:
            if not step.done():
                step.cancel()
                await asyncio.wait([step])  # the stream is not running any more when it is closed
            if not step.cancelled():
                step.exception()  # retrieved: an item nobody reads is not an error to log
        await self.items.aclose()


ABORT_WAIT_S = 30.0
"""How long a driver whose caller stopped reading mid-run waits for the aborted run's end state."""

POOL_CHECK_INTERVAL_S = 5.0
"""How long a Graph/Swarm object's invocations reuse the pools they checked (a GCS look-up per host)."""


class OrchestratorClient:
    """The driver's side of one Graph/Swarm object's invocations: its orchestration host and its resident copy.

    One per node runner in the driver. The object is keyed to one host of the orchestration pool
    (``crc32(key) % size``, chosen at the first invocation and again when that pool was replaced); no actor is
    started for it. Its invocations appear on the dashboard as tasks ``ray_harness.graph:<id>`` /
    ``ray_harness.swarm:<id>`` of that host.

    Args:
        orchestrator: The driver's Graph/Swarm.
        key: Its node runner's uid (the slots' prefix).
        node_pool: The node runner's own host pool (``None``: the shared default pool).
        lease: The driver's slot lease (releases the resident copy with the slots), if this runner has one.

    """

    def __init__(self, orchestrator: MultiAgentBase, key: str, node_pool: AgentPool | None = None,
                 lease: SlotLease | None = None) -> None:
        self.key = key
        self.node_pool = node_pool
        self.lease = lease
        kind = "swarm" if isinstance(orchestrator, Swarm) else "graph"
        self.task_name = f"ray_harness.{kind}:{orchestrator.id}"
        self.pool: AgentPool | None = None  # the orchestration pool the host is from (see invoke())
        self.client: ActorClient | None = None
        self.name: str | None = None
        self.resident = ""  # the host's key for the resident copy, new with each host
        self.copy: DriverCopy | None = None  # the host's resident copy, as of the end state applied last
        self.invocation: str | None = None
        self.cancelled = False  # a cancel came in this invocation (reset by the node runner when one starts)
        self.checked: tuple[str, int, float] | None = None  # the last pool check: Ray job, retirements, when
        self.pools: tuple[AgentPool, AgentPool] | None = None  # the node and orchestration pools it found

    def cancel(self) -> None:
        """Ask the running invocation to stop (fire and forget; safe from any thread)."""
        self.cancelled = True
        invocation, client = self.invocation, self.client
        if invocation is not None and client is not None:
            client.submit("cancel_orchestration", CancelRequest(invocation_ids=(invocation,)))

    def _use(self, pool: AgentPool) -> None:
        """Key the object to its host of ``pool`` (a new resident key: that host has no copy of it)."""
        index = zlib.crc32(self.key.encode()) % pool.size
        self.pool, self.name = pool, pool.host_names[index]
        self.client = ActorClient(pool.hosts[index], self.name)
        # Under the object's slot prefix ("<key>/"), so releasing its slots releases this too; its own part keeps
        # copies of the object in other processes (same key) apart.
        self.resident = f"{self.key}/orchestrator:{uuid.uuid4().hex[:12]}"
        if self.lease is not None:
            # The host's handle and key only: the lease outlives the Graph/Swarm in a finalizer and must not hold
            # the driver's copy of its objects.
            self.lease.attach_orchestration(self.client, self.resident)

    def _pools(self) -> tuple[AgentPool, AgentPool]:
        """The node pool and the orchestration pool, checked (a GCS look-up per host) every few seconds.

        Reused unchecked for :data:`POOL_CHECK_INTERVAL_S` unless Ray was re-initialized or this process retired
        a host since (a pool's ``shutdown()``). Another driver that shuts the pools down is noticed at the next
        check; a dead orchestration host at once (:meth:`invoke` sends the run again). The driver starts, so
        owns, the pools: hosts started by an orchestration host would die with it.
        """
        checked, pools = self.checked, self.pools
        if (checked is None or pools is None or not ray.is_initialized() or checked[1] != retirements()
                or time.monotonic() - checked[2] > POOL_CHECK_INTERVAL_S
                or checked[0] != ray.get_runtime_context().get_job_id()):
            pools = self.pools = (self.node_pool if self.node_pool is not None else default_pool(),
                                  orchestration_pool())
            self.checked = (ray.get_runtime_context().get_job_id(), retirements(), time.monotonic())
        return pools

    def _take(self, item: Any, table: dict[tuple[str, ...], Any], baselines: dict[tuple[str, ...], RunBaseline],
              resident: DriverCopy | None) -> list[dict[str, Any]]:
        """The caller's events in ``item``; relayed session writes saved; the end state applied (its error raised)."""
        if isinstance(item, EndItem):
            end = loads(item.payload, table)
            apply_end(end, table, baselines)
            if item.token is not None:  # both copies agree now
                self.copy = DriverCopy(item.token, table, resident)
            if end.error is not None:
                raise end.error
            return [] if end.final is None else [end.final]
        events = []
        for part in (item.items if isinstance(item, BatchItem) else (item,)):
            if isinstance(part, OrchestratorEventItem):
                events.append(loads(part.payload, table))
            else:
                orchestrator = table[("orch", part.path)]
                write_state(orchestrator, getattr(orchestrator, "session_manager", None), part.data)
        return events

    async def _abort(self, items: _Shielded, table: dict[tuple[str, ...], Any],
                     baselines: dict[tuple[str, ...], RunBaseline], resident: DriverCopy | None, *,
                     ended: bool) -> None:
        """The caller stopped reading mid-run (``aclose()``, its task cancelled): end the run as in-process.

        The host stops the run where it is, as closing its stream does with ``runtime="local"`` (running nodes
        ``CANCELLED``, the run ``FAILED``), and sends its end state, applied here (relayed session writes saved,
        events dropped, a run error not raised): the driver's objects show the aborted run, not their state from
        before it. A host that does not answer within :data:`ABORT_WAIT_S` leaves them as they were; the stream's
        close then sends the cancel, and the next invocation ships the object again.
        """
        invocation, client = self.invocation, self.client
        if ended or invocation is None or client is None:  # ended: its end state is applied already
            return
        client.submit("cancel_orchestration", AbortRequest(invocation_ids=(invocation,)))
        with contextlib.suppress(Exception):
            async with asyncio.timeout(ABORT_WAIT_S):
                async for item in items:
                    if isinstance(item, ResidentMissItem):
                        return
                    self._take(item, table, baselines, resident)  # the end state's error is not raised here
                    if isinstance(item, EndItem):
                        return

    def _host_replaced(self) -> bool:
        """After a call into the orchestration host failed: whether its pool is gone for good (checked now)."""
        self.checked = None
        return self._pools()[1] is not self.pool

    def _prepare(self, orchestrator: MultiAgentBase, table: dict[tuple[str, ...], Any]
                 ) -> tuple[bytes | None, bytes | None, DriverCopy | None, tuple[str, ...] | None]:
        """What this invocation sends: the pickled orchestrator, or the resident copy's pickled sync and that copy.

        The sync (or the pickle) first, so an orchestrator that must ship and cannot sends nothing and starts
        nothing; then the pools (:meth:`_pools`). Last, the driver's default pool's host ids (``None``: the
        node runner has its own), for the host's copy. An empty sync (nothing changed) is not sent.
        """
        copy = self.copy
        sync = copy.sync(table) if copy is not None else None
        payload = None if sync is not None else dump_orchestrator(orchestrator, table)
        node_pool, pool = self._pools()
        if self.lease is not None and self.lease.pool is not node_pool:
            self.lease.attach(node_pool)  # the driver's: its slots are released there
        pool_hosts = None if self.node_pool is not None else node_pool.host_ids
        if pool is not self.pool or self.client is None:  # the first invocation, or the pool was replaced
            self._use(pool)  # a new host key: no copy there
            if payload is None:
                payload = dump_orchestrator(orchestrator, table)
            copy = sync = None
        self.copy = None  # none until this run's end state is applied
        if sync is not None and (sync.agents or sync.runs):  # pickled now: its snapshots share the agents' objects
            return None, dumps(sync, {id(value): key for key, value in table.items()}), copy, pool_hosts
        return payload, None, copy, pool_hosts

    def _after_loss(self, error: RemoteActorError, *, received: bool, retried: bool, can_resend: bool
                    ) -> Literal["moved", "lost"] | None:
        """What to do after the ``orchestrate`` stream failed with ``error`` (``None``: raise it).

        ``"moved"``: the host was gone for good before the run began (its pool shut down elsewhere), once.
        ``"lost"``: the host died (or restarts) with the run in it, which can be sent again, not cancelled.
        """
        if error.actor_name != self.name:
            return None  # not this host's death: an error of the run
        if not received and not retried and self._host_replaced():
            return "moved"
        if can_resend and not self.cancelled:
            return "lost"
        return None

    async def invoke(self, orchestrator: MultiAgentBase, task: Any, invocation_state: dict[str, Any],
                     events: EventFilter = "all") -> AsyncGenerator[dict[str, Any], None]:
        """Run ``orchestrator``'s invocation on its orchestration host; yields its events; applies the end state.

        In order: the tree's object table; what to send (:meth:`_prepare`: the changes since the resident copy,
        :meth:`DriverCopy.sync`, else the pickled orchestrator); one streamed ``orchestrate`` call, whose events
        are yielded as they come and whose end state is applied to the driver's objects before its final event is
        yielded. A host without the copy answers ``ResidentMissItem``: the orchestrator is shipped again, once.
        A host found dead before the first item, whose pool turns out replaced, gets the run on the new pool, once.
        A run whose host died (:func:`~ray_harness.runtime._resend.resendable`) is sent again from this process's
        objects, under the same invocation id (see "Host loss" in :mod:`ray_harness.runtime._orchestrator`), at most
        ``RUN_RESENDS`` times; the events of node runs already yielded are not yielded again.
        """
        ensure_initialized()
        table = object_table(orchestrator)
        payload, sync, copy, pool_hosts = self._prepare(orchestrator, table)
        baselines = agent_baselines(table)  # the histories now: end-state deltas apply over them
        invocation_id = uuid.uuid4().hex  # kept when the run is sent again: its node runs keep their names
        retried = False
        resends = 0
        reported = ReportedRuns()
        while True:
            resident = copy if payload is None else None
            request = OrchestratorRequest(
                invocation_id=invocation_id, payload=payload, task=task, invocation_state=invocation_state,
                events=events, pool_hosts=pool_hosts,
                resident=self.resident, token=None if resident is None else resident.token, sync=sync,
                label=self.task_name)
            self.invocation = request.invocation_id
            assert self.client is not None  # chosen by _prepare
            items = _Shielded(self.client.stream("orchestrate", request, what=f"the run of {orchestrator.id!r}",
                                                 cancel=self.cancel))  # stopped early: stop the run
            missed = received = moved = lost = False
            try:
                if self.cancelled:
                    self.cancel()  # cancel() landed while the run was being shipped; the host applies it at start
                ended = False
                try:
                    async for item in items:
                        received = True
                        if isinstance(item, ResidentMissItem):
                            missed = True  # the last item: the stream ends
                            continue
                        ended = isinstance(item, EndItem)
                        for event in reported.passing(self._take(item, table, baselines, resident)):
                            yield event
                except (GeneratorExit, asyncio.CancelledError):  # the caller closed us, or its task was cancelled
                    await self._abort(items, table, baselines, resident, ended=ended)
                    raise
                except RemoteActorError as error:
                    next_step = self._after_loss(error, received=received, retried=retried,
                                                 can_resend=resends < RUN_RESENDS and resendable(table))
                    if next_step is None:
                        raise
                    moved, lost = next_step == "moved", next_step == "lost"
            finally:
                await items.aclose()  # sends the cancel while the invocation is still registered
                self.invocation = None
            if moved:  # its host was gone for good before the run began (its pool shut down elsewhere)
                retried = True
                payload, sync, copy, pool_hosts = self._prepare(orchestrator, table)
                continue
            if lost:  # the host died mid-run: the run again, from this process's objects (its end never came)
                resends += 1
                reported.resent()
                logger.warning("graph=<%s>, host=<%s>, attempt=<%d> | orchestration host lost mid-run; sending "
                               "the run again", orchestrator.id, self.name, resends + 1)
                self.checked = None  # a host gone for good (its pool shut down elsewhere) is replaced now
                payload, sync, copy, pool_hosts = self._prepare(orchestrator, table)  # no copy there: it ships
            elif missed:  # the host has no copy at that token (restarted, released, idle, evicted): ship it
                payload, sync, copy = dump_orchestrator(orchestrator, table), None, None
            else:
                return
