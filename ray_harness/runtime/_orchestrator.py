"""Where a Graph or Swarm invoked from a driver runs its orchestration (``runtime="ray"``).

With ``runtime="ray"`` the orchestration itself (readiness, joins, conditions, limits, failure policies,
hooks, interrupts) runs in a slot of a pre-started **orchestration host**: an
:class:`~ray_harness.runtime._host.AgentHost` named ``ray_harness:orchestrator:<i>``
(:func:`~ray_harness.runtime._multiagent_pool.orchestration_pool`, started with the node pool, one host by
default, ``RAY_HARNESS_ORCHESTRATION_HOSTS``). A new Graph/Swarm object starts no actor: it is keyed to one
orchestration host (``crc32(key) % size``, :class:`~ray_harness.runtime._orchestrator_client.OrchestratorClient`),
and each invocation is one streamed ``orchestrate`` call there, shown on the Ray dashboard as the task
``ray_harness.graph:<id>`` / ``ray_harness.swarm:<id>``. Agent nodes run on the shared node pool
(:mod:`ray_harness.runtime._multiagent_pool`): the orchestration submits each ready batch as parallel
remote calls and handles completions as they arrive. The orchestration hosts are not the node hosts on
purpose: a Ray actor that consumes a streaming generator of its own methods can wait forever for the next
item (reproduced on Ray 2.60), so an orchestration never sends a node to its own process.

This module is the host's side (:func:`run_request`); the driver's side is
:mod:`ray_harness.runtime._orchestrator_client`.

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
stopped run as with ``runtime="local"``. The stream is read shielded
(:class:`~ray_harness.runtime._orchestrator_client._Shielded`), so a driver whose task was cancelled can still read
it to its end.

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
import logging
import threading
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

from ray_harness.multiagent.base import MultiAgentBase
from ray_harness.runtime._multiagent_pool import pool_for_call, reset_pool_for_call, shipped_pool_ready
from ray_harness.runtime._orchestrator_wire import (
    agent_baselines,
    dumps,
    load_orchestrator,
    loads,
    object_table,
    pack_end,
)
from ray_harness.runtime._resident import Resident, Residents, apply_sync
from ray_harness.runtime._slots import RunBaseline
from ray_harness.runtime._telemetry import flush_metrics, flush_spans, prepare_actor_process
from ray_harness.runtime._wire import (
    BatchItem,
    EndItem,
    OrchestratorEventItem,
    OrchestratorRequest,
    ResidentMissItem,
    SessionWriteItem,
)
from ray_harness.telemetry.propagation import attached

__all__ = ("run_request",)

logger = logging.getLogger(__name__)

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
