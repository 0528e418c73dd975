"""Where a Graph or Swarm invoked from a driver runs its orchestration (``runtime="ray"``).

With ``runtime="ray"`` the orchestration itself (readiness, joins, conditions, limits, failure policies,
hooks, interrupts) runs in a slot of a pre-started **orchestration host**: an
:class:`~ray_harness.runtime._host.AgentHost` named ``ray_harness:orchestrator:<i>``
(:func:`~ray_harness.runtime._multiagent_pool.orchestration_pool`, started with the node pool, one host by
default, ``RAY_HARNESS_ORCHESTRATION_HOSTS``). A new Graph/Swarm object starts no actor: it is keyed to one
orchestration host (``crc32(key) % size``, :class:`OrchestratorClient`), and each invocation is one
streamed ``orchestrate`` call there, shown on the Ray dashboard as the task ``ray_harness.graph:<id>`` /
``ray_harness.swarm:<id>``. Agent nodes run on the shared node pool
(:mod:`ray_harness.runtime._multiagent_pool`): the orchestration submits each ready batch as parallel
remote calls and handles completions as they arrive. The orchestration hosts are not the node hosts on
purpose: a Ray actor that consumes a streaming generator of its own methods can wait forever for the next
item (reproduced on Ray 2.60), so an orchestration never sends a node to its own process.

**One invocation.** The first invocation of a Graph/Swarm object pickles it (its agents with their
conversations, hooks, conditions) and ships it; the host unpickles it (:func:`run_request`, under
:class:`~ray_harness.runtime._orchestration.Orchestrations`), runs its ``stream_async`` under placement
``"orchestrator"`` and **keeps that copy resident** (:mod:`ray_harness.runtime._resident`), so every later
invocation sends only the task and what the driver changed meanwhile (changed agents as snapshots, reassigned
run state; a changed structure or a host without the copy ships the object again). Every event comes back, in
order, as one item of a Ray streaming generator. The last item carries the end-of-run state: each orchestrator's
run state (results, scheduler, interrupt state, ...) and each agent node's :class:`~ray_harness.agent.AgentSnapshot`
(a delta over the history it started from, when it only appended) with a token naming that copy. The driver
writes it into its own objects *before* it yields the final ``multiagent_result`` event, so after a run the
driver's Graph/Swarm and node Agents are authoritative and up to date (``graph.nodes["a"].executor.messages``,
interrupt resume by calling the driver's graph again, ``graph.state``), and agree with the host's copy. Node
objects, agents, edges, hook registries and session managers cross in both directions as references
(:mod:`ray_harness.runtime._orchestrator_wire`), so ``result.execution_order`` holds the driver's own
``GraphNode`` objects. The resident copy goes with the node slots (``shutdown()``, garbage collection,
``ray_harness.runtime.shutdown()``, the idle timeout); the node slots keep the agents
(:mod:`ray_harness.runtime.multiagent`).

**What runs where.** Hooks registered on the Graph/Swarm (the multi-agent events, ``BeforeNodeCallEvent``
interrupts and ``cancel_node``) and edge conditions run on the orchestration host, as an agent's hooks run
in its actor for ``RemoteAgent``: state they keep in Python objects lives in the host's resident copy — it
carries over between invocations of the same object, as in-process, but the driver's objects do not see it
(assert on results and events). Hooks or conditions added to the driver's object after its first invocation
ship it again; other configuration edits need ``shutdown()`` first. ``MultiAgentInitializedEvent`` fires at
construction, in the driver. ``invocation_state`` is shipped by value.

**Persistence.** Session managers stay in the driver: on the host each one is replaced by a relay whose
writes travel back in the event stream, and the driver writes them with its own session manager, in order.
A new process resumes a suspended run from the session store exactly as with ``runtime="local"``.

**Cancel.** ``graph.cancel()`` in the driver is one ``cancel_orchestration`` message to the host (its
control concurrency group), handed to the run's event loop: the Ray node runner there broadcasts to every
host slot, RemoteAgent and nested orchestrator of the run. A cancel that overtakes its invocation is
remembered and applied when the run starts. A caller that stops reading mid-run (``aclose()``, its task
cancelled) aborts it instead (:class:`~ray_harness.runtime._orchestration.AbortRequest`): the host stops the run as
closing its stream does in-process, and the driver applies the end state it still sends, so its objects show the
stopped run as with ``runtime="local"``. The stream is read shielded (:class:`_Shielded`), so a driver whose task
was cancelled can still read it to its end.

**Errors.** An exception raised by the run (``fail_fast``) is shipped back and raised in the driver as its
original type, never ``RayTaskError``; a dead host becomes :class:`~ray_harness.types.exceptions.RemoteActorError`.

**Host loss.** When the orchestration host dies with a Graph/Swarm run in it (a crash, ``kill -9``; Ray restarts
the host), the driver sends the run again (:mod:`ray_harness.runtime._resend`: up to three times) under the same
invocation id, shipping the Graph/Swarm from its own objects, which still hold the state from before the run (its
end never came). The run starts over there, and its node runs carry the same names (:meth:`RayNodeRunner.name_runs
<ray_harness.runtime.multiagent.RayNodeRunner.name_runs>`): a node slot answers a run it had completed with what
that run sent — its events (a Swarm hands off again from them), its result and the state it left
(``runtime._slots``, "Re-sent runs") — so completed nodes and their tools do not run again; the node that was
running runs again unless it finished meanwhile (the re-sent request waits for it on its host; a ``RemoteAgent``
node's actor then answers from its journal). A slot keeps the last ``KEPT_RUNS`` (8) completed runs of the
latest run so, also of a copy the driver had changed (matched by the state it sent): older ones run again from
the driver's state (at-least-once, tools included). A cancel that reached the lost run holds for its re-send.
The driver does not yield the events of node runs and handoffs it already yielded; of the run that was going on,
it holds back the events that repeat what it yielded (a slot that answers it as completed meanwhile sends them
all again) and, when the run went differently (it ran again), yields it from its start
(:class:`~ray_harness.runtime._resend.ReportedRuns`). The hooks and edge conditions of the Graph/Swarm run again
on the new host (what they kept in the lost copy is gone), and relayed session writes are written again. A Swarm
with a member that is not an ``Agent`` (not in a slot: nothing would answer its handoff events again) still fails
with ``RemoteActorError``; the next invocation starts from the driver's objects.

**Not here.** Where the orchestration already runs inside an actor (an evaluation row on a pooled host, a
tool of a RemoteAgent, a nested Graph/Swarm inside an orchestration), nothing is shipped: nested
orchestrators run inside their parent's orchestration, their agent nodes on the pool; graphs on pooled
hosts run their nodes in that host's process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import threading
import time
import uuid
import zlib
from collections.abc import AsyncGenerator, Callable
from typing import Any, Literal

import ray

from ray_harness.multiagent.base import MultiAgentBase
from ray_harness.multiagent.node_runner import EventFilter
from ray_harness.multiagent.swarm import Swarm
from ray_harness.runtime._client import ActorClient
from ray_harness.runtime._cluster import ensure_initialized
from ray_harness.runtime._host_registry import retirements
from ray_harness.runtime._multiagent_pool import (
    default_pool,
    orchestration_pool,
    pool_for_call,
    reset_pool_for_call,
    shipped_pool_ready,
)
from ray_harness.runtime._orchestration import AbortRequest
from ray_harness.runtime._orchestrator_wire import (
    agent_baselines,
    apply_end,
    dump_orchestrator,
    dumps,
    load_orchestrator,
    loads,
    object_table,
    pack_end,
)
from ray_harness.runtime._resend import RUN_RESENDS, ReportedRuns, resendable
from ray_harness.runtime._resident import DriverCopy, Resident, Residents, apply_sync
from ray_harness.runtime._slot_lease import SlotLease
from ray_harness.runtime._slots import RunBaseline
from ray_harness.runtime._telemetry import flush_metrics, flush_spans, prepare_actor_process
from ray_harness.runtime._wire import (
    BatchItem,
    CancelRequest,
    EndItem,
    OrchestratorEventItem,
    OrchestratorRequest,
    ResidentMissItem,
    SessionWriteItem,
)
from ray_harness.runtime.pool import AgentPool
from ray_harness.telemetry.propagation import attached
from ray_harness.types.exceptions import RemoteActorError

__all__ = ("OrchestratorClient", "run_request")

logger = logging.getLogger(__name__)


# -- the host's side -----------------------------------------------------------------------------------------------


_DONE = object()


async def _pump(events: AsyncGenerator[dict[str, Any], None], outbox: asyncio.Queue[Any],
                refs: dict[int, tuple[str, ...]], outcome: dict[str, Any]) -> None:
    """Run the invocation, putting its events on ``outbox``; the final result and any error go to ``outcome``.

    Its task puts ``_DONE`` on ``outbox`` when it ends (see :func:`run_request`), also when cancelled before its
    first step.
    """
    try:
        async for event in events:
            if event.get("type") == "multiagent_result":
                outcome["final"] = event  # held back: the driver applies the end state before yielding it
                continue
            outbox.put_nowait(OrchestratorEventItem.model_construct(payload=dumps(event, refs)))
    except Exception as failure:
        outcome["error"] = failure


class _Control:
    """How :class:`~ray_harness.runtime._orchestration.Orchestrations` stops one run: cancel it, or abort it."""

    def __init__(self, orchestrator: MultiAgentBase, pump: asyncio.Future[None]) -> None:
        self._orchestrator = orchestrator
        self._pump = pump

    def cancel(self) -> None:
        """``graph.cancel()`` / ``swarm.cancel()`` in the driver."""
        self._orchestrator.cancel()

    def abort(self) -> None:
        """The driver's caller stopped reading: stop the run where it is, as closing its stream does in-process.

        The orchestrator's stream gets the cancellation at the await it is in (its running nodes stop, its
        ``finally`` clauses and after-invocation hooks run, as for ``aclose()``); the end state is still sent.
        """
        self._pump.cancel()


async def run_request(request: OrchestratorRequest, started: Callable[[Any], None], residents: Residents
                      ) -> AsyncGenerator[OrchestratorEventItem | SessionWriteItem | BatchItem | EndItem
                                          | ResidentMissItem, None]:
    """Run one invocation, streaming its events and session writes, and last its end state.

    The orchestrator is the request's (shipped) or the resident copy it names (:mod:`ray_harness.runtime._resident`;
    a ``ResidentMissItem`` when there is none at its token). ``started(run)`` is called once the run exists, with
    what stops it (``cancel()``, ``abort()``). Items that piled up while the previous one was sent travel as one
    ``BatchItem``; the last item is an ``EndItem`` with the end-of-run state. Runs under the placement its caller
    set (``"orchestrator"``).
    """
    prepare_actor_process()
    task, invocation_state = request.task, request.invocation_state
    # One channel, in order: the run's events and its session writes, as they happen.
    outbox: asyncio.Queue[Any] = asyncio.Queue()
    found = _orchestrator_of(request, residents, outbox)
    if found is None:
        assert request.resident is not None  # checked by the request's model
        yield ResidentMissItem(resident=request.resident)
        return
    orchestrator, table, resident = found
    refs = {id(value): key for key, value in table.items()}
    if request.sync is not None:
        sync = loads(request.sync, table)
        apply_sync(sync, table)
    baselines = agent_baselines(table)  # the histories now: the end state sends deltas over them
    pool_token = pool_for_call(request.pool_hosts)
    try:
        await _attach_pools(table, request.pool_hosts)
        outcome: dict[str, Any] = {"final": None, "error": None}
        quiet = request.events == "result"
        events = (orchestrator._quiet_stream if quiet else orchestrator.stream_async)(task, invocation_state)
        # The driver's span is the parent of invoke_graph/swarm; the run (its task copies this context) places
        # its orchestration here and its agent nodes on the pool.
        with attached(request.trace_context):
            pump = asyncio.ensure_future(_pump(events, outbox, refs, outcome))
        pump.add_done_callback(lambda _: outbox.put_nowait(_DONE))
    finally:
        reset_pool_for_call(pool_token)
    started(_Control(orchestrator, pump))
    try:
        done = False
        while not done:
            items = [await outbox.get()]
            while not outbox.empty():  # what piled up meanwhile travels as one Ray object
                items.append(outbox.get_nowait())
            if items[-1] is _DONE:
                items.pop()
                done = True
            if items:
                yield items[0] if len(items) == 1 else BatchItem.model_construct(items=items)
        # Start exporting invoke_graph/execute_node spans now, before a kill can lose them; not awaited:
        # an unreachable collector must not delay the end of the run.
        threading.Thread(target=flush_spans, name="ray_harness-span-flush", daemon=True).start()
        end = _dump_end(table, outcome["final"], outcome["error"], refs, baselines)
        token = None
        if resident is not None and request.resident is not None:
            # Kept before the end state is sent: the driver's next request may come as soon as it has it.
            token = resident.token = uuid.uuid4().hex
            residents.keep(request.resident, resident)
        yield EndItem.model_construct(payload=end, token=token)
        # The run's node durations and run record reach Ray now rather than at the next periodic flush; after the
        # end item, so the driver applies the end state meanwhile (a flush costs 0.3-1.5 ms and a GCS write).
        flush_metrics()
    finally:
        if not pump.done():
            pump.cancel()  # the driver went away: stop the run
            with contextlib.suppress(BaseException):
                await pump
        await events.aclose()


def _orchestrator_of(request: OrchestratorRequest, residents: Residents, outbox: asyncio.Queue[Any]
                     ) -> tuple[MultiAgentBase, dict[tuple[str, ...], Any], Resident | None] | None:
    """The request's orchestrator, its object table and its resident entry; ``None``: no resident copy at its token.

    A shipped orchestrator is kept resident when the request names a key. Either way its node runs are named
    after the request's invocation id (the same names when the driver sends the run again).
    """
    resident: Resident | None = None
    kept = False  # a copy shipped now that stays here: its node runners keep their copies
    if request.payload is None:
        assert request.resident is not None and request.token is not None  # checked by the request's model
        resident = residents.take(request.resident, request.token)
        if resident is None:
            return None
        orchestrator, table = resident.orchestrator, resident.table
        resident.bind(outbox)
    else:
        relays: list[Any] = []
        orchestrator = load_orchestrator(request.payload, outbox, relays)
        table = object_table(orchestrator)
        if request.resident is not None:
            resident = Resident(orchestrator, table, "", functools.partial(_bind_relays, relays))
            kept = True
    for runner in _node_runners(table):
        if kept:
            runner.keep_copies()
        runner.name_runs(request.invocation_id)
    return orchestrator, table, resident


def _dump_end(table: dict[tuple[str, ...], Any], final: dict[str, Any] | None, error: Exception | None,
              refs: dict[int, tuple[str, ...]], baselines: dict[tuple[str, ...], RunBaseline]) -> bytes:
    try:
        return dumps(pack_end(table, final, error, baselines), refs)
    except Exception as pickling_error:
        if error is None:
            raise
        logger.warning("error=<%s> | run error does not pickle; shipping its text", pickling_error)
        return dumps(pack_end(table, final, RuntimeError(f"{type(error).__name__}: {error}"), baselines), refs)


def _bind_relays(relays: list[Any], outbox: asyncio.Queue[Any]) -> None:
    for relay in relays:
        relay.bind(outbox)


def _node_runners(table: dict[tuple[str, ...], Any]) -> list[Any]:
    """The tree's Ray node runners (the ones with slots)."""
    return [runner for key, runner in table.items() if key[0] == "node_runner" and hasattr(runner, "check_pool")]


async def _attach_pools(table: dict[tuple[str, ...], Any], hosts: tuple[str, ...] | None) -> None:
    """Have the node runners' pools ready before the run: at once when the driver's is known here already."""
    if hosts is None or not shipped_pool_ready(hosts):
        await asyncio.to_thread(_warm_pools, table)  # pool look-ups block: not on this loop


def _warm_pools(table: dict[tuple[str, ...], Any]) -> None:
    """Attach (and check) the node runners' host pools before the run (a blocking GCS look-up per host)."""
    for runner in _node_runners(table):
        runner.check_pool()


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
                _save(table[("orch", part.path)], part.data)
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
        objects, under the same invocation id (see "Host loss" in the module docstring), at most ``RUN_RESENDS`` times; the
        events of node runs already yielded are not yielded again.
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


def _save(orchestrator: MultiAgentBase, data: dict[str, Any]) -> None:
    """Write a relayed snapshot with the driver's session manager (with ``multi_agent_id`` when it takes one)."""
    store = getattr(orchestrator, "session_manager", None)
    if store is None:
        return
    method = store.write_multi_agent_json
    try:
        takes_id = "multi_agent_id" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        takes_id = False
    if takes_id:
        method(data, multi_agent_id=orchestrator.id)
    else:
        method(data)
