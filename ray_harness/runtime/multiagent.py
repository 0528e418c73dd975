"""``RayNodeRunner``: Graph and Swarm on Ray (``build(runtime="ray")``, ``Swarm(..., runtime="ray")``).

Invoked from a driver, the orchestration (Graph or Swarm: readiness, joins,
conditions, limits, failure policies, hooks, interrupts) runs in the
slot of a pre-started orchestration host (``ray_harness:orchestrator:<i>``, see
:mod:`ray_harness.runtime._orchestrator`; no actor per Graph/Swarm):
:meth:`RayNodeRunner.stream_orchestrator` ships the orchestrator there and
streams its events back. It is the same code as with ``runtime="local"``; on
the host, a ``RayNodeRunner`` runs the nodes:

* **Agent nodes are resident** in slots of a pre-started pool of async host
  actors (:func:`~ray_harness.runtime._multiagent_pool.default_pool`, or the
  pool given; :mod:`ray_harness.runtime._slots`). Each node has the slot
  ``"<uid>/<node id>"``: ``<uid>`` is created with the node runner in the
  driver and kept through pickling, so the orchestrator's per-invocation copy
  and every later invocation of the same Graph/Swarm object address the same
  slots. A Graph/Swarm spreads its nodes over the hosts in turn; a node stays
  on its host. The agent (its spec) ships with the slot's first request only;
  later requests carry the key, the prompt and the invocation state. A host that
  does not have the slot (restarted, released, idle) answers "unknown slot"
  and the request is sent once more with the agent. The hook registry,
  middleware, interventions, conversation manager, tools and the model live in
  the slot: a hook object counts across revisits and invocations as
  in-process. Configuration edits to the driver's copy after the first run
  do not reach the slot (a new Graph/Swarm, or ``shutdown()``, ships them).
  The orchestrator starts every node of a ready batch at once; the nodes
  that share a host go there in one streamed call (``AgentHost.stream_many``,
  :mod:`ray_harness.runtime._stream_batching`), which runs them concurrently
  and streams their items back multiplexed, each node's to its own stream
  (its events, slot misses, errors and cancel as with a call of its own).
  No actor is created per node execution.
* **Node state, typed both ways.** Each result comes back with the slot's
  :class:`~ray_harness.agent.AgentSnapshot` and revision — a
  :class:`~ray_harness.agent.SnapshotDelta` (the appended messages and the
  rest of the state) when the run only appended to the history the copy has,
  so a long history does not travel after every node run; the orchestrator
  restores it into its copy of the agent (so hooks of the Graph/Swarm,
  interrupts, failures and session writes see the node's state), and the
  orchestration host sends the copies' snapshots to the driver at the end of
  the invocation (``graph.nodes[id].executor.messages``). A request names the
  revision its copy matches (a slot at another one answers "stale" and gets
  the copy's snapshot). When the copy changed — ``reset_on_revisit``,
  ``reset_members``, a session restore (``import_node_state``), or the
  user's edit of the driver's agent between invocations (found by a digest of
  messages, state and interrupt state, :func:`~ray_harness.runtime._slots.conversation_digest`)
  — the request carries the copy's snapshot and the slot restores it before
  the run: a restore message, never a re-ship. The digest's messages part is
  a chain (:class:`~ray_harness.runtime._slots.MessagesDigest`) that deltas
  extend, so a copy's history is hashed once per invocation. The revisions and digests come
  back to the driver's node runner in the run state (:meth:`RayNodeRunner.run_state`).
  Side effects inside tool or hook objects stay in the slot, as do changes the
  run makes to ``invocation_state``.
* **Swarm handoffs are messages** to the next member's slot: the handoff
  message and shared context (the member prompt), never the sender's history
  or the member itself; members keep their own histories in their slots; the
  handoff tool was added at construction and shipped with the member once.
  The swarm learns about a handoff from the member's streamed tool events.
* **Release.** ``graph.shutdown()`` / ``swarm.shutdown()``, garbage collection
  of the driver's Graph/Swarm (a weakref finalizer) and
  ``ray_harness.runtime.shutdown()`` release the slots (the driver's lease,
  :mod:`ray_harness.runtime._slot_lease`; one message per host,
  by key prefix; nested Graph/Swarm nodes' too); a host drops slots idle for
  ``RAY_HARNESS_SLOT_IDLE_TIMEOUT`` seconds (default 600; ``0``: never).
* **Nested Graph/Swarm nodes** run their own orchestration in the parent's
  orchestration (nothing shipped), their agent nodes on the pool
  through their own node runner.
* **RemoteAgent nodes** call their dedicated actor; that actor keeps the
  history (``reset_on_revisit`` is not supported for them).
* **A2AAgent nodes** (:class:`~ray_harness.serve.A2AAgent`) are HTTP clients of
  a remote server that keeps their history: they run in the orchestration's
  process (nothing shipped to the pool), as with ``runtime="local"``. What a
  call changes in the copy there (messages, state, the interrupt state a
  resume needs) comes back to the driver's A2AAgent with the run state
  (:meth:`RayNodeRunner.run_state`).
* **Cancel** (``graph.cancel()`` / ``swarm.cancel()``) in the driver is one
  message to the orchestration host; there it broadcasts with one
  :class:`~ray_harness.runtime.RunHandle` to every host slot of the run at
  once, plus every RemoteAgent node and nested orchestrator; hosts handle it
  mid-call. Nodes started after a cancel start cancelled.

``invocation_state`` is shipped to the orchestration host and the hosts, so it
must pickle; changes the run makes to it stay there.

A graph or swarm that itself runs inside another Ray actor (an evaluation row
on a host, a tool of a RemoteAgent) is already placed — the actor says so for
the calls it serves (:mod:`ray_harness.runtime._placement`); nothing here asks
which process it is in: it ships nothing and its nodes run in
that actor's process, as with ``runtime="local"``. Fanning out again from
inside a host could wait on the host's own event loop.

``runtime=RayRuntime(pool=...)`` is the object form of ``runtime="ray"`` with a
pool of one's own.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
import uuid
import weakref
import zlib
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from ray_harness.agent.result import AgentResult
from ray_harness.agent.snapshot import SnapshotDelta, conversation, restore_snapshot, take_snapshot
from ray_harness.multiagent.base import MultiAgentBase, NodeResult
from ray_harness.multiagent.node_runner import EventFilter, LocalNodeRunner, node_result_from_agent
from ray_harness.runtime._cancel import RunHandle
from ray_harness.runtime._multiagent_pool import default_pool
from ray_harness.runtime._orchestrator_client import OrchestratorClient
from ray_harness.runtime._placement import current_placement
from ray_harness.runtime._slot_lease import SlotLease, leases, release_all_slots, release_later
from ray_harness.runtime._slots import MessagesDigest, conversation_digest, slot_key
from ray_harness.runtime._wire import EventItem, InvokeRequest, ResultItem, SlotSync, pack_snapshot
from ray_harness.runtime.pool import AgentPool
from ray_harness.runtime.remote_agent import RemoteAgent
from ray_harness.serve.client import A2AAgent

__all__ = ("RayNodeRunner", "RayRuntime", "release_all_slots")

logger = logging.getLogger(__name__)

# Node runner ids: this process's random part and a counter. A uuid4 each (a getrandom call) was ≈2 % of a host's
# CPU in an evaluation, whose rows each build a graph there; a forked child draws its own random part.
_NEXT_ID = itertools.count()
_PROCESS_ID = ""


def _new_process_id() -> None:
    global _PROCESS_ID
    _PROCESS_ID = uuid.uuid4().hex[:10]


_new_process_id()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_process_id)


def _unique_id() -> str:
    """An id (16 hex digits) that no other node runner of this or another process has."""
    return f"{_PROCESS_ID}{next(_NEXT_ID):06x}"


class RayNodeRunner:
    """Runs the nodes of one Graph or Swarm on Ray (see the module docstring).

    Args:
        pool: The host pool for agent nodes; default: the namespace's shared pool, started (with an
            embedded local Ray if none is running) when the first agent node runs.

    """

    runtime = "ray"

    def __init__(self, pool: AgentPool | None = None) -> None:
        if pool is not None and not isinstance(pool, AgentPool):
            raise TypeError(f"pool must be an AgentPool, got {type(pool).__name__}")
        self._pool = pool
        self._nodes: dict[str, Any] = {}
        self._local = LocalNodeRunner()  # nested orchestrators and the orchestrator-side node state
        self._cancelled = False
        self._uid = _unique_id()  # the slots' address: "<uid>/<node id>", kept through pickling
        self._synced: dict[str, tuple[int, str | None]] = {}  # node id -> (slot revision, digest of that state)
        self._dirty: set[str] = set()  # nodes whose copy changed here (reset, session restore) since it matched
        self._setup()
        # Only the object built here (the driver's) releases the slots: its copies in orchestrators do not.
        self._lease: SlotLease | None = SlotLease(f"{self._uid}/", pool)
        leases.add(self._lease)
        weakref.finalize(self, release_later, self._lease).atexit = False

    def _setup(self) -> None:
        """Per-process state (also after unpickling on an orchestration host)."""
        self._prefix = f"ray_harness-node-{_unique_id()}"
        self._counter = itertools.count()
        self._orchestration: str | None = None  # set by name_runs(): the request its node runs are named after
        self._visits: dict[str, int] = {}  # node id -> its runs so far in that request
        self._seen: set[str] = set()  # nodes that ran in this invocation (their copy's digest was checked)
        self._chains: dict[str, MessagesDigest] = {}  # node id -> running digest of its copy's messages (here)
        self._ordinals = {node_id: index for index, node_id in enumerate(self._nodes)}
        self._pooled: dict[str, str] = {}  # node id -> run id of its pooled run in flight
        self._remote: dict[str, tuple[RemoteAgent, str]] = {}  # node id -> (agent, invocation id) in flight
        self._checked_pool = False
        self._new_copy = True  # built or unpickled for the coming invocation: its pool check counts for it
        self._kept = False  # a resident orchestration host's copy: changes reach it only through copy_changed()
        self._broadcasts: set[asyncio.Task[Any]] = set()
        self._guard = threading.Lock()  # cancel() may come from another thread
        self._client: OrchestratorClient | None = None  # the driver's side of its orchestration (first invocation)

    def __getstate__(self) -> dict[str, Any]:
        """Return what an orchestration host needs: the nodes, their initial state, the pool; nothing of this process."""
        return {"pool": self._pool, "nodes": self._nodes, "local": self._local, "cancelled": self._cancelled,
                "uid": self._uid, "synced": self._synced, "dirty": self._dirty}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._pool = state["pool"]
        self._nodes = state["nodes"]
        self._local = state["local"]
        self._cancelled = state["cancelled"]
        self._uid = state["uid"]
        self._synced = dict(state["synced"])
        self._dirty = set(state["dirty"])
        self._lease = None
        self._setup()

    # -- the orchestration host -----------------------------------------------------------------------------

    def stream_orchestrator(self, orchestrator: MultiAgentBase, task: Any, invocation_state: dict[str, Any], *,
                            events: EventFilter = "all") -> AsyncGenerator[dict[str, Any], None] | None:
        """Stream the invocation's events from its orchestration host; None to run it here (already inside an actor).

        ``events="result"``: the host runs the orchestrator's ``_quiet_stream``, so only interrupt and result
        events (and the end state) cross back to the driver.
        """
        if current_placement() != "driver":
            return None  # the actor running this call already placed it (see runtime._placement)
        client = self._client
        if client is None:
            client = self._client = OrchestratorClient(orchestrator, self._uid, self._pool, self._lease)
        with self._guard:
            self._cancelled = client.cancelled = False
        return client.invoke(orchestrator, task, invocation_state, events)

    def shutdown(self) -> None:
        """Release the node slots (of nested Graph/Swarm nodes too); the next invocation ships every agent again."""
        self.release_slots()

    def release_slots(self) -> None:
        """Release this Graph/Swarm's node slots (one message per host) and those of nested Graph/Swarm nodes."""
        if self._lease is not None:
            self._lease.release()
        if self._client is not None:
            self._client.copy = None  # released with the slots (by the lease): the next invocation ships it
        self._synced.clear()
        self._dirty.clear()
        for target in self._nodes.values():
            runner = target.node_runner if isinstance(target, MultiAgentBase) else None
            if isinstance(runner, RayNodeRunner):
                runner.release_slots()

    @property
    def orchestration_host_name(self) -> str | None:
        """The name of the host this Graph/Swarm's invocations run on (None until the first one from a driver)."""
        client = self._client
        return None if client is None else client.name

    # -- NodeRunner -------------------------------------------------------------------------------------

    def bind(self, nodes: Mapping[str, Any]) -> None:
        """Receive the node objects; agent and nested orchestrator nodes are also bound to the local runner."""
        self._nodes = dict(nodes)
        self._ordinals = {node_id: index for index, node_id in enumerate(self._nodes)}
        self._local.bind({node_id: target for node_id, target in self._nodes.items()
                          if not isinstance(target, RemoteAgent)})

    def start_invocation(self) -> None:
        """Begin a new invocation: forget the previous cancel, check the pool again and each node's copy."""
        self._cancelled = False
        if self._new_copy:  # an orchestration host's copy: the pool was checked when the run was set up
            self._new_copy = False
        else:
            self._checked_pool = False
        self._seen = set()
        if not self._kept:  # a kept copy's running digests stay right between invocations
            self._chains = {}
        self._local.start_invocation()

    def run_node(self, node_id: str, node_input: Any, invocation_state: dict[str, Any], *,
                 events: EventFilter = "all") -> AsyncGenerator[dict[str, Any] | NodeResult, None]:
        """Run one node: nested orchestrators and A2AAgents here, RemoteAgents in their actor, agents on the pool."""
        # Returns the chosen runner itself: a wrapping generator would cost a layer per node and event.
        target = self._nodes[node_id]
        in_process = current_placement() == "in_process"  # stated by the host or agent actor running this call
        if isinstance(target, MultiAgentBase | A2AAgent) or (in_process and not isinstance(target, RemoteAgent)):
            return self._local.run_node(node_id, node_input, invocation_state, events=events)
        if self._orchestration is not None:
            visit = self._visits.get(node_id, 0)
            self._visits[node_id] = visit + 1
            run_id = f"{self._orchestration}:{self._uid}:{node_id}:{visit}"
        else:
            run_id = f"{self._prefix}:{node_id}:{next(self._counter)}"
        # The node's own request, stated once here: what the orchestrator wants of its events (nothing but the
        # result when it runs quiet; never the raw model chunks), the node's snapshot beside the result.
        remote = isinstance(target, RemoteAgent)
        request = InvokeRequest(invocation_id=run_id, prompt=node_input, invocation_state=invocation_state,
                                events="result" if events == "result" else "agent", snapshot=not remote,
                                agent_key=None if remote else slot_key(self._uid, node_id),
                                slot=None if remote else self._slot_sync(node_id, target))
        if remote:
            return self._run_remote(node_id, target, request)
        return self._run_pooled(node_id, target, request)

    async def node_result(self, node_id: str, node_input: Any, invocation_state: dict[str, Any]
                          ) -> NodeResult | None:
        """``run_node(..., events="result")`` awaited: an in-process agent node has no generator around its run."""
        target = self._nodes[node_id]
        if (not isinstance(target, MultiAgentBase | A2AAgent | RemoteAgent)
                and current_placement() == "in_process"):
            return await self._local.node_result(node_id, node_input, invocation_state)
        result, items = None, self.run_node(node_id, node_input, invocation_state, events="result")
        try:
            async for item in items:
                result = item if isinstance(item, NodeResult) else result
        finally:
            await items.aclose()
        return result

    def name_runs(self, invocation_id: str) -> None:
        """Name this orchestration request's node runs ``<invocation id>:<uid>:<node id>:<visit>``.

        Their slot requests name the request itself (``SlotSync.orchestration``). A driver sends a run whose
        orchestration host died again under the same invocation id: its node runs get the same names, so a slot
        answers a run it already completed with what that run sent, and a RemoteAgent node's actor from its journal
        (see ``runtime._slots``, "Re-sent runs").
        """
        self._orchestration = invocation_id
        self._visits = {}

    def slot_key(self, node_id: str) -> str:
        """The resident key of agent node ``node_id``'s slot (``"<uid>/<node id>"``)."""
        return slot_key(self._uid, node_id)

    def _host_of(self, node_id: str) -> int:
        """The node's host (modulo the pool's size): by its sandbox's identity, else the nodes in turn from its uid."""
        sandbox_id = getattr(self._nodes.get(node_id), "sandbox_id", None)
        if sandbox_id is not None:  # nodes sharing a sandbox object live where its one live sandbox is
            return zlib.crc32(sandbox_id.encode())
        ordinal = self._ordinals.get(node_id)
        if ordinal is None:
            ordinal = self._ordinals[node_id] = len(self._ordinals)
        return zlib.crc32(self._uid.encode()) + ordinal

    def _slot_sync(self, node_id: str, agent: Any) -> SlotSync:
        """How the node's slot must be brought in line with this copy of its agent (see the module docstring)."""
        first = node_id not in self._seen
        self._seen.add(node_id)
        known = self._synced.get(node_id)
        messages = len(agent.messages)  # the run's state comes back as a delta over as many, when it can
        if known is None:
            self._chains.pop(node_id, None)
            return SlotSync(messages=messages, orchestration=self._orchestration)  # a new slot: the agent ships along
        revision, digest = known
        changed = node_id in self._dirty
        if first and not changed and self._kept:
            # A resident copy: the driver sent what it changed (copy_changed); the running digest, kept from the
            # last invocation, is extended by this one's deltas.
            chain = self._chains.get(node_id)
            if chain is None or chain.count != messages:
                self._chains[node_id] = MessagesDigest(agent.messages)
        elif first and not changed:
            # A new invocation's copy came from the driver, where the user (or a session) may have changed it:
            # its history is hashed here, once; the runs' deltas extend that digest (see _run_pooled).
            chain = self._chains[node_id] = MessagesDigest(agent.messages)
            changed = digest is None or digest != conversation_digest(agent, chain)
        if changed:
            self._chains.pop(node_id, None)  # hashed again when needed (the run state)
        # Pickled at once: the snapshot may share the copy's own objects.
        return SlotSync(revision=revision, snapshot=pack_snapshot(take_snapshot(agent, copy=False)) if changed else None,
                        messages=messages, orchestration=self._orchestration)

    def cancel_node(self, node_id: str) -> None:
        """Ask one running node to stop (one cancel message to where it runs)."""
        target = self._nodes.get(node_id)
        if isinstance(target, MultiAgentBase | A2AAgent):  # running here
            self._local.cancel_node(node_id)
            return
        self._broadcast(self._handle([node_id]))

    def cancel(self) -> None:
        """Stop every running node of the invocation with one broadcast; later nodes start cancelled."""
        with self._guard:
            self._cancelled = True
            running = [*self._pooled, *self._remote]
            client = self._client
        if client is not None:
            client.cancel()  # a run on an orchestration host: it broadcasts from there
        self._local.cancel()  # nested orchestrators broadcast through their own node runners
        if running:
            self._broadcast(self._handle(running))

    def reset_node(self, node_id: str) -> None:
        """Restore the node's conversation to its state at bind time (not for RemoteAgent nodes).

        The copy here changes; its next request carries the snapshot, which the slot restores before the run.
        """
        if isinstance(self._nodes.get(node_id), RemoteAgent):
            raise ValueError(f"node {node_id!r} is a RemoteAgent: its history lives in its actor and cannot be "
                             "reset on revisit; use an Agent node, or reset_on_revisit(False)")
        self._local.reset_node(node_id)
        self._dirty.add(node_id)

    def export_node_state(self, node_id: str) -> dict[str, Any]:
        """Return the node's conversation as JSON-ready data (a RemoteAgent asks its actor)."""
        target = self._nodes[node_id]
        if isinstance(target, RemoteAgent):
            return conversation(target.snapshot()).model_dump()
        return self._local.export_node_state(node_id)

    def import_node_state(self, node_id: str, data: dict[str, Any]) -> None:
        """Restore a conversation exported by :meth:`export_node_state` (RemoteAgents keep their own)."""
        if isinstance(self._nodes[node_id], RemoteAgent):
            return  # the actor holds its own history and interrupt state (restored from its snapshot)
        self._local.import_node_state(node_id, data)
        self._dirty.add(node_id)  # reaches the slot with the node's next request

    def run_state(self) -> dict[str, Any]:
        """What the driver's node runner needs after a run: per node, the slot revision its copy matches.

        With the digest of that state (:func:`~ray_harness.runtime._slots.conversation_digest`), so the next
        invocation sends a node's snapshot only when its copy changed meanwhile; the messages' running digest kept
        through the invocation's deltas is reused (no history is hashed again here after delta runs). And what the
        runs changed in the A2AAgent nodes, which ran here.
        """
        synced: dict[str, tuple[int, str | None]] = {}
        for node_id, (revision, digest) in self._synced.items():
            if node_id in self._dirty:
                digest = None  # changed after its last run: the next request restores the copy
            elif digest is None:
                digest = conversation_digest(self._nodes[node_id], self._chains.get(node_id))
                self._synced[node_id] = (revision, digest)  # a kept copy does not hash it again next time
            synced[node_id] = (revision, digest)
        a2a = {node_id: target._run_state() for node_id, target in self._nodes.items() if isinstance(target, A2AAgent)}
        return {"synced": synced, "a2a": a2a}

    def state_digest(self, node_id: str) -> str | None:
        """The digest of the node's state its slot holds, when known (``None``: not run, or changed since)."""
        known = self._synced.get(node_id)
        return None if known is None or node_id in self._dirty else known[1]

    def keep_copies(self) -> None:
        """This runner's copy stays on its orchestration host between invocations (a resident orchestrator).

        Its node copies are not hashed again at each invocation: what the driver changes arrives through
        :meth:`copy_changed`, and the running digests are kept.
        """
        self._kept = True

    def copy_changed(self, node_id: str) -> None:
        """The node's copy was restored from outside a run (a resident copy's sync): its next request carries it."""
        self._dirty.add(node_id)
        self._chains.pop(node_id, None)

    def check_pool(self) -> None:
        """Check (or attach) the node pool now, for the coming invocation (blocking: a GCS lookup per host)."""
        self._checked_pool = False
        self.pool  # noqa: B018 - the property attaches (and checks) the pool
        self._new_copy = True  # start_invocation() keeps this check

    def apply_run_state(self, state: dict[str, Any]) -> None:
        """Take over :meth:`run_state` of this node runner's copy that ran the invocation (in the driver)."""
        self._synced = dict(state["synced"])
        self._dirty.clear()
        for node_id, a2a_state in state.get("a2a", {}).items():
            self._nodes[node_id]._apply_run_state(a2a_state)
        if self._synced and self._lease is not None and self._lease.pool is None:
            self._lease.attach(self._pool or default_pool(check=False))

    # -- agent nodes on the pool --------------------------------------------------------------------------

    @property
    def pool(self) -> AgentPool:
        """The host pool of this node runner (the shared default pool unless one was given)."""
        if self._pool is not None:
            return self._pool
        # Liveness of the shared pool is checked once per invocation (a GCS lookup per host).
        pool = default_pool(check=not self._checked_pool)
        self._checked_pool = True
        if self._lease is not None and self._lease.pool is not pool:
            self._lease.attach(pool)  # the driver's: its slots are released there
        return pool

    async def _run_pooled(self, node_id: str, agent: Any, request: InvokeRequest
                          ) -> AsyncGenerator[dict[str, Any] | NodeResult, None]:
        pool = self.pool
        run_id = request.invocation_id
        with self._guard:
            self._pooled[node_id] = run_id
            cancelled = self._cancelled
        started = time.monotonic()
        result: AgentResult | None = None
        try:
            if cancelled:
                # As in-process, a node that starts after cancel() runs no model call: the host starts it cancelled.
                await pool.run_handle([run_id]).cancel()
            async for item in pool.stream_slot(agent, request, host=self._host_of(node_id)):
                if isinstance(item, EventItem):
                    yield item.event
                    continue
                state = item.node_state()
                if state is not None:
                    self._restore(node_id, agent, state)  # what the run changed, even when it failed (then raises)
                    if item.revision is not None:
                        self._synced[node_id] = (item.revision, None)  # in line with the slot again
                        self._dirty.discard(node_id)
                if isinstance(item, ResultItem):
                    result = item.result
                    yield item.event()
        finally:
            with self._guard:
                if self._pooled.get(node_id) == run_id:
                    del self._pooled[node_id]
        if result is None:
            raise RuntimeError(f"Node '{node_id}' did not produce a result event")
        yield node_result_from_agent(result, started)

    def _restore(self, node_id: str, agent: Any, state: Any) -> None:
        """Restore a node run's state into the copy; a delta extends the copy's running messages digest."""
        chain = self._chains.get(node_id)
        # The state was just unpickled from the node's result: nobody else holds it (no copies).
        if isinstance(state, SnapshotDelta) and chain is not None and chain.count == len(agent.messages):
            restore_snapshot(agent, state, copy=False)
            chain.extend(state.snapshot.messages)
            return
        self._chains.pop(node_id, None)  # a full snapshot (or no digest kept): the run state hashes it again
        restore_snapshot(agent, state, copy=False)

    # -- RemoteAgent nodes --------------------------------------------------------------------------------

    async def _run_remote(self, node_id: str, remote: RemoteAgent, request: InvokeRequest
                          ) -> AsyncGenerator[dict[str, Any] | NodeResult, None]:
        # Our invocation id, so a cancel that overtakes the call still lands.
        with self._guard:
            self._remote[node_id] = (remote, request.invocation_id)
            cancelled = self._cancelled
        started = time.monotonic()
        result: AgentResult | None = None
        try:
            if cancelled:
                await remote.cancel_invocation(request.invocation_id)
            # The RemoteAgent's own client: trace context, re-send after a restart, cancel when we stop early.
            async for event in remote.stream_request(request):
                if event.get("type") == "result":
                    result = event["result"]
                yield event
        finally:
            with self._guard:
                if self._remote.get(node_id, (None, None))[1] == request.invocation_id:
                    del self._remote[node_id]
        if result is None:
            raise RuntimeError(f"Node '{node_id}' did not produce a result event")
        yield node_result_from_agent(result, started)

    # -- cancel broadcast ---------------------------------------------------------------------------------

    def _handle(self, node_ids: list[str]) -> RunHandle:
        """One RunHandle over the pooled runs and RemoteAgent invocations of ``node_ids`` that are in flight."""
        with self._guard:
            pooled = [self._pooled[n] for n in node_ids if n in self._pooled]
            remote = [self._remote[n] for n in node_ids if n in self._remote]
        handle = self.pool.run_handle(pooled, self._prefix) if pooled else RunHandle(self._prefix)
        for agent, invocation_id in remote:
            handle.add_agent(agent, invocation_id)
        return handle

    def _broadcast(self, handle: RunHandle) -> None:
        """Send the cancel now; from the orchestrator's loop without blocking it, from another thread synchronously."""
        if not handle.actor_names:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            handle.cancel_sync()
            return
        task = loop.create_task(handle.cancel(), name=f"{self._prefix}-cancel")
        self._broadcasts.add(task)
        task.add_done_callback(self._broadcast_done)

    def _broadcast_done(self, task: asyncio.Task[Any]) -> None:
        self._broadcasts.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("prefix=<%s>, error=<%s> | cancel broadcast failed", self._prefix, task.exception())


class RayRuntime:
    """``runtime=RayRuntime(pool=...)``: Graph/Swarm nodes on Ray, agent nodes on ``pool``.

    Args:
        pool: The host pool for agent nodes; default: the namespace's shared pool (as ``runtime="ray"``).

    """

    name = "ray"

    def __init__(self, pool: AgentPool | None = None) -> None:
        if pool is not None and not isinstance(pool, AgentPool):
            raise TypeError(f"pool must be an AgentPool, got {type(pool).__name__}")
        self.pool = pool

    def node_runner(self) -> RayNodeRunner:
        """Build the node runner of one Graph/Swarm."""
        return RayNodeRunner(self.pool)

    def __repr__(self) -> str:
        return f"RayRuntime(pool={self.pool!r})"

