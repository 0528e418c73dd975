"""The Ray runtime: agents, agent hosts and sandboxes in Ray actors.

Importing this package does not import Ray; each name below loads its module
(and Ray) on first use, so ``import ray_harness`` stays Ray-free.

* :func:`init` connects to a cluster (``address`` / ``RAY_ADDRESS``) or starts an
  embedded local Ray with small-machine defaults.
* :class:`RemoteAgent` is one agent in a dedicated, named async actor
  (``ray_harness:agent:<name>``) with the ``Agent`` call/stream/cancel surface.
* :class:`AgentPool` is a pre-started pool of async host actors
  (``ray_harness:host:<i>``), each serving hundreds of concurrent agent runs.
* :class:`RunHandle` broadcasts a cancel to every actor/slot of a run at once.
* :class:`RemoteSandbox` serves any ``Sandbox`` from its own actor
  (``ray_harness:sandbox:<name>``).
* Graphs and swarms (``runtime="ray"``, or ``runtime=RayRuntime(pool=...)``)
  run their orchestration in an actor per instance (``ray_harness:graph:<id>`` /
  ``ray_harness:swarm:<id>``), see :mod:`ray_harness.runtime._orchestrator`.
* :func:`shutdown` kills this driver's orchestrator actors and disconnects.

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
``agent.restore()``: a node's state coming back from its host, an orchestrator
actor's agents coming back to the driver, a dedicated actor's journal
(:class:`~ray_harness.runtime._store.FileAgentStore`), a parked agent-as-tool
turn, a graph's interrupted node in a session.

**Actors and their messages** (each a method of a plain class; ``ray.remote``
is applied in one place per module; control messages — cancel, stats — run in
their own concurrency group so they never queue behind running calls):

=================================  ===========================================================
actor (module)                     messages
=================================  ===========================================================
``AgentHost`` (``pool``)           ``run``, ``stream``, ``run_batch``, ``cancel``, ``release``,
                                   ``resident_messages``, ``stats``
``AgentActor`` (``remote_agent``)  ``invoke``, ``stream``, ``invoke_as_tool``, ``cancel``,
                                   ``snapshot``, ``get_messages``, ``get_state``, ``forget``
``OrchestratorActor``              ``stream`` (one Graph/Swarm invocation), ``cancel``
(``_orchestrator``)
``SandboxActor`` (``sandbox``)     the ``Sandbox`` surface
=================================  ===========================================================

**Wire types.** An agent crosses as an :class:`~ray_harness.runtime._spec.AgentSpec`
(pickled by value, or a factory built in the actor). Requests carry the prompt
and an options dict (``limits``, ``structured_output_model``,
``invocation_state``, ``trace_context`` — the caller's OpenTelemetry carrier).
Agent streams yield the agent's event dicts (``{"type": ...}``, the last one
``{"type": "result", "result": AgentResult}``); a stream asked for
``snapshot=True`` carries the agent's ``AgentSnapshot`` beside the result
event, never inside it: both in one streamed item (one Ray object), which
``AgentPool.stream`` hands on as the result event followed by the snapshot
(a failed run sends the snapshot alone, just before its exception). An
orchestrator stream yields ``("event", bytes)``, ``("save", path, data)``
(session writes relayed to the driver), ``("batch", [items])`` and last
``("end", bytes)`` with the end-of-run state. Errors raised in an actor arrive
as their own type (:mod:`ray_harness.runtime._errors`); a dead actor is a
``RemoteActorError``.

One agent node, hop by hop (``await graph.invoke_async(task)`` on ``runtime="ray"``)
-----------------------------------------------------------------------------------

1. **Driver.** ``Graph.invoke_async`` → ``Graph._stream`` asks its node runner
   (``runtime.multiagent.RayNodeRunner``) to run the orchestration elsewhere
   (``stream_orchestrator``; placement ``"driver"``). ``_orchestrator.drive``
   pickles the graph (agents by value; nodes, hooks, edges, locks and session
   managers as references, :mod:`ray_harness.runtime._orchestrator_wire`),
   creates the graph's orchestrator actor on first use, and calls its
   ``stream`` with the trace context.
2. **Orchestrator actor.** ``OrchestratorActor.stream`` unpickles the graph and
   runs the same ``Graph._stream`` under placement ``"orchestrator"``: the
   scheduler picks the ready batch and starts one task per node;
   ``RayNodeRunner.run_node`` → ``_run_pooled`` → ``AgentPool.stream(agent,
   input, snapshot=True)`` picks the least-loaded host and calls
   ``AgentHost.stream`` (a Ray streaming generator).
3. **Host.** ``AgentHost.stream`` builds the agent from its spec and runs it
   through an ``AgentRunner`` (ordering, cancel by run id, journal) under
   placement ``"in_process"``; the agent's own loop makes the model call and
   runs the tools; the events (only the result when the caller is quiet) and
   then the agent's ``AgentSnapshot`` stream back.
4. **Orchestrator actor.** ``_run_pooled`` restores the snapshot into its copy
   of the agent and turns the result into a ``NodeResult``; the graph records
   it, fires its hooks and starts what became ready. After the last node the
   actor sends the end state: each orchestrator's ``RunState`` (the fields its
   class lists in ``RUN_FIELDS``: results, scheduler, interrupt state) and each
   agent node's ``AgentSnapshot``.
5. **Driver.** ``drive`` applies the end state to the driver's graph and agents
   (``apply_run_state``, ``agent.restore``) and yields the final
   ``multiagent_result`` event, so
   ``graph.nodes["a"].executor.messages`` and interrupt resume work as with
   ``runtime="local"``.

Cancel (``graph.cancel()``) is one message to the orchestrator actor, which
broadcasts one ``cancel`` per host (and per dedicated actor) of the run with a
:class:`RunHandle`.

Every client consumes actor streams with one helper
(:func:`~ray_harness.runtime._errors.stream_items`: items in order, Ray's errors
translated); what happens when a stream ends early stays with each client
(a ``RemoteAgent`` — also as a graph node — sends the invocation again after a
restart; a pooled run fails with ``RemoteActorError``).

Not yet as ARCHITECTURE.md describes (the next runtime issue): agents are
shipped per node execution instead of living in a slot; the four actor
classes above keep their own request shapes (options dicts, not pydantic
requests) and a ``quiet`` flag instead of an event filter; the orchestrator
is shipped with references to private fields (``_lock``, ``_node_runner``).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

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
    """Kill the orchestrator actors this process created, then disconnect (an embedded Ray stops with it)."""
    orchestrators = sys.modules.get("ray_harness.runtime._orchestrator")
    if orchestrators is not None:  # never imported: no orchestrator actor was created
        orchestrators.shutdown_all()
    from ray_harness.runtime._cluster import shutdown as disconnect

    disconnect()


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ray_harness.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
