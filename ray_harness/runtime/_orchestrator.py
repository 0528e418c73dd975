"""The orchestrator actor of a Graph or Swarm (``runtime="ray"``, invoked from a driver).

With ``runtime="ray"`` the orchestration itself (readiness, joins, conditions,
limits, failure policies, hooks, interrupts) runs in one async actor per Graph
or Swarm instance, named ``ray_harness:graph:<id>`` / ``ray_harness:swarm:<id>``
in the driver's namespace (``"ray_harness"`` by default), so the Ray dashboard
shows it. Agent nodes still run on the shared pooled hosts
(:mod:`ray_harness.runtime._multiagent_pool`): the actor submits each ready
batch as parallel remote calls and handles completions as they arrive.

**Names.** ``<id>`` is the orchestrator's ``id`` when the user set one
(``GraphBuilder.set_graph_id``, ``Swarm(id=...)``) and no live actor of this
namespace has that name yet; the default ids (``default_graph``,
``default_swarm``) and taken names get ``-<8 hex>`` appended, so two instances
never share an actor and killing one never stops another's run.

**Lifetime.** The actor is created lazily at the first invocation from a
driver and reused by every later invocation of the same instance (an actor
costs ≈1 s and ≈50 MB). It is killed when the Graph/Swarm is garbage
collected, by ``graph.shutdown()`` / ``swarm.shutdown()``, and by
``ray_harness.runtime.shutdown()``. It holds no run state between invocations:
the orchestrator is shipped by value (cloudpickle) with each invocation.

**One invocation.** The driver pickles the Graph/Swarm (its agents with their
conversations, hooks, conditions), the actor unpickles it and runs its
``stream_async``; every event comes back, in order, as one item of a Ray
streaming generator. The last item carries the end-of-run state: the
orchestrators' attributes (results, scheduler, interrupt state, ...), their
nodes' attributes and each agent node's :class:`~ray_harness.agent.AgentSnapshot`.
The driver writes it into its own objects *before* it yields the final
``multiagent_result`` event, so after a run the driver's Graph/Swarm and node
Agents are authoritative and up to date (``graph.nodes["a"].executor.messages``,
interrupt resume by calling the driver's graph again, ``graph.state``). Node
objects, agents, edges, hook registries and session managers cross in both
directions as references (pickle persistent ids; :mod:`ray_harness.runtime._orchestrator_wire`),
so ``result.execution_order`` holds the driver's own ``GraphNode`` objects.

**What runs where.** Hooks registered on the Graph/Swarm (the multi-agent
events, ``BeforeNodeCallEvent`` interrupts and ``cancel_node``) and edge
conditions run in the orchestrator actor, as an agent's hooks run in its actor
for ``RemoteAgent``: state they keep in Python objects changes the actor's
copy, not the driver's (assert on results and events). ``MultiAgentInitializedEvent``
fires at construction, in the driver. ``invocation_state`` is shipped by value.

**Persistence.** Session managers stay in the driver: in the actor each one is
replaced by a relay whose writes travel back in the event stream, and the
driver writes them with its own session manager, in order. A new process
resumes a suspended run from the session store exactly as with
``runtime="local"`` (build the graph again with the same session manager and
call it with the interrupt responses); its invocation runs in its own
orchestrator actor.

**Cancel.** ``graph.cancel()`` in the driver is one message to the actor,
which cancels its copy of the run: the Ray node runner there broadcasts to every
host slot, RemoteAgent and nested orchestrator of the run. A cancel that
overtakes its invocation is remembered and applied when the run starts.

**Errors.** An exception raised by the run (``fail_fast``) is shipped back and
raised in the driver as its original type, never ``RayTaskError``; a dead
actor becomes :class:`~ray_harness.types.exceptions.RemoteActorError`.

**Not here.** Where the orchestration already runs inside an actor (an
evaluation row on a pooled host, a tool of a RemoteAgent, a nested Graph/Swarm
inside an orchestrator actor), no orchestrator actor is created: nested
orchestrators run inside their parent's orchestrator actor, their agent nodes
on the pool; graphs on pooled hosts run their nodes in that host's process.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import logging
import os
import queue
import threading
import uuid
import weakref
from collections.abc import AsyncGenerator
from typing import Any

import ray
from ray import cloudpickle as _cloudpickle

from ray_harness.multiagent.base import MultiAgentBase
from ray_harness.multiagent.node_runner import EventFilter
from ray_harness.multiagent.swarm import Swarm
from ray_harness.runtime._client import ActorClient
from ray_harness.runtime._cluster import current_namespace, ensure_initialized
from ray_harness.runtime._multiagent_pool import POOL_SIZE_ENV
from ray_harness.runtime._orchestrator_wire import (
    apply_end,
    by_table,
    dump_orchestrator,
    dumps,
    load_orchestrator,
    loads,
    object_table,
    pack_end,
)
from ray_harness.runtime._placement import placed
from ray_harness.runtime._telemetry import flush_metrics, flush_spans, prepare_actor_process, with_actor_env
from ray_harness.runtime._wire import (
    BatchItem,
    CancelRequest,
    EndItem,
    OrchestratorEventItem,
    OrchestratorRequest,
    SessionWriteItem,
)
from ray_harness.telemetry.propagation import attached

__all__ = ("ORCHESTRATOR_PREFIX", "OrchestratorActor", "OrchestratorClient", "drive", "shutdown_all")

logger = logging.getLogger(__name__)

cloudpickle: Any = _cloudpickle

ORCHESTRATOR_PREFIX = "ray_harness:"
_DEFAULT_IDS = ("default_graph", "default_swarm")  # the defaults of Graph(graph_id=...) and Swarm(id=...)
_EARLY_CANCELS = 1024  # cancels remembered for invocations that have not started (bounded)


# -- the actor -----------------------------------------------------------------------------------------------


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


class OrchestratorActor:
    """Runs Graph/Swarm invocations shipped by a driver (plain class; ``ray.remote`` in :func:`_actor_class`)."""

    def __init__(self) -> None:
        self._runs: dict[str, MultiAgentBase] = {}
        self._early: collections.OrderedDict[str, None] = collections.OrderedDict()

    async def ready(self) -> int:
        """Return the actor's process id, once it is up."""
        return os.getpid()

    async def running(self) -> list[str]:
        """Return the ids of the invocations running now."""
        return list(self._runs)

    async def stream(self, request: OrchestratorRequest
                     ) -> AsyncGenerator[OrchestratorEventItem | SessionWriteItem | BatchItem | EndItem, None]:
        """Run one invocation, streaming its events and session writes, and last its end state.

        Items that piled up while the previous one was sent travel as one ``BatchItem``; the last item is an
        ``EndItem`` with the end-of-run state.
        """
        prepare_actor_process()
        invocation_id, task, invocation_state = request.invocation_id, request.task, request.invocation_state
        # One channel, in order: the run's events and its session writes, as they happen.
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        orchestrator = load_orchestrator(request.payload, outbox)
        table = object_table(orchestrator)
        refs = {id(value): key for key, value in table.items()}
        await asyncio.to_thread(_warm_pools, table)  # pool look-ups block: not on this loop
        outcome: dict[str, Any] = {"final": None, "error": None}
        quiet = request.events == "result"
        events = (orchestrator._quiet_stream if quiet else orchestrator.stream_async)(task, invocation_state)
        self._runs[invocation_id] = orchestrator
        # The driver's span is the parent of invoke_graph/swarm; the run (its task copies this context) places
        # its orchestration here and its agent nodes on the pool.
        with attached(request.trace_context), placed("orchestrator"):
            pump = asyncio.ensure_future(_pump(events, outbox, refs, outcome))
        if self._early.pop(invocation_id, "absent") is None:
            # Runs after the pump's first step, once the run holds its lock (cancel() needs it).
            asyncio.get_running_loop().call_soon(orchestrator.cancel)
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
            yield EndItem.model_construct(payload=_dump_end(table, outcome["final"], outcome["error"], refs))
        finally:
            self._runs.pop(invocation_id, None)
            if not pump.done():
                pump.cancel()  # the driver went away: stop the run
                with contextlib.suppress(BaseException):
                    await pump
            await events.aclose()

    async def cancel(self, request: CancelRequest) -> bool:
        """Cancel the request's invocations; return whether one was running.

        Their node runners broadcast to every actor of the run; ids not running yet start cancelled.
        """
        running = False
        for invocation_id in request.invocation_ids or tuple(self._runs):
            orchestrator = self._runs.get(invocation_id)
            if orchestrator is None:
                self._early[invocation_id] = None
                while len(self._early) > _EARLY_CANCELS:
                    self._early.popitem(last=False)
                continue
            orchestrator.cancel()
            running = True
        return running


def _dump_end(table: dict[tuple[str, ...], Any], final: dict[str, Any] | None, error: Exception | None,
              refs: dict[int, tuple[str, ...]]) -> bytes:
    try:
        return dumps(pack_end(table, final, error), refs)
    except Exception as pickling_error:
        if error is None:
            raise
        logger.warning("error=<%s> | run error does not pickle; shipping its text", pickling_error)
        return dumps(pack_end(table, final, RuntimeError(f"{type(error).__name__}: {error}")), refs)


def _warm_pools(table: dict[tuple[str, ...], Any]) -> None:
    """Attach the node runners' host pools before the run (a blocking GCS look-up per host)."""
    for key, runner in table.items():
        if key[0] == "node_runner" and hasattr(runner, "pool"):
            runner.pool  # noqa: B018 - the property attaches (and checks) the pool


_ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 1000, "max_restarts": 0}


def _actor_class() -> Any:
    cached = _cache.get("class")
    if cached is None:
        cached = _cache["class"] = ray.remote(OrchestratorActor)
    return cached


_cache: dict[str, Any] = {}


# -- the driver's handle ---------------------------------------------------------------------------------------

_clients: weakref.WeakSet[OrchestratorClient] = weakref.WeakSet()
_clients_guard = threading.Lock()


def _kill(actor: Any, name: str) -> None:
    try:
        if ray.is_initialized():
            ray.kill(actor, no_restart=True)
    except Exception as error:  # a dead actor, a disconnected driver
        logger.debug("actor=<%s>, error=<%s> | orchestrator actor not killed", name, error)


# A finalizer runs inside garbage collection, which can happen inside Ray's own code (deserialization holds
# its locks): calling ray.kill there deadlocks. Finalizers only queue the actor; this thread kills it.
_doomed: queue.SimpleQueue[tuple[Any, str]] = queue.SimpleQueue()
_reaper: dict[str, threading.Thread] = {}


def _reap(actor: Any, name: str) -> None:
    _doomed.put((actor, name))  # SimpleQueue.put is safe in finalizers


def _reap_forever() -> None:
    while True:
        actor, name = _doomed.get()
        _kill(actor, name)


def _start_reaper() -> None:
    with _clients_guard:
        if "thread" not in _reaper:
            thread = threading.Thread(target=_reap_forever, name="ray_harness-orchestrator-reaper", daemon=True)
            thread.start()
            _reaper["thread"] = thread


class OrchestratorClient:
    """The driver's handle on one orchestrator actor: created lazily, killed with its owner (see module doc)."""

    def __init__(self, orchestrator: MultiAgentBase) -> None:
        ensure_initialized()
        self.namespace = current_namespace()
        kind = "swarm" if isinstance(orchestrator, Swarm) else "graph"
        wanted = str(orchestrator.id)
        options = _actor_options()
        actor = None
        if wanted not in _DEFAULT_IDS:
            actor = self._create(f"{ORCHESTRATOR_PREFIX}{kind}:{wanted}", options)
        if actor is None:
            actor = self._create(f"{ORCHESTRATOR_PREFIX}{kind}:{wanted}-{uuid.uuid4().hex[:8]}", options)
        if actor is None:  # pragma: no cover - 8 random hex digits collided
            raise RuntimeError(f"could not name the orchestrator actor of {kind} {wanted!r}")
        self.actor = actor
        self.client = ActorClient(actor, self.name)
        self.invocation: str | None = None
        _start_reaper()
        self._finalizer = weakref.finalize(self, _reap, actor, self.name)
        self._finalizer.atexit = False  # at exit the driver disconnects, which stops its actors
        with _clients_guard:
            _clients.add(self)

    def _create(self, name: str, options: dict[str, Any]) -> Any:
        try:
            actor = _actor_class().options(name=name, namespace=self.namespace, **options).remote()
        except ValueError as error:
            if "already" not in str(error) and "exist" not in str(error):
                raise
            return None
        self.name = name
        return actor

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def cancel(self) -> None:
        """Ask the running invocation to stop (fire and forget; safe from any thread)."""
        invocation = self.invocation
        if invocation is not None and not self.closed:
            self.client.submit("cancel", CancelRequest(invocation_ids=(invocation,)))

    def close(self) -> None:
        """Kill the actor now (idempotent)."""
        if self._finalizer.detach() is not None:
            _kill(self.actor, self.name)


def _actor_options() -> dict[str, Any]:
    options = dict(_ACTOR_OPTIONS)
    size = os.environ.get(POOL_SIZE_ENV)
    if size:  # the actor attaches to the pool this driver would use
        options["runtime_env"] = {"env_vars": {POOL_SIZE_ENV: size}}
    return with_actor_env(options)


def shutdown_all() -> None:
    """Kill every orchestrator actor this process created (``ray_harness.runtime.shutdown()``)."""
    with _clients_guard:
        clients = list(_clients)
    for client in clients:
        client.close()


# -- one invocation, seen from the driver -------------------------------------------------------------------


async def drive(client_of: Any, orchestrator: MultiAgentBase, task: Any, invocation_state: dict[str, Any],
                cancelled: Any = None, *, events: EventFilter = "all") -> AsyncGenerator[dict[str, Any], None]:
    """Run ``orchestrator``'s invocation in its actor; yields its events; applies the end state to it.

    ``client_of(orchestrator)`` returns the (lazily created) :class:`OrchestratorClient`; ``cancelled()``
    tells whether a cancel came before the invocation was registered with the client.
    """
    ensure_initialized()
    table = object_table(orchestrator)
    payload = dump_orchestrator(orchestrator, table)  # first: a graph that cannot ship starts no actor
    client: OrchestratorClient = client_of(orchestrator)
    request = OrchestratorRequest(invocation_id=uuid.uuid4().hex, payload=payload, task=task,
                                  invocation_state=invocation_state, events=events)
    resolve = by_table(table)
    client.invocation = request.invocation_id
    items = client.client.stream("stream", request, what=f"the run of {orchestrator.id!r}",
                                 cancel=client.cancel)  # the consumer stopped early: stop the run too
    try:
        if cancelled is not None and cancelled():
            client.cancel()  # cancel() landed while the run was being shipped; the actor applies it at start
        async for item in items:
            if isinstance(item, EndItem):
                end = loads(item.payload, resolve)
                apply_end(end, table)
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
