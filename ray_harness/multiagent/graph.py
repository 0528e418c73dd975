"""``Graph``: run nodes along edges, ready batches in parallel, under a join rule and a failure policy.

The rules (which node may start, when a join is satisfied, which nodes a
failure prunes, when limits stop the run) are in
:mod:`ray_harness.multiagent._scheduling`; how a node runs is the node runner's
(:mod:`ray_harness.multiagent.node_runner`). This module connects the two: it
starts node tasks, merges their events as they arrive, records each completion,
applies hooks, interrupts, cancel, timeouts and persistence.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from ray_harness.hooks.events import (
    AfterMultiAgentInvocationEvent,
    AfterNodeCallEvent,
    BeforeMultiAgentInvocationEvent,
    BeforeNodeCallEvent,
    MultiAgentInitializedEvent,
)
from ray_harness.hooks.registry import HookRegistry
from ray_harness.interrupts import Interrupt, InterruptState
from ray_harness.multiagent._persistence import load_state, save_state
from ray_harness.multiagent._scheduling import GraphScheduler, should_continue_graph, skipped_nodes
from ray_harness.multiagent.base import MultiAgentBase, NodeResult, Status, add_usage, zero_usage
from ray_harness.multiagent.builder import GraphBuilder
from ray_harness.multiagent.events import (
    handoff_event,
    node_cancel_event,
    node_interrupt_event,
    node_start_event,
    node_stop_event,
    node_stream_event,
    result_event,
)
from ray_harness.multiagent.graph_model import GraphEdge, GraphNode, GraphResult, GraphState, build_node_input
from ray_harness.multiagent.node_runner import DEFAULT_RUNTIME, make_node_runner, node_type
from ray_harness.telemetry.runs import node_scope, run_scope
from ray_harness.telemetry.tracing import span_scope
from ray_harness.types.exceptions import ConcurrencyException

__all__ = ("Graph", "GraphBuilder", "GraphEdge", "GraphNode", "GraphResult", "GraphState")

logger = logging.getLogger(__name__)

_TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)


@dataclass
class _NodeDone:
    """How one node task ended (recorded by the graph's main loop, which owns all state)."""

    node_id: str
    result: NodeResult | None = None
    error: BaseException | None = None
    interrupts: list[Interrupt] = field(default_factory=list)
    cancel_message: str | None = None
    stopped: bool = False
    """The graph stopped the task (cancel, fail-fast, execution timeout)."""
    started: float = field(default_factory=time.monotonic)


class Graph(MultiAgentBase):
    """A directed graph of agents and orchestrators. Build it with :class:`GraphBuilder`."""

    RUN_FIELDS = ("state", "_interrupt_state", "_scheduler", "_inputs", "_resume_pending", "_cancel_requested",
                  "_stop_reason", "_fatal", "_deadline_hit", "_invocation_state")
    NODE_RUN_FIELDS = ("execution_status", "result")

    def __init__(self, nodes: dict[str, GraphNode], edges: list[GraphEdge], entry_points: list[GraphNode], *,
                 max_node_executions: int | None = None, execution_timeout: float | None = None,
                 node_timeout: float | None = None, reset_on_revisit: bool = False, join: str = "any",
                 failure_policy: str = "fail_fast", scheduling: str = "batch", hooks: list[Any] | None = None,
                 session_manager: Any = None, graph_id: str = "default_graph",
                 runtime: str = DEFAULT_RUNTIME, trace_attributes: dict[str, Any] | None = None) -> None:
        seen: set[int] = set()
        for node in nodes.values():
            if id(node.executor) in seen:
                raise ValueError("Duplicate node instance detected. Each node must have a unique object instance.")
            seen.add(id(node.executor))
        self.id = graph_id
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
        for edge in edges:
            self._outgoing[edge.from_node.node_id].append(edge)
            self._incoming[edge.to_node.node_id].append(edge)
        self._scheduler = self._new_scheduler()
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
        if self.hooks.has_callbacks(MultiAgentInitializedEvent):
            from ray_harness.agent.agent import run_sync

            run_sync(self.hooks.invoke_callbacks_async(MultiAgentInitializedEvent(source=self)))
        if session_manager is not None:
            load_state(self, session_manager)

    def _new_scheduler(self) -> GraphScheduler:
        pairs = [(edge.from_node.node_id, edge.to_node.node_id) for edge in self.edges]
        return GraphScheduler(nodes=list(self.nodes), edges=pairs, join=self.join)

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
                                             "ray_harness.graph.nodes": len(self.nodes), **self.trace_attributes}), \
                    run_scope("graph", self.id, nodes=len(self.nodes)):
                run = self._invoke(task, state, quiet)
                try:
                    async for event in run:
                        yield event
                finally:
                    await run.aclose()
        finally:
            self._lock.release()

    async def _invoke(self, task: Any, invocation_state: dict[str, Any], quiet: bool = False
                      ) -> AsyncGenerator[dict[str, Any], None]:
        # Quiet (invoke_async, pooled rows): nodes run without their stream events, and only interrupt and
        # result events are produced here; hooks, results and state are the same.
        self._accept(task)
        self._quiet = quiet
        self._invocation_state = invocation_state
        self._cancel_requested = False
        self._stop_reason = None
        self._fatal = None
        self._owed = {}
        self._deadline_hit = False
        self._node_runner.start_invocation()
        if self.hooks.has_callbacks(BeforeMultiAgentInvocationEvent):
            await self.hooks.invoke_callbacks_async(BeforeMultiAgentInvocationEvent(source=self,
                                                                                   invocation_state=invocation_state))
        relaunch = self._prepare(task)
        interrupts: list[Interrupt] = []
        self.state.status = Status.EXECUTING
        self.state.start_time = time.monotonic()
        run = self._run(relaunch, invocation_state)
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
                    source=self, invocation_state=invocation_state))
            save_state(self, self.session_manager)
        yield result_event(self._build_result(interrupts))

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
        self._scheduler = self._new_scheduler()
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
                and await edge.should_traverse_async(self.state, invocation_state)]

    def _node_input(self, node_id: str) -> Any:
        sources = self._inputs.get(node_id, [])
        return build_node_input(self.state.task, {s: self.state.results[s] for s in sources if s in self.state.results})

    # -- the main loop ------------------------------------------------------------------------------------

    async def _run(self, relaunch: dict[str, Any], invocation_state: dict[str, Any]
                   ) -> AsyncGenerator[dict[str, Any], None]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        tasks: dict[str, asyncio.Task[_NodeDone]] = {}
        inline: list[tuple[str, Any]] = []  # the one node of a quiet batch, run in this task (see _launch_ready)
        try:
            for node_id, node_input in relaunch.items():
                self._scheduler.launch(node_id, keep_inbox=True)
                self._start_task(node_id, node_input, queue, tasks, invocation_state)
            if not tasks or self.scheduling == "eager":
                async for event in self._launch_ready(queue, tasks, invocation_state, inline):
                    yield event
            while tasks or inline:
                if inline:
                    done = await self._inline_node(*inline.pop(), queue, tasks, invocation_state)
                else:
                    item = await self._next_item(queue)
                    if item is None:
                        self._time_out(tasks)
                        continue
                    if isinstance(item, dict):
                        yield item
                        continue
                    done = self._done_of(*item)
                async for event in self._node_finished(done, queue, tasks, invocation_state, inline):
                    yield event
            if self._fatal is not None:
                raise self._fatal
        finally:
            try:
                for task in tasks.values():
                    task.cancel()
                if tasks:
                    await asyncio.gather(*tasks.values(), return_exceptions=True)
            finally:
                self._abandon_unrecorded()
                await self._close_owed(invocation_state)

    async def _close_owed(self, invocation_state: dict[str, Any]) -> None:
        """``AfterNodeCallEvent`` for the nodes the run left unrecorded after their ``BeforeNodeCallEvent``.

        Hooks stay paired, as in Strands (its node's ``finally``), when the caller closes the stream mid-run.
        """
        owed, self._owed = list(self._owed), {}
        if owed and self.hooks.has_callbacks(AfterNodeCallEvent):
            for node_id in owed:
                await self.hooks.invoke_callbacks_async(AfterNodeCallEvent(source=self, node_id=node_id,
                                                                           invocation_state=invocation_state))

    def _abandon_unrecorded(self) -> None:
        """Nodes the run stopped without recording (it raised, or its caller left) end CANCELLED, not EXECUTING.

        A normal end records every node it started, so this finds nothing then.
        """
        for node in self.nodes.values():
            if node.execution_status == Status.EXECUTING:
                stopped = NodeResult(result=Exception(f"Node '{node.node_id}' was cancelled"), status=Status.CANCELLED)
                node.execution_status, node.result = Status.CANCELLED, stopped
                self.state.results[node.node_id] = stopped
                self.state.cancelled_nodes.add(node)

    async def _node_finished(self, done: _NodeDone, queue: asyncio.Queue[Any],
                             tasks: dict[str, asyncio.Task[_NodeDone]], invocation_state: dict[str, Any],
                             inline: list[tuple[str, Any]]) -> AsyncGenerator[dict[str, Any], None]:
        """Record a node's end, then stop the rest (a fatal failure) or launch what became ready."""
        tasks.pop(done.node_id, None)
        async for event in self._record(done, invocation_state):
            yield event
        if self._fatal is not None:
            self._stop_tasks(tasks)
        elif not self._halted() and (self.scheduling == "eager" or not tasks):
            async for event in self._launch_ready(queue, tasks, invocation_state, inline):
                yield event

    async def _inline_node(self, node_id: str, node_input: Any, queue: asyncio.Queue[Any],
                           tasks: dict[str, asyncio.Task[_NodeDone]], invocation_state: dict[str, Any]) -> _NodeDone:
        """Run a node in the invocation's own task, the way its task would, deadline included.

        ``_node_task`` reports a cancel as the node being stopped, right for a task of its own; here the
        cancel may be the caller's (its task cancelled, a timeout around the invocation), so it is raised
        again once the node has stopped, as the queue wait of ``_run`` would have raised it.
        """
        async with asyncio.timeout(self._remaining()) as deadline:
            done = await self._node_task(node_id, node_input, queue, invocation_state)
        if deadline.expired():  # the deadline's cancel stopped the node already
            self._time_out(tasks)
        else:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise asyncio.CancelledError
        return done

    def _halted(self) -> bool:
        return (self._cancel_requested or self._stop_reason is not None or self._fatal is not None
                or bool(self.state.interrupted_nodes))

    def _remaining(self) -> float | None:
        """Seconds left of ``execution_timeout``; ``None`` when there is none (or it was hit already)."""
        if self.execution_timeout is None or self._deadline_hit:
            return None
        return max(self.execution_timeout - (self.state.execution_time / 1000
                                             + time.monotonic() - self.state.start_time), 0.0)

    async def _next_item(self, queue: asyncio.Queue[Any]) -> Any:
        remaining = self._remaining()
        if remaining is None:
            return await queue.get()
        try:
            return await asyncio.wait_for(queue.get(), remaining)
        except TimeoutError:
            return None

    def _time_out(self, tasks: dict[str, asyncio.Task[_NodeDone]]) -> None:
        """``execution_timeout`` passed: stop what runs; nothing starts after this."""
        self._deadline_hit = True
        self._stop_reason = f"Execution timed out: {self.execution_timeout}s"
        self._stop_tasks(tasks)

    def _stop_tasks(self, tasks: dict[str, asyncio.Task[_NodeDone]]) -> None:
        """Stop the running node tasks: each node ends stopped (``CANCELLED``, "was cancelled", its run undone).

        The node runner's cancel (one broadcast on Ray) comes on the loop's next turn, after the tasks have taken
        their cancellation (and a nested graph's run has cancelled its own node tasks): an agent never takes the
        graph's cancellation for its own cancel, which would end it with its "cancelled" result instead, depending
        on where it was.
        """
        for task in tasks.values():
            task.cancel()
        asyncio.get_running_loop().call_soon(self._node_runner.cancel)

    def _done_of(self, node_id: str, task: asyncio.Task[_NodeDone]) -> _NodeDone:
        if task.cancelled():  # cancelled before its first step
            return _NodeDone(node_id, stopped=True)
        return task.result()

    def _start_task(self, node_id: str, node_input: Any, queue: asyncio.Queue[Any],
                    tasks: dict[str, asyncio.Task[_NodeDone]], invocation_state: dict[str, Any]) -> None:
        node = self.nodes[node_id]
        node.execution_status = Status.EXECUTING
        task = asyncio.create_task(self._node_task(node_id, node_input, queue, invocation_state),
                                   name=f"ray_harness-graph-{self.id}-{node_id}")
        # The done callback runs after every event the task queued, so a node's events precede its completion.
        task.add_done_callback(lambda finished: queue.put_nowait((node_id, finished)))
        tasks[node_id] = task

    async def _launch_ready(self, queue: asyncio.Queue[Any], tasks: dict[str, asyncio.Task[_NodeDone]],
                            invocation_state: dict[str, Any], inline: list[tuple[str, Any]]
                            ) -> AsyncGenerator[dict[str, Any], None]:
        """Launch the ready nodes, one task each.

        A quiet batch of one node with nothing else running goes to ``inline`` instead, and ``_run`` awaits
        it itself: no task, queue item or callback (a chain's nodes cost less), and no node events to relay.
        """
        from_ids = await self._propagate(invocation_state)
        launches: dict[str, Any] = {}
        ready = [node_id for node_id in self._scheduler.ready if node_id not in tasks]
        if ready and not self._cancel_requested:
            # Checked once per batch, as in Strands: a batch that starts under the limit runs whole.
            go, reason = should_continue_graph(
                launched=self.state.launched, max_node_executions=self.max_node_executions,
                elapsed=self.state.execution_time / 1000 + time.monotonic() - self.state.start_time,
                execution_timeout=self.execution_timeout)
            if not go:
                logger.debug("reason=<%s> | stopping graph execution", reason)
                self._stop_reason = reason
                ready = []
        for node_id in ready:
            if self._cancel_requested or node_id in launches:
                continue
            self._scheduler.launch(node_id)
            node = self.nodes[node_id]
            if self.reset_on_revisit and node in self.state.completed_nodes:
                self._node_runner.reset_node(node_id)
                self.state.completed_nodes.discard(node)
            self._inputs[node_id] = await self._input_sources(node_id, invocation_state)
            self.state.launched += 1
            launches[node_id] = self._node_input(node_id)
        if len(launches) == 1 and self._quiet and not tasks:
            ((node_id, node_input),) = launches.items()
            self.nodes[node_id].execution_status = Status.EXECUTING
            inline.append((node_id, node_input))
        else:
            for node_id, node_input in launches.items():
                self._start_task(node_id, node_input, queue, tasks, invocation_state)
        if launches and from_ids and not self._quiet:
            yield handoff_event(from_ids, list(launches))

    async def _propagate(self, invocation_state: dict[str, Any]) -> list[str]:
        """Fire the edges of every finished node (conditions see the state after the whole batch)."""
        finished = list(self._scheduler.finished)
        for node_id in finished:
            if self.nodes[node_id].execution_status == Status.COMPLETED:
                fired = [edge.to_node.node_id for edge in self._outgoing[node_id]
                         if await edge.should_traverse_async(self.state, invocation_state)]
                self._scheduler.propagate(node_id, fired, failed=False)
            else:
                self._scheduler.propagate(node_id, [], failed=True)
        self._scheduler.collect_ready()
        return finished

    # -- one node -----------------------------------------------------------------------------------------

    async def _node_task(self, node_id: str, node_input: Any, queue: asyncio.Queue[Any],
                         invocation_state: dict[str, Any]) -> _NodeDone:
        done = _NodeDone(node_id)
        quiet = self._quiet
        try:
            if not quiet:
                queue.put_nowait(node_start_event(node_id, node_type(self.nodes[node_id].executor)))
            if self.hooks.has_callbacks(BeforeNodeCallEvent):
                before, interrupts = await self.hooks.invoke_callbacks_async(
                    BeforeNodeCallEvent(source=self, node_id=node_id, invocation_state=invocation_state))
                if interrupts:
                    done.interrupts = interrupts
                    return done
                self._owed[node_id] = None  # _record fires its AfterNodeCallEvent (or _close_owed, if it never comes)
                if before.cancel_node:
                    done.cancel_message = (before.cancel_node if isinstance(before.cancel_node, str)
                                           else "node cancelled by user")
                    return done
            done.started = time.monotonic()
            try:
                async with asyncio.timeout(self.node_timeout):
                    with span_scope(f"execute_node {node_id}", {"ray_harness.node.id": node_id}), node_scope(node_id):
                        async for item in self._node_runner.run_node(node_id, node_input, invocation_state,
                                                                  events="result" if quiet else "all"):
                            if isinstance(item, NodeResult):
                                done.result = item
                            elif not quiet:
                                queue.put_nowait(node_stream_event(node_id, item))
            except TimeoutError:
                self._node_runner.cancel_node(node_id)
                done.error = Exception(f"Node '{node_id}' execution timed out after {self.node_timeout}s")
                return done
            if done.result is None:
                done.error = RuntimeError(f"Node '{node_id}' did not produce a result")
        except asyncio.CancelledError:
            done.stopped = True
        except Exception as error:
            logger.warning("node_id=<%s>, error=<%s> | node failed", node_id, error)
            done.error = error
        return done

    async def _record(self, done: _NodeDone, invocation_state: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        node = self.nodes[done.node_id]
        self._owed.pop(node.node_id, None)  # recorded: its AfterNodeCallEvent (none for an interrupt) is below
        if done.interrupts or (done.result is not None and done.result.status == Status.INTERRUPTED):
            if done.result is not None:
                self._count_interrupted(node, done.result)
            yield self._suspend(node, done)
            save_state(self, self.session_manager)
            return
        if done.cancel_message is not None:
            if not self._quiet:
                yield node_cancel_event(node.node_id, done.cancel_message)
            cancelled = RuntimeError(done.cancel_message)
            result = NodeResult(result=cancelled, status=Status.CANCELLED, execution_count=0)
            if self.failure_policy == "fail_fast":
                self._fatal = cancelled
        elif done.result is not None and not done.stopped:
            result = done.result
        else:
            error = done.error if isinstance(done.error, Exception) else Exception(f"Node '{node.node_id}' was cancelled")
            elapsed = round((time.monotonic() - done.started) * 1000)
            status = Status.CANCELLED if done.stopped else Status.FAILED
            result = NodeResult(result=error, execution_time=elapsed, status=status,
                                accumulated_metrics={"latencyMs": elapsed}, execution_count=1)
            if status == Status.FAILED and self.failure_policy == "fail_fast":
                self._fatal = error
        self._store(node, result, ran=done.result is not None and not done.stopped)
        if not self._quiet:
            yield node_stop_event(node.node_id, result)
        if self.hooks.has_callbacks(AfterNodeCallEvent):
            await self.hooks.invoke_callbacks_async(AfterNodeCallEvent(source=self, node_id=node.node_id,
                                                                       invocation_state=invocation_state))
        save_state(self, self.session_manager)

    def _store(self, node: GraphNode, result: NodeResult, *, ran: bool) -> None:
        node.execution_status = result.status
        node.result = result
        self.state.results[node.node_id] = result
        {Status.COMPLETED: self.state.completed_nodes, Status.FAILED: self.state.failed_nodes,
         Status.CANCELLED: self.state.cancelled_nodes}[result.status].add(node)
        if ran:
            self.state.execution_order.append(node)
        add_usage(self.state.accumulated_usage, result.accumulated_usage)
        add_usage(self.state.accumulated_metrics, result.accumulated_metrics)
        self.state.accumulated_cost_usd += result.accumulated_cost_usd
        self.state.execution_count += result.execution_count
        self._scheduler.finish(node.node_id)

    def _count_interrupted(self, node: GraphNode, result: NodeResult) -> None:
        """What a node spent before its interrupt counts (the resumed run's result counts only its own).

        The result is the node's (``graph.nodes[id].result``) but not yet the graph's: as in Strands, ``results``
        holds the nodes that finished.
        """
        node.result = result
        add_usage(self.state.accumulated_usage, result.accumulated_usage)
        add_usage(self.state.accumulated_metrics, result.accumulated_metrics)
        self.state.accumulated_cost_usd += result.accumulated_cost_usd

    def _suspend(self, node: GraphNode, done: _NodeDone) -> dict[str, Any]:
        from_hook = bool(done.interrupts)
        interrupts = done.interrupts or (done.result.interrupts if done.result is not None else [])
        node.execution_status = Status.INTERRUPTED
        self.state.interrupted_nodes.add(node)
        self._scheduler.suspend(node.node_id)
        for item in interrupts:
            self._interrupt_state.interrupts[item.id] = item
        context: dict[str, Any] = {"from_hook": from_hook, "interrupt_ids": [item.id for item in interrupts]}
        if not from_hook:
            # Stored so that a new process (a new Graph from the session) can resume the node's own interrupt.
            context["node_state"] = self._node_runner.export_node_state(node.node_id)
        self._interrupt_state.context[node.node_id] = context
        self._interrupt_state.activate()
        return node_interrupt_event(node.node_id, interrupts)

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
        def ids(nodes: set[GraphNode]) -> list[str]:
            return sorted(node.node_id for node in nodes)

        return {
            "type": "graph",
            "id": self.id,
            "status": self.state.status.value,
            "task": self.state.task,
            "completed_nodes": ids(self.state.completed_nodes),
            "failed_nodes": ids(self.state.failed_nodes),
            "interrupted_nodes": ids(self.state.interrupted_nodes),
            "cancelled_nodes": ids(self.state.cancelled_nodes),
            "execution_order": [node.node_id for node in self.state.execution_order],
            "node_results": {key: value.to_dict() for key, value in self.state.results.items()},
            "accumulated_usage": dict(self.state.accumulated_usage),
            "accumulated_metrics": dict(self.state.accumulated_metrics),
            "accumulated_cost_usd": self.state.accumulated_cost_usd,
            "execution_count": self.state.execution_count,
            "execution_time": self.state.execution_time,
            "launched": self.state.launched,
            "scheduler": self._scheduler.to_dict(),
            "inputs": dict(self._inputs),
            "interrupt_state": self._interrupt_state.to_dict(),
        }

    def deserialize_state(self, payload: dict[str, Any]) -> None:
        """Restore a snapshot. A finished run resets the graph; an interrupted or unfinished one resumes."""
        if not isinstance(payload, dict) or payload.get("type") != "graph":
            raise ValueError("graph state field 'type' must be 'graph'")
        try:
            status = Status(payload.get("status", "pending"))
        except ValueError:
            raise ValueError(f"graph state field 'status' is invalid: {payload.get('status')!r}") from None
        if status in _TERMINAL or status == Status.PENDING:
            self.state = GraphState()
            self._scheduler = self._new_scheduler()
            self._interrupt_state = InterruptState()
            self._resume_pending = False
            return
        state = GraphState(task=payload.get("task", ""), status=status, total_nodes=len(self.nodes),
                           edges=[(edge.from_node, edge.to_node) for edge in self.edges],
                           entry_points=list(self.entry_points))

        def nodes(key: str) -> set[GraphNode]:
            return {self.nodes[node_id] for node_id in payload.get(key) or [] if node_id in self.nodes}

        state.completed_nodes, state.failed_nodes = nodes("completed_nodes"), nodes("failed_nodes")
        state.interrupted_nodes, state.cancelled_nodes = nodes("interrupted_nodes"), nodes("cancelled_nodes")
        state.execution_order = [self.nodes[n] for n in payload.get("execution_order") or [] if n in self.nodes]
        state.results = {key: NodeResult.from_dict(value) for key, value in (payload.get("node_results") or {}).items()
                         if key in self.nodes}
        state.accumulated_usage = {**zero_usage(), **(payload.get("accumulated_usage") or {})}
        state.accumulated_metrics = {"latencyMs": 0, **(payload.get("accumulated_metrics") or {})}
        state.accumulated_cost_usd = float(payload.get("accumulated_cost_usd") or 0.0)
        state.execution_count = int(payload.get("execution_count") or 0)
        state.execution_time = int(payload.get("execution_time") or 0)
        state.launched = int(payload.get("launched") or 0)
        self.state = state
        for node in self.nodes.values():
            result = state.results.get(node.node_id)
            node.execution_status = Status.INTERRUPTED if node in state.interrupted_nodes else (
                result.status if result is not None else Status.PENDING)
            node.result = result
        self._scheduler = self._new_scheduler()
        self._scheduler.load(payload.get("scheduler") or {})
        self._inputs = {key: list(value) for key, value in (payload.get("inputs") or {}).items()}
        self._interrupt_state = InterruptState.from_dict(payload.get("interrupt_state") or {})
        for node_id, context in self._interrupt_state.context.items():
            if node_id in self.nodes and isinstance(context, dict) and "node_state" in context:
                self._node_runner.import_node_state(node_id, context["node_state"])
        self._resume_pending = status == Status.EXECUTING
