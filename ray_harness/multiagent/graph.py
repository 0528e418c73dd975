"""``Graph``: run nodes along edges, ready batches in parallel, under a join rule and a failure policy.

The rules (which node may start, when a join is satisfied, which nodes a
failure prunes, when limits stop the run) are in
:mod:`ray_harness.multiagent._scheduling`; how a node runs is the node runner's
(:mod:`ray_harness.multiagent.node_runner`); the loop that connects the two
(node tasks, their events, each completion recorded) is
:mod:`ray_harness.multiagent._graph_loop`. This module holds the ``Graph`` itself:
its configuration, cancel, an invocation's start (a fresh run or a resume) and
end, and its state in a session.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import AsyncGenerator
from typing import Any

from ray_harness.hooks.events import (
    AfterMultiAgentInvocationEvent,
    BeforeMultiAgentInvocationEvent,
    MultiAgentInitializedEvent,
)
from ray_harness.hooks.registry import HookRegistry
from ray_harness.interrupts import Interrupt, InterruptState
from ray_harness.multiagent._graph_loop import run_nodes
from ray_harness.multiagent._persistence import graph_snapshot, load_state, restore_graph, save_state
from ray_harness.multiagent._scheduling import GraphScheduler, skipped_nodes
from ray_harness.multiagent.base import MultiAgentBase, NodeResult, Status
from ray_harness.multiagent.builder import GraphBuilder
from ray_harness.multiagent.events import result_event
from ray_harness.multiagent.graph_model import (
    EdgeCondition,
    EdgeConditionWithContext,
    GraphEdge,
    GraphNode,
    GraphResult,
    GraphState,
    build_node_input,
)
from ray_harness.multiagent.node_runner import DEFAULT_RUNTIME, make_node_runner
from ray_harness.plugins.multiagent_registry import check_multi_agent_plugins, register_multi_agent_plugins
from ray_harness.telemetry.runs import run_scope
from ray_harness.telemetry.tracing import span_scope
from ray_harness.types.exceptions import ConcurrencyException

__all__ = ("EdgeCondition", "EdgeConditionWithContext", "Graph", "GraphBuilder", "GraphEdge", "GraphNode",
           "GraphResult", "GraphState")

class Graph(MultiAgentBase):
    """A directed graph of agents and orchestrators. Build it with :class:`GraphBuilder`."""

    RUN_FIELDS = ("state", "_interrupt_state", "_scheduler", "_inputs", "_resume_pending", "_cancel_requested",
                  "_stop_reason", "_fatal", "_deadline_hit", "_invocation_state")
    NODE_RUN_FIELDS = ("execution_status", "result")

    def __init__(self, nodes: dict[str, GraphNode], edges: list[GraphEdge], entry_points: list[GraphNode], *,
                 max_node_executions: int | None = None, execution_timeout: float | None = None,
                 node_timeout: float | None = None, reset_on_revisit: bool = False, join: str = "any",
                 failure_policy: str = "fail_fast", scheduling: str = "batch", hooks: list[Any] | None = None,
                 session_manager: Any = None, id: str = "default_graph", graph_id: str | None = None,
                 runtime: str = DEFAULT_RUNTIME, trace_attributes: dict[str, Any] | None = None,
                 plugins: list[Any] | None = None) -> None:
        plugin_list = check_multi_agent_plugins(plugins)  # a wrong entry is named before anything is built
        # ``id`` as Strands names it; ``graph_id``, this constructor's earlier name for it, still wins when given.
        if len({builtins.id(node.executor) for node in nodes.values()}) != len(nodes):
            raise ValueError("Duplicate node instance detected. Each node must have a unique object instance.")
        self.id = graph_id if graph_id is not None else id
        self.nodes = nodes
        self.edges = edges
        self.entry_points = entry_points
        self.max_node_executions = max_node_executions
        self.execution_timeout = execution_timeout
        self.node_timeout = node_timeout
        self.reset_on_revisit = reset_on_revisit
        self.join = join
        self.failure_policy = failure_policy
        self.scheduling = scheduling
        self.session_manager = session_manager
        self.runtime = runtime
        self.trace_attributes = dict(trace_attributes or {})  # on the invoke_graph span, as Strands' Graph
        self.hooks = HookRegistry()
        self._register_hook_providers(hooks)
        self.state = GraphState()
        self._interrupt_state = InterruptState()
        self._outgoing: dict[str, list[GraphEdge]] = {node_id: [] for node_id in nodes}
        self._incoming: dict[str, list[GraphEdge]] = {node_id: [] for node_id in nodes}
        # What every scheduler of this graph is made of (one per invocation; only read by it).
        self._node_ids = list(nodes)
        self._edge_pairs: list[tuple[str, str]] = []
        # Whether any edge has a condition: without one, firing edges and choosing inputs await nothing.
        self._conditional = False
        for edge in edges:
            source, target = edge.from_node.node_id, edge.to_node.node_id
            self._outgoing[source].append(edge)
            self._incoming[target].append(edge)
            self._edge_pairs.append((source, target))
            self._conditional = self._conditional or edge.condition is not None
        self._scheduler = self._new_scheduler()
        # The scheduler made here, until a run starts: the first fresh run takes it over (``start`` resets all of
        # it) instead of making another one (a graph built per row runs once).
        self._unstarted: GraphScheduler | None = self._scheduler
        self._inputs: dict[str, list[str]] = {}
        self._resume_pending = False
        self._lock = threading.Lock()
        self._cancel_requested = False
        self._stop_reason: str | None = None
        self._quiet = False
        self._fatal: BaseException | None = None
        self._deadline_hit = False
        self._owed: dict[str, None] = {}  # nodes whose BeforeNodeCallEvent ran and whose AfterNodeCallEvent has not
        self._invocation_state: dict[str, Any] = {}
        self._node_runner = make_node_runner(runtime)
        self._node_runner.bind({node_id: node.executor for node_id, node in nodes.items()})
        for node in nodes.values():
            node._runner = self._node_runner  # its reset_executor_state() resets through it
        # After hooks= (as in Strands) and the rest of the set-up: init_multi_agent sees a configured graph, and a
        # plugin's hooks get its MultiAgentInitializedEvent.
        if plugins is not None:  # as Agent(plugins=): most orchestrators (one per evaluation row) have none
            self._plugin_registry = register_multi_agent_plugins(self, plugin_list)
        if self.hooks.has_callbacks(MultiAgentInitializedEvent):
            from ray_harness.agent.agent import run_sync

            run_sync(self.hooks.invoke_callbacks_async(MultiAgentInitializedEvent(source=self)))
        if session_manager is not None:
            load_state(self, session_manager)

    def _new_scheduler(self) -> GraphScheduler:
        return GraphScheduler(nodes=self._node_ids, edges=self._edge_pairs, join=self.join)

    # -- control ------------------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the running invocation: every running node is cancelled and the result is CANCELLED."""
        if not self._lock.locked():
            return  # idle: nothing to stop, and the next invocation must not inherit a cancel
        self._cancel_requested = True
        self._node_runner.cancel()

    # -- invocation ---------------------------------------------------------------------------------------

    def stream_async(self, task: Any, invocation_state: dict[str, Any] | None = None,
                     **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        """Run the graph on ``task``, yielding node and multi-agent events; the last one carries the result.

        Args:
            task: The prompt or content blocks given to the entry points.
            invocation_state: Shared state passed to every node's agent (``kwargs`` are merged into it).
            **kwargs: More invocation state.
        """
        return self._stream(task, invocation_state, kwargs, quiet=False)

    def _quiet_stream(self, task: Any, invocation_state: dict[str, Any] | None = None,
                      **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        return self._stream(task, invocation_state, kwargs, quiet=True)

    async def _stream(self, task: Any, invocation_state: dict[str, Any] | None, kwargs: dict[str, Any], *,
                      quiet: bool) -> AsyncGenerator[dict[str, Any], None]:
        if not self._lock.acquire(blocking=False):
            raise ConcurrencyException(f"graph {self.id!r} is already running an invocation")
        try:
            state = invocation_state if invocation_state is not None else {}
            if kwargs:  # a new dict, as the Agent does: the caller's invocation_state is not ours to change
                state = {**state, **kwargs}
            # A node runner may run the whole orchestration elsewhere (runtime="ray": on an orchestration host).
            elsewhere = getattr(self._node_runner, "stream_orchestrator", None)
            delegated = None if elsewhere is None else elsewhere(self, task, state, events="result" if quiet else "all")
            # Closed by its caller, this generator closes the one it reads: the run is over (its nodes stopped,
            # their agents idle) when aclose() returns and the graph is free, not at the GC's next pass.
            if delegated is not None:
                try:
                    async for event in delegated:
                        yield event
                finally:
                    await delegated.aclose()
                return
            with span_scope("invoke_graph", {"gen_ai.operation.name": "invoke_graph", "ray_harness.graph.id": self.id,
                                             "ray_harness.graph.nodes": len(self.nodes), **self.trace_attributes},
                            outcome=lambda: self.state.status), \
                    run_scope("graph", self.id, nodes=len(self.nodes), outcome=lambda: self.state.status,
                              cancel=self.cancel):
                # The invocation runs in this generator itself (one generator less per invocation, e.g. per row).
                # Quiet (invoke_async, pooled rows): nodes run without their stream events, and only interrupt
                # and result events are produced here; hooks, results and state are the same.
                self._accept(task)
                self._quiet = quiet
                self._invocation_state = state
                self._cancel_requested = False
                self._stop_reason = None
                self._fatal = None
                self._owed = {}
                self._deadline_hit = False
                self._node_runner.start_invocation()
                if self.hooks.has_callbacks(BeforeMultiAgentInvocationEvent):
                    await self.hooks.invoke_callbacks_async(BeforeMultiAgentInvocationEvent(source=self,
                                                                                           invocation_state=state))
                relaunch = self._prepare(task)
                interrupts: list[Interrupt] = []
                self.state.status = Status.EXECUTING
                self.state.start_time = time.monotonic()
                run = run_nodes(self, relaunch, state)
                try:
                    async for event in run:
                        if event["type"] == "multiagent_node_interrupt":
                            interrupts.extend(event["interrupts"])
                        yield event
                    self._finish()
                except BaseException:
                    self.state.status = Status.FAILED
                    raise
                finally:
                    await run.aclose()  # its running nodes stop before the hooks below see the end
                    self.state.execution_time += round((time.monotonic() - self.state.start_time) * 1000)
                    self._resume_pending = False
                    if self.hooks.has_callbacks(AfterMultiAgentInvocationEvent):
                        await self.hooks.invoke_callbacks_async(AfterMultiAgentInvocationEvent(
                            source=self, invocation_state=state))
                    save_state(self, self.session_manager)
                yield result_event(self._build_result(interrupts))
        finally:
            self._lock.release()

    def _accept(self, task: Any) -> None:
        """Refuse a bad task before any hook runs (as an Agent refuses a bad prompt); store interrupt answers.

        Raises:
            ValueError: ``task`` is neither a string nor a list, or holds answers but nothing is interrupted.
            TypeError, KeyError: Bad interrupt answers (none is stored then).
        """
        if not self._interrupt_state.activated and not isinstance(task, str | list):
            raise ValueError(f"task must be a string or a list of content blocks, got {type(task).__name__}")
        self._interrupt_state.resume(task)

    def _prepare(self, task: Any) -> dict[str, Any]:
        """Start fresh, or resume interrupts / a restored run. Returns node id → input of nodes to re-run."""
        if self._interrupt_state.activated:
            relaunch = {node.node_id: self._resume_input(node.node_id) for node in self.state.interrupted_nodes}
            self.state.interrupted_nodes.clear()
            self._interrupt_state.context = {}
            self._interrupt_state.activated = False  # answered interrupts stay, so re-run hooks get responses
            return relaunch
        if self._resume_pending:
            return {}
        self._interrupt_state.deactivate()
        self.state = GraphState(task=task, total_nodes=len(self.nodes),
                                edges=[(edge.from_node, edge.to_node) for edge in self.edges],
                                entry_points=list(self.entry_points))
        for node in self.nodes.values():
            node.execution_status, node.result = Status.PENDING, None
        if self._scheduler is not self._unstarted:  # one a run has used (or a restored one): a new one
            self._scheduler = self._new_scheduler()
        self._unstarted = None
        self._scheduler.start(node.node_id for node in self.entry_points)
        self._inputs = {}
        return {}

    def _resume_input(self, node_id: str) -> Any:
        context = self._interrupt_state.context.get(node_id, {})
        if context.get("from_hook", True):
            return self._node_input(node_id)
        return [
            {"interruptResponse": {"interruptId": key, "response": self._interrupt_state.interrupts[key].response}}
            for key in context.get("interrupt_ids", []) if key in self._interrupt_state.interrupts
        ]

    async def _input_sources(self, node_id: str, invocation_state: dict[str, Any]) -> list[str]:
        """Every completed source whose edge condition holds now, in edge order (as in Strands).

        Not only the sources that fired since the node last ran (those decide when it runs): a node revisited
        by a loop, or joined from branches of different lengths, still sees the inputs that came earlier.
        """
        completed, results = self.state.completed_nodes, self.state.results
        return [edge.from_node.node_id for edge in self._incoming[node_id]
                if edge.from_node in completed and edge.from_node.node_id in results
                and (edge.condition is None or await edge.should_traverse_async(self.state, invocation_state))]

    def _completed_sources(self, node_id: str) -> list[str]:
        """:meth:`_input_sources` of a graph without edge conditions: nothing to await, so no coroutine per node."""
        completed, results = self.state.completed_nodes, self.state.results
        return [edge.from_node.node_id for edge in self._incoming[node_id]
                if edge.from_node in completed and edge.from_node.node_id in results]

    def _node_input(self, node_id: str) -> Any:
        sources = self._inputs.get(node_id, [])
        return build_node_input(self.state.task, {s: self.state.results[s] for s in sources if s in self.state.results})

    # -- end of an invocation -----------------------------------------------------------------------------

    def _finish(self) -> None:
        if self._cancel_requested:
            self.state.status = Status.CANCELLED
        elif self.state.interrupted_nodes:
            self.state.status = Status.INTERRUPTED
            return
        elif self._stop_reason is not None or self.state.failed_nodes or self._a_node_cancelled_itself():
            self.state.status = Status.FAILED
        else:
            self.state.status = Status.COMPLETED
        if self.failure_policy == "continue" and not self._cancel_requested:
            for node_id in skipped_nodes(self.nodes, self._scheduler.edges, set(self._scheduler.ran),
                                         set(self._scheduler.stopped)):
                node = self.nodes[node_id]
                skipped = NodeResult(result=Exception(f"Node '{node_id}' skipped: an upstream node failed or was "
                                                      "cancelled"), status=Status.CANCELLED)
                node.execution_status, node.result = Status.CANCELLED, skipped
                self.state.results[node_id] = skipped
                self.state.cancelled_nodes.add(node)
        self._interrupt_state.deactivate()

    def _a_node_cancelled_itself(self) -> bool:
        """Under fail_fast an agent node that cancelled itself fails the graph (as in Strands; the node is CANCELLED).

        Its result is the agent's own (``stop_reason="cancelled"``), unlike a node that ``cancel_node`` skipped
        (no execution) or one stopped by the graph (an error result).
        """
        return self.failure_policy == "fail_fast" and any(
            node.result is not None and node.result.execution_count > 0
            and not isinstance(node.result.result, BaseException)
            for node in self.state.cancelled_nodes
        )

    def _build_result(self, interrupts: list[Interrupt]) -> GraphResult:
        return GraphResult(
            status=self.state.status, results=dict(self.state.results),
            accumulated_usage=dict(self.state.accumulated_usage),
            accumulated_metrics=dict(self.state.accumulated_metrics), execution_count=self.state.execution_count,
            execution_time=self.state.execution_time, interrupts=list(interrupts),
            accumulated_cost_usd=self.state.accumulated_cost_usd, total_nodes=len(self.nodes),
            completed_nodes=len(self.state.completed_nodes), failed_nodes=len(self.state.failed_nodes),
            interrupted_nodes=len(self.state.interrupted_nodes), cancelled_nodes=len(self.state.cancelled_nodes),
            execution_order=list(self.state.execution_order), edges=list(self.state.edges),
            entry_points=list(self.entry_points),
        )

    # -- persistence --------------------------------------------------------------------------------------

    def serialize_state(self) -> dict[str, Any]:
        """The graph's state as JSON: status, task, nodes by outcome, execution order, results, scheduler.

        A session manager persists it after each node; :meth:`deserialize_state` resumes from it.
        """
        return graph_snapshot(self)

    def deserialize_state(self, payload: dict[str, Any]) -> None:
        """Restore a snapshot. A finished run resets the graph; an interrupted or unfinished one resumes."""
        restore_graph(self, payload)
