"""Where nodes run: the ``NodeRunner`` protocol and the in-process ``LocalNodeRunner``.

Graph and Swarm decide *what* runs and *when* (:mod:`ray_harness.multiagent._scheduling`);
a node runner only runs one node at a time on request and reports what it did.
(A node's *executor* is the agent or orchestrator it wraps, ``GraphNode.executor``, as in
Strands; the node runner is what runs it.)
``runtime="local"`` runs nodes in this process, as asyncio tasks (the Graph awaits a
quiet invocation's batch of one node in its own task);
``runtime="ray"`` (registered by the package root, see :mod:`ray_harness._runtimes`)
builds ``ray_harness.runtime.multiagent.RayNodeRunner``, which implements the same
protocol with actors; a runtime object's ``node_runner()`` is used as given.
Swapping node runners never changes the semantics, because none of them live here.

Contract of ``run_node(node_id, node_input, invocation_state)``: an async
generator that yields the node's own stream events (dicts) and, last, a
``NodeResult`` whose status is COMPLETED, INTERRUPTED, CANCELLED or FAILED (a
nested orchestrator can fail without raising). An exception raised by the node
propagates out of the generator unchanged; the orchestrator turns it into a
FAILED result and applies its failure policy. Timeouts are the orchestrator's:
it cancels the consuming task (and calls ``cancel_node``).

Optional: a node runner may also run the *orchestration* elsewhere. When it has
``stream_orchestrator(orchestrator, task, invocation_state)`` returning an async
generator of the invocation's events (or None to run it here), Graph and Swarm
delegate their whole invocation to it at the entry of ``stream_async``
(with ``events=``, what the caller wants of them); the Ray node runner runs it in the orchestrator's
actor. ``shutdown()``, when present, releases what the node runner holds
(``MultiAgentBase.shutdown``). ``run_state()`` / ``apply_run_state(state)``,
when present, carry the node runner's own bookkeeping of a run from the copy
that ran it back to the original (inside ``MultiAgentBase.run_state()``).
``node_result(node_id, node_input, invocation_state)``, when present, is a
coroutine returning what ``run_node(..., events="result")`` yields: a Graph's
quiet invocation awaits it instead of iterating a generator per node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ray_harness._runtimes import EventFilter, node_runner, register
from ray_harness._signal import Signal
from ray_harness.agent.agent import Agent
from ray_harness.agent.result import AgentResult
from ray_harness.agent.snapshot import AgentSnapshot, conversation, replace_conversation
from ray_harness.interrupts import InterruptState
from ray_harness.multiagent.base import MultiAgentBase, MultiAgentResult, NodeResult, Status, add_usage, zero_usage
from ray_harness.types.validation import copy_json

__all__ = ("DEFAULT_RUNTIME", "EventFilter", "LocalNodeRunner", "NodeRunner", "make_node_runner",
           "node_result_from_agent", "node_result_from_multiagent", "node_type")

DEFAULT_RUNTIME = "ray"
"""The default ``runtime=`` of Graph and Swarm: an embedded local Ray starts on first use when none is running."""

@runtime_checkable
class NodeRunner(Protocol):
    """Runs the nodes of one orchestrator. One instance per Graph/Swarm."""

    runtime: str

    def bind(self, nodes: Mapping[str, Any]) -> None:
        """Receive the node objects (node id → Agent or MultiAgentBase) once, before the first run."""

    def start_invocation(self) -> None:
        """A new invocation begins: forget the cancel request of the previous one."""

    def run_node(self, node_id: str, node_input: Any, invocation_state: dict[str, Any], *,
                 events: EventFilter = "all") -> AsyncGenerator[dict[str, Any] | NodeResult, None]:
        """Run one node; yields its events, then its ``NodeResult``.

        ``events="result"``: the orchestrator forwards none of the node's events, so the node need not produce
        them (a node runner may still yield some; only the ``NodeResult`` matters).
        """

    def cancel_node(self, node_id: str) -> None:
        """Ask one running node to stop (cooperatively)."""

    def cancel(self) -> None:
        """Ask every running node to stop, and nodes started afterwards in this invocation to stop at once."""

    def reset_node(self, node_id: str) -> None:
        """Restore the node's conversation and state to what they were when it was bound."""

    def export_node_state(self, node_id: str) -> dict[str, Any]:
        """The node's conversation (an ``AgentSnapshot`` without model state and metrics) as JSON-ready data."""

    def import_node_state(self, node_id: str, data: dict[str, Any]) -> None:
        """Restore a snapshot made by :meth:`export_node_state`."""


def node_type(target: Any) -> str:
    """The ``node_type`` of a node's target: ``"multiagent"`` for a nested Graph/Swarm, else ``"agent"``."""
    return "multiagent" if isinstance(target, MultiAgentBase) else "agent"


def node_result_from_agent(result: AgentResult, started: float) -> NodeResult:
    """Status from the stop reason; usage and cost of this invocation only (the agent's totals are cumulative)."""
    execution_time = round((time.monotonic() - started) * 1000)
    if result.stop_reason == "interrupt":
        status = Status.INTERRUPTED
    elif result.stop_reason == "cancelled":
        status = Status.CANCELLED
    else:
        status = Status.COMPLETED
    metrics = result.metrics
    usage = zero_usage()
    add_usage(usage, getattr(metrics, "invocation_usage", None) or getattr(metrics, "accumulated_usage", {}))
    # latencyMs is the model's, as Strands reports it (execution_time holds the wall clock, tools included).
    latency = (getattr(metrics, "invocation_metrics", None) or {}).get("latencyMs", execution_time)
    return NodeResult(result=result, execution_time=execution_time, status=status, accumulated_usage=usage,
                      accumulated_metrics={"latencyMs": int(latency)}, execution_count=1,
                      interrupts=list(result.interrupts or []),
                      accumulated_cost_usd=float(getattr(metrics, "invocation_cost_usd", 0.0) or 0.0))


def node_result_from_multiagent(result: MultiAgentResult) -> NodeResult:
    """Wrap a nested Graph/Swarm's result as the ``NodeResult`` of the node that ran it, totals included."""
    return NodeResult(result=result, execution_time=result.execution_time, status=result.status,
                      accumulated_usage=dict(result.accumulated_usage),
                      accumulated_metrics=dict(result.accumulated_metrics), execution_count=result.execution_count,
                      interrupts=list(result.interrupts), accumulated_cost_usd=result.accumulated_cost_usd)


@dataclass(frozen=True, slots=True)
class _AgentConversation:
    """An Agent's conversation at bind time, copied: what ``reset_node`` puts back.

    Three copies instead of a whole ``AgentSnapshot`` (metrics, conversation manager and model state included,
    then dropped): a graph is often built per request (an evaluation row), and most are never reset.
    """

    messages: list[Any]
    state: dict[str, Any]
    interrupt_state: dict[str, Any]

    @classmethod
    def of(cls, agent: Agent) -> _AgentConversation:
        interrupts = agent.interrupt_state
        if (not agent.messages and agent.state == {} and not interrupts.interrupts and not interrupts.context
                and not interrupts.activated):
            # A new agent (every node of a graph built per row): the one shared empty conversation, not three
            # copies of nothing. Sharing it is safe: nothing changes it (``restore`` copies what it is given).
            return _EMPTY_CONVERSATION
        return cls(copy_json(agent.messages), agent.state.to_dict(), interrupts.to_dict())

    def over(self, snapshot: AgentSnapshot) -> AgentSnapshot:
        """``snapshot`` with this conversation (``restore`` copies it again: this one stays as it is)."""
        return snapshot.model_copy(update={"messages": self.messages, "state": self.state,
                                           "interrupt_state": self.interrupt_state})


_EMPTY_CONVERSATION = _AgentConversation([], {}, InterruptState().to_dict())


def _initial_conversation(target: Any) -> _AgentConversation | AgentSnapshot:
    if isinstance(target, Agent) and type(target).snapshot is Agent.snapshot:
        return _AgentConversation.of(target)
    return conversation(target.snapshot())  # e.g. a RemoteAgent, which asks its actor


class LocalNodeRunner:
    """Runs nodes in this process and event loop (``runtime="local"``)."""

    runtime = "local"

    def __init__(self) -> None:
        self._nodes: dict[str, Any] = {}
        self._initial: dict[str, _AgentConversation | AgentSnapshot] = {}
        self._nested: set[str] = set()  # the nodes that are a Graph/Swarm (MultiAgentBase), not an agent
        self._running: set[str] = set()
        self._signals: dict[str, threading.Event] = {}
        self._cancelled = False

    def bind(self, nodes: Mapping[str, Any]) -> None:
        """Take the graph's nodes (id → agent or nested multi-agent) and remember each agent's first conversation.

        The remembered conversation is what :meth:`reset_node` restores when ``reset_on_revisit`` is on.
        """
        self._nodes = dict(nodes)
        # Nested orchestrators are told apart once, here, not at each run: isinstance of an ABC is a Python-level
        # check (a graph built per row would pay it twice per node).
        self._nested, self._initial = set(), {}
        for node_id, target in self._nodes.items():
            if isinstance(target, MultiAgentBase):
                self._nested.add(node_id)
            elif callable(getattr(target, "restore", None)):  # agents, and whatever else can snapshot itself
                self._initial[node_id] = _initial_conversation(target)  # (e.g. a RemoteAgent: it asks its actor)

    def start_invocation(self) -> None:
        """Start a new graph/swarm invocation: forget a cancellation of the previous one."""
        self._cancelled = False

    async def run_node(self, node_id: str, node_input: Any, invocation_state: dict[str, Any], *,
                       events: EventFilter = "all") -> AsyncGenerator[dict[str, Any] | NodeResult, None]:
        """Run node ``node_id`` on ``node_input`` in this event loop.

        Args:
            node_id: The node to run (as bound by :meth:`bind`).
            node_input: Its input: a prompt or content blocks.
            invocation_state: Shared state passed to the node's agent.
            events: Which events to yield (see :data:`EventFilter`); ``"result"`` yields only the ``NodeResult``.

        Yields:
            The node's stream events (none for ``events="result"``), then its ``NodeResult`` (``CANCELLED`` when
            the invocation was cancelled).
        """
        target = self._nodes[node_id]
        quiet = events == "result"
        if quiet and node_id not in self._nested:
            yield await self.node_result(node_id, node_input, invocation_state)
            return
        self._running.add(node_id)
        started = time.monotonic()
        try:
            if node_id in self._nested:
                if self._cancelled:
                    yield NodeResult(result=MultiAgentResult(status=Status.CANCELLED), status=Status.CANCELLED)
                    return
                final: Any = None
                nested = (target._quiet_stream if quiet else target.stream_async)(node_input, invocation_state)
                try:
                    async for event in nested:
                        if not quiet:  # the caller asked for the result only: nothing else goes up
                            yield event
                        if _is_result_event(event):
                            final = event["result"]
                finally:
                    await nested.aclose()  # closed mid-run (a Swarm's caller stopped): the nested run ends first
                if final is None:
                    raise RuntimeError(f"Node '{node_id}' did not produce a result event")
                yield node_result_from_multiagent(final)
                return
            agent_result: AgentResult | None = None
            stream = target.stream_async(node_input, invocation_state=invocation_state,
                                         cancel_signal=self._new_signal(node_id))
            try:
                async for event in stream:
                    yield event
                    if event.get("type") == "result":
                        agent_result = event["result"]
            finally:
                await stream.aclose()
            yield node_result_from_agent(_produced(node_id, agent_result), started)
        finally:
            self._running.discard(node_id)
            self._signals.pop(node_id, None)

    async def node_result(self, node_id: str, node_input: Any, invocation_state: dict[str, Any]) -> NodeResult:
        """``run_node(..., events="result")`` as a coroutine: the node's ``NodeResult`` and nothing else.

        A Graph's quiet invocation awaits this for each node when its node runner has it: no generator around the
        agent's run (for a chain built per row, one async generator and its first-iteration hook less per node).
        """
        if node_id in self._nested:  # a nested Graph/Swarm: the generator's path, whose one item it is
            items = self.run_node(node_id, node_input, invocation_state, events="result")
            try:
                item = await anext(items)
            finally:
                await items.aclose()
            if not isinstance(item, NodeResult):  # pragma: no cover - a quiet run yields its result alone
                raise RuntimeError(f"Node '{node_id}' did not produce a result")
            return item
        target = self._nodes[node_id]
        self._running.add(node_id)
        started = time.monotonic()
        try:
            agent_result: AgentResult | None = None
            signal = self._new_signal(node_id)
            if isinstance(target, Agent):  # runs as plain coroutines when no callback handler listens: no generator
                agent_result = await target.invoke_async(node_input, invocation_state=invocation_state,
                                                         cancel_signal=signal)
            else:  # another agent kind (a RemoteAgent, an A2AAgent, ...): its result is its stream's last event
                run = getattr(target, "_quiet_stream", None) or target.stream_async
                stream = run(node_input, invocation_state=invocation_state, cancel_signal=signal)
                try:
                    async for event in stream:
                        if event.get("type") == "result":
                            agent_result = event["result"]
                finally:
                    await stream.aclose()
            return node_result_from_agent(_produced(node_id, agent_result), started)
        finally:
            self._running.discard(node_id)
            self._signals.pop(node_id, None)

    def _new_signal(self, node_id: str) -> threading.Event:
        """The cancel signal of one agent node run (``agent.cancel()`` sets it, so it must not be shared).

        A node that starts after ``cancel()`` gets it already set and stops at its first cycle.
        """
        signal = Signal()
        if self._cancelled:
            signal.set()
        self._signals[node_id] = signal
        return signal

    def cancel_node(self, node_id: str) -> None:
        """Cancel node ``node_id`` if it is running now; otherwise do nothing."""
        target = self._nodes.get(node_id)
        if target is not None and node_id in self._running:
            target.cancel()

    def cancel(self) -> None:
        """Cancel the invocation: every running node, and any node that starts after this call."""
        self._cancelled = True
        for signal in list(self._signals.values()):
            signal.set()  # covers a node whose agent has not registered its invocation yet
        for node_id in list(self._running):
            self.cancel_node(node_id)

    def reset_node(self, node_id: str) -> None:
        """Give node ``node_id`` back the conversation it had when bound (for ``reset_on_revisit``)."""
        initial = self._initial.get(node_id)
        if initial is not None:
            target = self._nodes[node_id]
            current = target.snapshot()
            if isinstance(initial, _AgentConversation):
                target.restore(initial.over(current))
            else:
                target.restore(replace_conversation(current, initial))

    def export_node_state(self, node_id: str) -> dict[str, Any]:
        """The state of node ``node_id`` to persist: its conversation, or a nested graph/swarm's state.

        Returns:
            ``{"multiagent": ...}`` for a nested Graph/Swarm, the conversation's fields for an agent, and ``{}``
            for a node that keeps its state elsewhere.
        """
        target = self._nodes[node_id]
        if isinstance(target, MultiAgentBase):
            return {"multiagent": target.serialize_state()}
        if not callable(getattr(target, "snapshot", None)):
            return {}  # a node that keeps its own state elsewhere (e.g. an A2AAgent: the remote task)
        return conversation(target.snapshot()).model_dump()

    def import_node_state(self, node_id: str, data: dict[str, Any]) -> None:
        """Restore node ``node_id`` from ``data`` written by :meth:`export_node_state`; ``{}`` changes nothing."""
        target = self._nodes[node_id]
        if isinstance(target, MultiAgentBase):
            if "multiagent" in data:
                target.deserialize_state(data["multiagent"])
            return
        if data and callable(getattr(target, "restore", None)):
            import_conversation(target, data)


def _produced(node_id: str, agent_result: AgentResult | None) -> AgentResult:
    """The result an agent node's stream ended with. Raises RuntimeError when it ended without one."""
    if agent_result is None:
        raise RuntimeError(f"Node '{node_id}' did not produce a result event")
    return agent_result


def _is_result_event(event: dict[str, Any]) -> bool:
    """The last event of a nested orchestrator: ours, or a custom node's Strands-style ``{"result": ...}``."""
    if event.get("type") == "multiagent_result":
        return True
    return "type" not in event and isinstance(event.get("result"), MultiAgentResult)


def import_conversation(agent: Any, data: dict[str, Any]) -> None:
    """Restore a node's conversation exported by ``export_node_state``, keeping the agent's model and metrics.

    ``data`` may also come from a version that wrote only ``messages``/``state``/``interrupt_state``.
    """
    saved = AgentSnapshot.model_validate({"agent_id": agent.agent_id, "name": agent.name, **data})
    agent.restore(replace_conversation(agent.snapshot(), saved))


def make_node_runner(runtime: Any) -> NodeRunner:
    """The node runner for ``runtime``: "local", "ray" (registered by the package root) or a runtime object."""
    return node_runner(runtime)  # type: ignore[no-any-return]


register("local", LocalNodeRunner)
