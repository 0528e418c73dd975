"""The Ray runtime: agents, agent hosts and sandboxes in Ray actors.

Importing this package does not import Ray; each name below loads its module
(and Ray) on first use, so ``import ray_harness`` stays Ray-free.

* :func:`init` connects to a cluster (``address`` / ``RAY_ADDRESS``) or starts an
  embedded local Ray with small-machine defaults.
* :class:`RemoteAgent` is one agent in a dedicated, named async actor
  (``ray_harness:agent:<name>``: a host with one slot) with the ``Agent``
  call/stream/cancel surface.
* :class:`AgentPool` is a pre-started pool of async host actors
  (``ray_harness:host:<i>``, :mod:`~ray_harness.runtime._host`), each serving
  hundreds of concurrent agent runs.
* :class:`RunHandle` broadcasts a cancel to every actor/slot of a run at once.
* :class:`RemoteSandbox` serves any ``Sandbox`` from its own actor
  (``ray_harness:sandbox:<name>``).
* Graphs and swarms (``runtime="ray"``, or ``runtime=RayRuntime(pool=...)``)
  run their orchestration in a slot of a pre-started orchestration host
  (``ray_harness:orchestrator:<i>``; the task ``ray_harness.graph:<id>`` /
  ``ray_harness.swarm:<id>``), see :mod:`ray_harness.runtime._orchestrator`.
* :func:`shutdown` releases this driver's Graph/Swarm node slots and disconnects.

Design
======

**Pure core, thin shell.** The agent loop, Graph and Swarm are the same code on
both runtimes. The core never asks which process it runs in: ``runtime=`` is
the caller's choice (a name from :mod:`ray_harness._runtimes` — ``"ray"`` is
registered by the package root — or a runtime object), and the actors of this
package state, for the calls they serve, where an orchestration started there
places its work (:mod:`ray_harness.runtime._placement`: ``"driver"``,
``"orchestrator"``, ``"in_process"``).

**State crosses as one type.** An agent's state leaves a process only as an
:class:`~ray_harness.agent.AgentSnapshot` (messages, agent state, interrupt
state, conversation manager state, metrics, model state), applied with
``agent.restore()``: a node's state coming back from its host, an orchestration
host's agents coming back to the driver, a dedicated actor's journal
(:class:`~ray_harness.runtime._store.FileAgentStore`), a parked agent-as-tool
turn, a graph's interrupted node in a session.

**Actors and their messages** (each a method of a plain class; ``ray.remote``
is applied in one place per module; control messages — cancel, stats — run in
their own concurrency group so they never queue behind running calls):

=================================  ===========================================================
actor (module)                     messages (requests from :mod:`~ray_harness.runtime._wire`)
=================================  ===========================================================
``AgentHost`` (``_host``)          ``run`` / ``stream`` (``InvokeRequest``), ``run_batch``,
                                   ``run_as_tool``, ``cancel`` (``CancelRequest``), ``snapshot``
                                   (``SnapshotRequest``), ``resident_messages``,
                                   ``resident_state``, ``slot_info``, ``release``,
                                   ``release_prefix``, ``forget``, ``stats``; ``orchestrate``
                                   (``OrchestratorRequest``: one Graph/Swarm invocation, on the
                                   orchestration hosts), ``cancel_orchestration``, ``orchestrations``,
                                   ``release_orchestrations``, ``resident_orchestrations``
``SandboxActor`` (``sandbox``)     ``stream`` / ``call`` (``SandboxRequest``: the ``Sandbox`` surface)
=================================  ===========================================================

**One host actor class.** A pooled host (``ray_harness:host:<i>``) holds many
slots: agents built per run, or resident under an ``agent_key``. A dedicated
agent (``RemoteAgent``, ``ray_harness:agent:<name>``) is the same class created
with one :class:`~ray_harness.runtime._host.Slot` — the agent, its concurrency
mode and its journal — resident under ``DEDICATED_KEY``. Every slot runs its
agent in an :class:`~ray_harness.runtime._runner.AgentRunner` (ordering by the
caller's tickets, cancel by invocation id, journal, idempotent re-sends) and
answers a stream with ``AgentRunner.wire_stream``.

The protocol
------------

**Wire types** (:mod:`ray_harness.runtime._wire`, pydantic, frozen, validated
where they are built). Requests: ``InvokeRequest`` (invocation id, prompt,
invocation state, limits, structured output model, the caller's **event
filter** ``events``, whether the node's ``snapshot`` should come back, a
resident ``agent_key``, the call's ordering ``ticket``), ``ResumeRequest`` (an
``InvokeRequest`` whose prompt answers interrupts), ``CancelRequest``,
``SnapshotRequest``, ``OrchestratorRequest`` and ``SandboxRequest``; every request
carries ``trace_context``, the caller's OpenTelemetry carrier. Streamed items are
one discriminated union, ``WireItem`` (by ``kind``): ``EventItem`` (one agent
event), ``ResultItem`` (the result, and the agent's pickled ``AgentSnapshot``
— or, for a node slot run that only appended to its caller's history, a
``SnapshotDelta`` — beside it when asked), ``SnapshotItem`` (a failed run's state, before its
exception), ``OrchestratorEventItem``, ``SessionWriteItem``, ``BatchItem`` and
``EndItem`` (a run's typed ``EndState``). ``ResultItem`` and ``EndItem`` are
terminal: a stream that ends without one was cut short.

**Event filter.** The caller states once, on the request, which events it
wants: ``"all"``, ``"agent"`` (all but the raw ``model_event`` chunks) or
``"result"`` (the callee runs quiet and produces nothing else). The actor
applies it (``_wire.wanted``); Graph and Swarm pass it to their node runner
(``run_node(..., events=...)``), nothing threads a flag through the layers.

**Control data stays out of the user's stream.** Snapshots, session writes
and the end-of-run state are their own item kinds; the clients hand the
user's code only agent events (``RemoteAgent.stream_async``,
``AgentPool.stream``) and apply the rest themselves.

**One client helper** (:class:`~ray_harness.runtime._client.ActorClient`): it
stamps each request with the trace context, submits the call, translates Ray's
errors (:mod:`ray_harness.runtime._errors`: the actor's own exception type, a
dead actor as ``RemoteActorError``), consumes streams in order, sends the
request's cancel when the consumer stops early, and re-sends a stream cut short
by a restart when the callee journals (dedicated agents: same invocation id, so
the restored actor continues it), and sends no cancel into an actor whose
process died. A node slot's request whose host died is sent again by
``AgentPool.stream_slot`` once Ray restarted the host (the slot adopts its
journal); an ephemeral pooled run whose host died fails with
``RemoteActorError``. ``RemoteAgent``, ``AgentPool`` (and its ``run_batched`` batching in
:mod:`~ray_harness.runtime._batching`), the node runner, ``RunHandle``, the
orchestrator client and ``RemoteSandbox`` all call through it.

**What comes back is typed.** A node's state returns as an ``AgentSnapshot``
(``agent.restore()``); an orchestrator run's end as an ``EndState`` — per
orchestrator its ``RunState`` (``apply_run_state()``) and its agents'
snapshots. Which parts of an orchestrator stay in their process (hooks, node
runner, lock, session manager) the orchestrator says itself
(``MultiAgentBase.local_parts()``); they cross as pickle references.

One agent node, hop by hop (``await graph.invoke_async(task)`` on ``runtime="ray"``)
-----------------------------------------------------------------------------------

1. **Driver.** ``Graph.invoke_async`` → ``Graph._quiet_stream`` →
   ``Graph._stream`` takes the graph's lock and, when its node runner can run
   the orchestration elsewhere, hands the invocation to it:
   ``RayNodeRunner.stream_orchestrator(graph, task, state, events="result")``
   (:mod:`~ray_harness.runtime.multiagent`). Under placement ``"driver"`` it
   returns ``OrchestratorClient.invoke`` (:mod:`~ray_harness.runtime._orchestrator_client`;
   one client per graph object, made at its first invocation; elsewhere it
   returns ``None`` and the graph runs here). ``invoke`` builds the graph's
   object table (``object_table``: the graph, its nodes, agents, edges and
   local parts by key, :mod:`~ray_harness.runtime._orchestrator_wire`), then
   ``OrchestratorClient._prepare`` decides what to send: with a resident copy
   on the host, ``DriverCopy.sync`` (:mod:`~ray_harness.runtime._resident`)
   compares the table with what the driver applied last — the objects' ids and
   hook counts (a difference ships the graph), each agent's digest
   (``_slots.conversation_digest``: a changed agent goes as its snapshot) and
   each run field by identity (a reassigned one goes as the run state) — else
   the graph is pickled (agents by value, local parts as references,
   ``dump_orchestrator``). Then the pools (``OrchestratorClient._pools``): the
   node pool (``default_pool``) and the orchestration pool
   (``orchestration_pool``) it checked last — a GCS look-up per host, done again
   after ``POOL_CHECK_INTERVAL_S`` (5 s), a re-initialized Ray or a pool shut
   down in this process; an orchestration host found dead before the run began
   gets it on its replacement — and the graph is keyed to one orchestration host
   (pre-started; no actor per graph). The request names the node pool's host
   actor ids (``pool_hosts``), so the host attaches to the same pool without a
   look-up. ``invoke`` notes the agents' histories
   (``agent_baselines``) and sends one ``OrchestratorRequest`` (the pickled
   graph, or the resident key, its token and the sync, empty when nothing
   changed) with ``ActorClient.stream`` (:mod:`~ray_harness.runtime._client`:
   trace context, Ray's errors translated, the cancel sent when the driver
   stops early).
2. **Orchestration host.** ``AgentHost.orchestrate`` (:mod:`~ray_harness.runtime._orchestration`)
   unpickles the graph (or takes its resident copy and applies the sync; a
   ``ResidentMissItem`` when it has none at that token, and the driver ships it)
   and runs the same ``Graph._quiet_stream`` under placement ``"orchestrator"``: the
   scheduler picks the ready batch and starts one task per node;
   ``RayNodeRunner.run_node`` builds the node's ``InvokeRequest``
   (``events="result"``, ``snapshot=True``, ``agent_key="<uid>/<node id>"``,
   ``slot``: the revision its copy matches, plus the copy's snapshot only when
   the copy changed) and ``_run_pooled`` sends it with ``AgentPool.stream_slot``
   to the node's host (``ActorClient.stream`` → ``AgentHost.stream``, a Ray
   streaming generator; the nodes of the batch that share a host go in one
   ``AgentHost.stream_many`` call, their items multiplexed and handed back to
   each node's stream, :mod:`~ray_harness.runtime._stream_batching`). The agent itself goes along only with
   the slot's first request, or once more after the host answered ``SlotMissItem("unknown")``.
3. **Host.** ``AgentHost.stream`` finds the node's resident slot
   (``HostSlots.stream``, :mod:`~ray_harness.runtime._host_slots`; or opens it
   from the spec) and runs it with ``AgentRunner.wire_stream`` under placement
   ``"in_process"`` (trace context attached); at the run's turn the slot checks
   the revision (or restores the snapshot sent). The agent — its hooks, tools,
   model, history — runs quiet, makes its model call and runs its tools; one
   ``ResultItem`` — the result, the pickled snapshot (a ``SnapshotDelta`` of
   the appended messages when the run only appended) and the slot's revision —
   streams back. The slot stays for the next visit.
4. **Orchestration host.** ``_run_pooled`` restores the snapshot (or delta) into
   its copy of the agent (``agent.restore``), notes the revision, and turns the result
   into a ``NodeResult``; the graph records it, fires its hooks and starts what
   became ready. After the last node the host sends an ``EndItem``
   (``_orchestrator_wire.pack_end``), whose run state carries the node
   runner's revisions and digests, and each agent's state (a delta over the
   history it started from, when the run only appended), and keeps the graph
   resident under a new token.
5. **Driver.** ``OrchestratorClient.invoke`` yields the events as they
   arrive (``loads`` resolves their references in the driver's table, so
   results name the driver's own nodes); session writes go to the driver's
   session manager. On the ``EndItem`` it applies the end state to the
   driver's graph and agents (``apply_end``: ``apply_run_state``, which also
   hands the node runner its revisions and digests, and ``restore_snapshot``,
   a delta applied over the noted history), keeps a new ``DriverCopy`` (the
   token; the structure taken over from the copy whose sync this request
   carried; the run fields' values; the agents' digests as the host computed
   them, ``RayNodeRunner.state_digest``), then yields the final
   ``multiagent_result`` event. So ``graph.nodes["a"].executor.messages`` and
   interrupt resume work as with ``runtime="local"``. A ``ResidentMissItem``
   instead (the host has no copy at that token) ships the graph again, once.

Cancel (``graph.cancel()``) is one ``CancelRequest`` to the orchestration host,
which broadcasts one ``CancelRequest`` per host (and per dedicated actor) of the
run with a :class:`RunHandle`.

Graph and swarm agents are resident in host slots (:mod:`~ray_harness.runtime.multiagent`):
shipped once, addressed by key, released at ``shutdown()``, garbage collection,
:func:`shutdown` and after an idle timeout. A slot journals from its run's first
tool result on; a host's death mid-request re-sends the request, re-ships the
agent and re-creates the slot from its journal (completed tools do not run
again; see :mod:`ray_harness.runtime._host_slots`). When the orchestration host
dies mid-run instead, the driver sends the Graph/Swarm run again under the same
invocation id; its node runs keep their names, so slots answer the runs they had
completed with what those sent (see "Host loss" in
:mod:`ray_harness.runtime._orchestrator` and :mod:`ray_harness.runtime._resend`).
"""

from __future__ import annotations

import sys

from ray_harness._lazy import lazy_attributes

__all__ = (
    "DEFAULT_NAMESPACE",
    "AgentPool",
    "FileAgentStore",
    "RemoteAgent",
    "RayRuntime",
    "RemoteSandbox",
    "RunHandle",
    "init",
    "is_initialized",
    "shutdown",
)

_LAZY = {
    "DEFAULT_NAMESPACE": "ray_harness.runtime._cluster",
    "init": "ray_harness.runtime._cluster",
    "is_initialized": "ray_harness.runtime._cluster",
    "FileAgentStore": "ray_harness.runtime._store",
    "RemoteAgent": "ray_harness.runtime.remote_agent",
    "AgentPool": "ray_harness.runtime.pool",
    "RunHandle": "ray_harness.runtime._cancel",
    "RemoteSandbox": "ray_harness.runtime.sandbox",
    "RayRuntime": "ray_harness.runtime.multiagent",
}


def shutdown() -> None:
    """Release this process's Graph/Swarm node slots, then disconnect.

    An embedded Ray stops with it.
    """
    multiagent = sys.modules.get("ray_harness.runtime.multiagent")
    if multiagent is not None:  # never imported: no node slot was opened from here
        multiagent.release_all_slots()
    from ray_harness.runtime._cluster import shutdown as disconnect

    disconnect()


__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
