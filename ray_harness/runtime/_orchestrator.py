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

**One invocation.** The driver pickles the Graph/Swarm (its agents with their conversations, hooks,
conditions), the host unpickles it (:func:`run_request`, under :class:`~ray_harness.runtime._orchestration.Orchestrations`)
and runs its ``stream_async`` under placement ``"orchestrator"``; every event comes back, in order, as one
item of a Ray streaming generator. The last item carries the end-of-run state: the orchestrators'
attributes (results, scheduler, interrupt state, ...), their nodes' attributes and each agent node's
:class:`~ray_harness.agent.AgentSnapshot`. The driver writes it into its own objects *before* it yields the
final ``multiagent_result`` event, so after a run the driver's Graph/Swarm and node Agents are
authoritative and up to date (``graph.nodes["a"].executor.messages``, interrupt resume by calling the
driver's graph again, ``graph.state``). Node objects, agents, edges, hook registries and session managers
cross in both directions as references (pickle persistent ids; :mod:`ray_harness.runtime._orchestrator_wire`),
so ``result.execution_order`` holds the driver's own ``GraphNode`` objects. The host keeps no run state
between invocations; the node slots keep the agents (:mod:`ray_harness.runtime.multiagent`).

**What runs where.** Hooks registered on the Graph/Swarm (the multi-agent events, ``BeforeNodeCallEvent``
interrupts and ``cancel_node``) and edge conditions run on the orchestration host, as an agent's hooks run
in its actor for ``RemoteAgent``: state they keep in Python objects changes the host's copy, not the
driver's (assert on results and events). ``MultiAgentInitializedEvent`` fires at construction, in the
driver. ``invocation_state`` is shipped by value.

**Persistence.** Session managers stay in the driver: on the host each one is replaced by a relay whose
writes travel back in the event stream, and the driver writes them with its own session manager, in order.
A new process resumes a suspended run from the session store exactly as with ``runtime="local"``.

**Cancel.** ``graph.cancel()`` in the driver is one ``cancel_orchestration`` message to the host (its
control concurrency group), handed to the run's event loop: the Ray node runner there broadcasts to every
host slot, RemoteAgent and nested orchestrator of the run. A cancel that overtakes its invocation is
remembered and applied when the run starts.

**Errors.** An exception raised by the run (``fail_fast``) is shipped back and raised in the driver as its
original type, never ``RayTaskError``; a dead host becomes :class:`~ray_harness.types.exceptions.RemoteActorError`.

**Not here.** Where the orchestration already runs inside an actor (an evaluation row on a pooled host, a
tool of a RemoteAgent, a nested Graph/Swarm inside an orchestration), nothing is shipped: nested
orchestrators run inside their parent's orchestration, their agent nodes on the pool; graphs on pooled
hosts run their nodes in that host's process.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import uuid
import zlib
from collections.abc import AsyncGenerator, Callable
from typing import Any

from ray import cloudpickle as _cloudpickle

from ray_harness.multiagent.base import MultiAgentBase
from ray_harness.multiagent.node_runner import EventFilter
from ray_harness.multiagent.swarm import Swarm
from ray_harness.runtime._client import ActorClient
from ray_harness.runtime._cluster import ensure_initialized
from ray_harness.runtime._multiagent_pool import (
    orchestration_pool,
    pool_size_for_call,
    reset_pool_size,
)
from ray_harness.runtime._orchestrator_wire import (
    agent_baselines,
    apply_end,
    by_table,
    dump_orchestrator,
    dumps,
    load_orchestrator,
    loads,
    object_table,
    pack_end,
)
from ray_harness.runtime._slots import RunBaseline
from ray_harness.runtime._telemetry import flush_metrics, flush_spans, prepare_actor_process
from ray_harness.runtime._wire import (
    BatchItem,
    CancelRequest,
    EndItem,
    OrchestratorEventItem,
    OrchestratorRequest,
    SessionWriteItem,
)
from ray_harness.telemetry.propagation import attached

__all__ = ("OrchestratorClient", "drive", "run_request")

logger = logging.getLogger(__name__)

cloudpickle: Any = _cloudpickle



# -- the host's side -----------------------------------------------------------------------------------------------


_DONE = object()


async def _pump(events: AsyncGenerator[dict[str, Any], None], outbox: asyncio.Queue[Any],
                refs: dict[int, tuple[str, ...]], outcome: dict[str, Any]) -> None:
    """Run the invocation, putting its events on ``outbox``; the final result and any error go to ``outcome``."""
    try:
        async for event in events:
            if event.get("type") == "multiagent_result":
                outcome["final"] = event  # held back: the driver applies the end state before yielding it
                continue
            outbox.put_nowait(OrchestratorEventItem.model_construct(payload=dumps(event, refs)))
    except Exception as failure:
        outcome["error"] = failure
    finally:
        outbox.put_nowait(_DONE)


async def run_request(request: OrchestratorRequest, started: Callable[[Any], None]
                      ) -> AsyncGenerator[OrchestratorEventItem | SessionWriteItem | BatchItem | EndItem, None]:
    """Run one shipped invocation, streaming its events and session writes, and last its end state.

    ``started(orchestrator)`` is called once the run exists (for cancel). Items that piled up while the
    previous one was sent travel as one ``BatchItem``; the last item is an ``EndItem`` with the end-of-run
    state. Runs under the placement its caller set (``"orchestrator"``).
    """
    prepare_actor_process()
    task, invocation_state = request.task, request.invocation_state
    # One channel, in order: the run's events and its session writes, as they happen.
    outbox: asyncio.Queue[Any] = asyncio.Queue()
    orchestrator = load_orchestrator(request.payload, outbox)
    table = object_table(orchestrator)
    baselines = agent_baselines(table)  # the histories as shipped: the end state sends deltas over them
    refs = {id(value): key for key, value in table.items()}
    size_token = pool_size_for_call(request.pool_size)
    try:
        await asyncio.to_thread(_warm_pools, table)  # pool look-ups block: not on this loop
        outcome: dict[str, Any] = {"final": None, "error": None}
        quiet = request.events == "result"
        events = (orchestrator._quiet_stream if quiet else orchestrator.stream_async)(task, invocation_state)
        # The driver's span is the parent of invoke_graph/swarm; the run (its task copies this context) places
        # its orchestration here and its agent nodes on the pool.
        with attached(request.trace_context):
            pump = asyncio.ensure_future(_pump(events, outbox, refs, outcome))
    finally:
        reset_pool_size(size_token)
    started(orchestrator)
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
        flush_metrics()  # the run's node durations too (in-process hand-off to Ray, cheap)
        yield EndItem.model_construct(payload=_dump_end(table, outcome["final"], outcome["error"], refs,
                                                        baselines))
    finally:
        if not pump.done():
            pump.cancel()  # the driver went away: stop the run
            with contextlib.suppress(BaseException):
                await pump
        await events.aclose()


def _dump_end(table: dict[tuple[str, ...], Any], final: dict[str, Any] | None, error: Exception | None,
              refs: dict[int, tuple[str, ...]], baselines: dict[tuple[str, ...], RunBaseline]) -> bytes:
    try:
        return dumps(pack_end(table, final, error, baselines), refs)
    except Exception as pickling_error:
        if error is None:
            raise
        logger.warning("error=<%s> | run error does not pickle; shipping its text", pickling_error)
        return dumps(pack_end(table, final, RuntimeError(f"{type(error).__name__}: {error}"), baselines), refs)


def _warm_pools(table: dict[tuple[str, ...], Any]) -> None:
    """Attach the node runners' host pools before the run (a blocking GCS look-up per host)."""
    for key, runner in table.items():
        if key[0] == "node_runner" and hasattr(runner, "pool"):
            runner.pool  # noqa: B018 - the property attaches (and checks) the pool


class OrchestratorClient:
    """The driver's handle on where one Graph/Swarm object's invocations run: one orchestration host.

    The object is keyed to one host of the orchestration pool (``crc32(key) % size``); no actor is started
    for it. Its invocations appear on the dashboard as tasks ``ray_harness.graph:<id>`` /
    ``ray_harness.swarm:<id>`` of that host.
    """

    def __init__(self, orchestrator: MultiAgentBase, key: str) -> None:
        pool = self.pool = orchestration_pool()  # the pool it was built from (see current())
        index = zlib.crc32(key.encode()) % pool.size
        self.name = pool.host_names[index]
        self.client = ActorClient(pool.hosts[index], self.name)
        kind = "swarm" if isinstance(orchestrator, Swarm) else "graph"
        self.task_name = f"ray_harness.{kind}:{orchestrator.id}"
        self.invocation: str | None = None
        self.pool_size: int | None = None  # the size of the driver's default pool, for the host's copy of it

    def current(self) -> bool:
        """Whether the orchestration pool this client was built from is still the live one (a GCS lookup per host).

        Called once per invocation; a client of a pool that was replaced (shut down by another driver, Ray
        restarted) is built again.
        """
        return orchestration_pool() is self.pool

    def cancel(self) -> None:
        """Ask the running invocation to stop (fire and forget; safe from any thread)."""
        invocation = self.invocation
        if invocation is not None:
            self.client.submit("cancel_orchestration", CancelRequest(invocation_ids=(invocation,)))


# -- one invocation, seen from the driver -------------------------------------------------------------------


async def drive(client_of: Any, orchestrator: MultiAgentBase, task: Any, invocation_state: dict[str, Any],
                cancelled: Any = None, *, events: EventFilter = "all") -> AsyncGenerator[dict[str, Any], None]:
    """Run ``orchestrator``'s invocation on its orchestration host; yields its events; applies the end state.

    ``client_of(orchestrator)`` returns its :class:`OrchestratorClient`; ``cancelled()`` tells whether a cancel
    came before the invocation was registered with the client.
    """
    ensure_initialized()
    table = object_table(orchestrator)
    payload = dump_orchestrator(orchestrator, table)  # first: a graph that cannot ship sends nothing
    baselines = agent_baselines(table)  # the histories as shipped: end-state deltas apply over them
    client: OrchestratorClient = client_of(orchestrator)
    request = OrchestratorRequest(invocation_id=uuid.uuid4().hex, payload=payload, task=task,
                                  invocation_state=invocation_state, events=events, pool_size=client.pool_size)
    resolve = by_table(table)
    client.invocation = request.invocation_id
    items = client.client.stream("orchestrate", request, what=f"the run of {orchestrator.id!r}",
                                 cancel=client.cancel, task=client.task_name)  # the consumer stopped early: stop the run too
    try:
        if cancelled is not None and cancelled():
            client.cancel()  # cancel() landed while the run was being shipped; the host applies it at start
        async for item in items:
            if isinstance(item, EndItem):
                end = loads(item.payload, resolve)
                apply_end(end, table, baselines)
                if end.error is not None:
                    raise end.error
                if end.final is not None:
                    yield end.final
                continue
            for part in (item.items if isinstance(item, BatchItem) else [item]):
                if isinstance(part, OrchestratorEventItem):
                    yield loads(part.payload, resolve)
                else:
                    _save(table[("orch", part.path)], part.data)
    finally:
        await items.aclose()  # sends the cancel while the invocation is still registered
        client.invocation = None


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
