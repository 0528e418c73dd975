"""``RayNodeRunner``: Graph and Swarm on Ray (``build(runtime="ray")``, ``Swarm(..., runtime="ray")``).

Invoked from a driver, the orchestration (Graph or Swarm: readiness, joins,
conditions, limits, failure policies, hooks, interrupts) runs in the
orchestrator actor of that Graph/Swarm (``ray_harness:graph:<id>`` /
``ray_harness:swarm:<id>``, see :mod:`ray_harness.runtime._orchestrator`):
:meth:`RayNodeRunner.stream_orchestrator` ships the orchestrator there and
streams its events back. It is the same code as with ``runtime="local"``; in
the actor, a ``RayNodeRunner`` runs the nodes:

* **Agent nodes** run on a pre-started pool of async host actors
  (:func:`~ray_harness.runtime._multiagent_pool.default_pool`, or the pool
  given). The orchestrator starts every node of a ready batch at once, so the
  batch becomes parallel remote calls; each node's events stream back as a Ray
  streaming generator and its completion is handled when it arrives. No actor
  is created per node execution.
* **Node state** travels with the node: the orchestrator's ``Agent`` is
  shipped by value, and its :class:`~ray_harness.agent.AgentSnapshot`
  (messages, state, interrupt state, conversation manager state, metrics,
  model state) comes back as the stream's last item, beside the events, and
  is restored into the orchestrator's agent; the orchestrator actor sends the
  snapshots to the driver at the end of the invocation. Side effects inside
  tool or hook objects stay in the host's process, as do changes the run
  makes to ``invocation_state``.
  The driver's agents stay authoritative, so revisits, ``reset_on_revisit``,
  ``reset_members``, interrupt resume and session restore are the local code paths.
* **Swarm handoffs** are the same: the next member is shipped to a host with
  its history and a prompt carrying the handoff message and shared context;
  the handoff tool was added to the member before it ships, and the swarm
  learns about the handoff from the member's streamed tool events.
* **Nested Graph/Swarm nodes** run their own orchestration in the parent's
  orchestrator actor (no actor of their own), their agent nodes on the pool
  through their own node runner.
* **RemoteAgent nodes** call their dedicated actor; that actor keeps the
  history (``reset_on_revisit`` is not supported for them).
* **Cancel** (``graph.cancel()`` / ``swarm.cancel()``) in the driver is one
  message to the orchestrator actor; there it broadcasts with one
  :class:`~ray_harness.runtime.RunHandle` to every host slot of the run at
  once, plus every RemoteAgent node and nested orchestrator; hosts handle it
  mid-call. Nodes started after a cancel start cancelled.

``invocation_state`` is shipped to the orchestrator actor and the hosts, so it
must pickle; changes the run makes to it stay there.

A graph or swarm that itself runs inside another Ray actor (an evaluation row
on a host, a tool of a RemoteAgent) is already placed — the actor says so for
the calls it serves (:mod:`ray_harness.runtime._placement`); nothing here asks
which process it is in: it creates no orchestrator actor and its nodes run in
that actor's process, as with ``runtime="local"``. Fanning out again from
inside a host could wait on the host's own event loop.

``runtime=RayRuntime(pool=...)`` is the object form of ``runtime="ray"`` with a
pool of one's own.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
import uuid
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from ray_harness.agent.result import AgentResult
from ray_harness.agent.snapshot import conversation
from ray_harness.multiagent.base import MultiAgentBase, NodeResult
from ray_harness.multiagent.node_runner import EventFilter, LocalNodeRunner, node_result_from_agent
from ray_harness.runtime._cancel import RunHandle
from ray_harness.runtime._multiagent_pool import default_pool
from ray_harness.runtime._orchestrator import OrchestratorClient, drive
from ray_harness.runtime._placement import current_placement
from ray_harness.runtime._wire import EventItem, InvokeRequest, ResultItem
from ray_harness.runtime.pool import AgentPool
from ray_harness.runtime.remote_agent import RemoteAgent

__all__ = ("RayNodeRunner", "RayRuntime")

logger = logging.getLogger(__name__)


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
        self._setup()

    def _setup(self) -> None:
        """Per-process state (also after unpickling in an orchestrator actor)."""
        self._prefix = f"ray_harness-node-{uuid.uuid4().hex[:12]}"
        self._counter = itertools.count()
        self._pooled: dict[str, str] = {}  # node id -> run id of its pooled run in flight
        self._remote: dict[str, tuple[RemoteAgent, str]] = {}  # node id -> (agent, invocation id) in flight
        self._checked_pool = False
        self._broadcasts: set[asyncio.Task[Any]] = set()
        self._guard = threading.Lock()  # cancel() may come from another thread
        self._client: OrchestratorClient | None = None  # the driver's orchestrator actor, created lazily

    def __getstate__(self) -> dict[str, Any]:
        """Return what an orchestrator actor needs: the nodes, their initial state, the pool; nothing of this process."""
        return {"pool": self._pool, "nodes": self._nodes, "local": self._local, "cancelled": self._cancelled}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._pool = state["pool"]
        self._nodes = state["nodes"]
        self._local = state["local"]
        self._cancelled = state["cancelled"]
        self._setup()

    # -- the orchestrator actor -----------------------------------------------------------------------------

    def stream_orchestrator(self, orchestrator: MultiAgentBase, task: Any, invocation_state: dict[str, Any], *,
                            events: EventFilter = "all") -> AsyncGenerator[dict[str, Any], None] | None:
        """Stream the invocation's events from the orchestrator's actor; None to run it here (already inside an actor).

        ``events="result"``: the actor runs the orchestrator's ``_quiet_stream``, so only interrupt and result
        events (and the end state) cross back to the driver.
        """
        if current_placement() != "driver":
            return None  # the actor running this call already placed it (see runtime._placement)
        with self._guard:
            self._cancelled = False
        return drive(self._orchestrator_client, orchestrator, task, invocation_state, lambda: self._cancelled,
                     events=events)

    def _orchestrator_client(self, orchestrator: MultiAgentBase) -> OrchestratorClient:
        # The driver starts (so owns) the host pool, checked once per invocation: hosts started by an
        # orchestrator actor would die with it.
        self._checked_pool = False
        self.pool  # noqa: B018 - the property starts or checks the pool
        client = self._client
        if client is None or client.closed:
            client = self._client = OrchestratorClient(orchestrator)
        return client

    def shutdown(self) -> None:
        """Kill the orchestrator actor, if one was created (the next invocation creates a new one)."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    @property
    def orchestrator_actor_name(self) -> str | None:
        """The name of this orchestrator's actor (None until the first invocation from a driver)."""
        client = self._client
        return None if client is None or client.closed else client.name

    # -- NodeRunner -------------------------------------------------------------------------------------

    def bind(self, nodes: Mapping[str, Any]) -> None:
        """Receive the node objects; agent and nested orchestrator nodes are also bound to the local runner."""
        self._nodes = dict(nodes)
        self._local.bind({node_id: target for node_id, target in self._nodes.items()
                          if not isinstance(target, RemoteAgent)})

    def start_invocation(self) -> None:
        """Begin a new invocation: forget the previous cancel, check the pool again."""
        self._cancelled = False
        self._checked_pool = False
        self._local.start_invocation()

    def run_node(self, node_id: str, node_input: Any, invocation_state: dict[str, Any], *,
                 events: EventFilter = "all") -> AsyncGenerator[dict[str, Any] | NodeResult, None]:
        """Run one node: nested orchestrators here, RemoteAgents in their actor, agents on the pool."""
        # Returns the chosen runner itself: a wrapping generator would cost a layer per node and event.
        target = self._nodes[node_id]
        in_process = current_placement() == "in_process"  # stated by the host or agent actor running this call
        if isinstance(target, MultiAgentBase) or (in_process and not isinstance(target, RemoteAgent)):
            return self._local.run_node(node_id, node_input, invocation_state, events=events)
        run_id = f"{self._prefix}:{node_id}:{next(self._counter)}"
        # The node's own request, stated once here: what the orchestrator wants of its events (nothing but the
        # result when it runs quiet; never the raw model chunks), the node's snapshot beside the result.
        request = InvokeRequest(invocation_id=run_id, prompt=node_input, invocation_state=invocation_state,
                                events="result" if events == "result" else "agent",
                                snapshot=not isinstance(target, RemoteAgent))
        if isinstance(target, RemoteAgent):
            return self._run_remote(node_id, target, request)
        return self._run_pooled(node_id, target, request)

    def cancel_node(self, node_id: str) -> None:
        """Ask one running node to stop (one cancel message to where it runs)."""
        target = self._nodes.get(node_id)
        if isinstance(target, MultiAgentBase):
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
            client.cancel()  # a run in the orchestrator actor: it broadcasts from there
        self._local.cancel()  # nested orchestrators broadcast through their own node runners
        if running:
            self._broadcast(self._handle(running))

    def reset_node(self, node_id: str) -> None:
        """Restore the node's conversation to its state at bind time (not for RemoteAgent nodes)."""
        if isinstance(self._nodes.get(node_id), RemoteAgent):
            raise ValueError(f"node {node_id!r} is a RemoteAgent: its history lives in its actor and cannot be "
                             "reset on revisit; use an Agent node, or reset_on_revisit(False)")
        self._local.reset_node(node_id)

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

    # -- agent nodes on the pool --------------------------------------------------------------------------

    @property
    def pool(self) -> AgentPool:
        """The host pool of this node runner (the shared default pool unless one was given)."""
        if self._pool is not None:
            return self._pool
        # Liveness of the shared pool is checked once per invocation (a GCS lookup per host).
        pool = default_pool(check=not self._checked_pool)
        self._checked_pool = True
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
            async for item in pool.stream_request(agent, request):
                if isinstance(item, EventItem):
                    yield item.event
                    continue
                snapshot = item.agent_snapshot()
                if snapshot is not None:
                    agent.restore(snapshot)  # what the run changed, even when it failed (the exception follows)
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

