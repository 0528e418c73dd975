"""How a :class:`~ray_harness.multiagent.graph.Graph` runs its nodes: the main loop, and one node in it.

The loop starts a task per ready node (a quiet batch of one node runs in the loop's own task), merges
their events as they arrive, records each completion in the graph's state (results, totals, interrupts,
hooks, persistence) and stops what runs on cancel, a fail-fast failure or the execution timeout. Which node
may start is :mod:`ray_harness.multiagent._scheduling`'s; how a node runs is the node runner's. The
functions take the graph, which owns all state, as the agent loop (:mod:`ray_harness.agent.loop`) takes
its agent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ray_harness.hooks.events import AfterNodeCallEvent, BeforeNodeCallEvent
from ray_harness.interrupts import Interrupt
from ray_harness.multiagent._persistence import save_state
from ray_harness.multiagent.base import NodeResult, Status, add_usage
from ray_harness.multiagent.events import (
    handoff_event,
    node_cancel_event,
    node_interrupt_event,
    node_start_event,
    node_stop_event,
    node_stream_event,
)
from ray_harness.multiagent.graph_model import GraphNode
from ray_harness.multiagent.node_runner import node_type
from ray_harness.telemetry.runs import node_scope
from ray_harness.telemetry.tracing import span_scope

if TYPE_CHECKING:
    from ray_harness.multiagent.graph import Graph

__all__ = ("run_nodes",)

_IN_FLIGHT = (Status.DISPATCHED, Status.EXECUTING)

# The graph's logger: its records keep the name they had when this loop was part of graph.py.
logger = logging.getLogger("ray_harness.multiagent.graph")


@dataclass(slots=True)
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


class _Running:
    """What an invocation runs now: its node tasks, the node it runs inline, the queue the tasks report on."""

    __slots__ = ("_queue", "inline", "tasks")

    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task[_NodeDone]] = {}
        self.inline: list[tuple[str, Any]] = []  # the one node of a quiet batch, run in this task (see _launch_ready)
        self._queue: asyncio.Queue[Any] | None = None

    @property
    def queue(self) -> asyncio.Queue[Any]:
        """Made on first use: a quiet chain runs every node inline and queues nothing (no ``Queue`` per row)."""
        if self._queue is None:
            self._queue = asyncio.Queue()
        return self._queue


# -- the main loop ------------------------------------------------------------------------------------


async def run_nodes(graph: Graph, relaunch: dict[str, Any], invocation_state: dict[str, Any]
                    ) -> AsyncGenerator[dict[str, Any], None]:
    """Run the graph's ready nodes (first ``relaunch``: node id → input) until none is ready or running.

    Yields node and handoff events as they arrive; raises a fail-fast failure once every node task has stopped.
    The steps are plain coroutines and functions: this is the loop's one async generator (a quiet invocation's
    node costs no generator of the loop's own), and it yields their events itself, at the points they always came.
    """
    running = _Running()
    try:
        handoff = await _first_batch(graph, relaunch, running, invocation_state)
        if handoff is not None:
            yield handoff
        while running.tasks or running.inline:
            done = await _next_done(graph, running, invocation_state)
            if isinstance(done, dict):  # a node task's event
                yield done
                continue
            running.tasks.pop(done.node_id, None)
            if graph._quiet:
                interrupt = await _record_quiet(graph, done, invocation_state)
                if interrupt is not None:
                    yield interrupt
                    save_state(graph, graph.session_manager)
            else:
                async for event in _record(graph, done, invocation_state):
                    yield event
            handoff = await _next_batch(graph, running, invocation_state)
            if handoff is not None:
                yield handoff
        if graph._fatal is not None:
            raise graph._fatal
    finally:
        await _wind_down(graph, running.tasks, invocation_state)


async def _first_batch(graph: Graph, relaunch: dict[str, Any], running: _Running,
                       invocation_state: dict[str, Any]) -> dict[str, Any] | None:
    """Start the nodes to re-run (``relaunch``), then the ready ones unless those must finish first."""
    for node_id, node_input in relaunch.items():
        graph._scheduler.launch(node_id, keep_inbox=True)
        _start_task(graph, node_id, node_input, running, invocation_state)
    if not running.tasks or graph.scheduling == "eager":
        return await _launch_ready(graph, running, invocation_state)
    return None


async def _next_done(graph: Graph, running: _Running, invocation_state: dict[str, Any]) -> _NodeDone | dict[str, Any]:
    """The next node end (the inline node's, else a task's), or the next event a node task queued."""
    if running.inline:
        return await _inline_node(graph, *running.inline.pop(), running, invocation_state)
    while True:
        item = await _next_item(graph, running.queue)
        if item is None:  # execution_timeout: the stopped tasks' ends come next
            _time_out(graph, running.tasks)
            continue
        if isinstance(item, dict):
            return item
        return _done_of(*item)


async def _next_batch(graph: Graph, running: _Running, invocation_state: dict[str, Any]) -> dict[str, Any] | None:
    """After a node's end: stop the rest (a fatal failure) or launch what became ready (its handoff event)."""
    if graph._fatal is not None:
        _stop_tasks(graph, running.tasks)
        return None
    if _halted(graph) or (graph.scheduling != "eager" and running.tasks):
        return None
    return await _launch_ready(graph, running, invocation_state)


async def _wind_down(graph: Graph, tasks: dict[str, asyncio.Task[_NodeDone]], invocation_state: dict[str, Any]
                     ) -> None:
    """The run ended or was left: stop the node tasks still running, end the unrecorded nodes, pair the hooks."""
    try:
        for task in tasks.values():
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks.values(), return_exceptions=True)
    finally:
        _abandon_unrecorded(graph)
        if graph._owed:  # a run that recorded every node owes no hook (no coroutine then)
            await _close_owed(graph, invocation_state)


async def _close_owed(graph: Graph, invocation_state: dict[str, Any]) -> None:
    """``AfterNodeCallEvent`` for the nodes the run left unrecorded after their ``BeforeNodeCallEvent``.

    Hooks stay paired, as in Strands (its node's ``finally``), when the caller closes the stream mid-run.
    """
    owed, graph._owed = list(graph._owed), {}
    if owed and graph.hooks.has_callbacks(AfterNodeCallEvent):
        for node_id in owed:
            await graph.hooks.invoke_callbacks_async(AfterNodeCallEvent(source=graph, node_id=node_id,
                                                                        invocation_state=invocation_state))


def _abandon_unrecorded(graph: Graph) -> None:
    """Nodes the run stopped without recording (it raised, or its caller left) end CANCELLED, not in flight.

    Only launched nodes can be in flight, and the scheduler keeps them running until they are recorded or
    suspended: a normal end leaves none, so this looks at no node then.
    """
    if not graph._scheduler.running:
        return
    for node in graph.nodes.values():  # in the graph's order, as they enter the results
        if node.execution_status in _IN_FLIGHT:  # a task cancelled before its first step is still DISPATCHED
            stopped = NodeResult(result=Exception(f"Node '{node.node_id}' was cancelled"), status=Status.CANCELLED)
            node.execution_status, node.result = Status.CANCELLED, stopped
            graph.state.results[node.node_id] = stopped
            graph.state.cancelled_nodes.add(node)


async def _inline_node(graph: Graph, node_id: str, node_input: Any, running: _Running,
                       invocation_state: dict[str, Any]) -> _NodeDone:
    """Run a node in the invocation's own task, the way its task would, deadline included.

    ``_node_task`` reports a cancel as the node being stopped, right for a task of its own; here the
    cancel may be the caller's (its task cancelled, a timeout around the invocation), so it is raised
    again once the node has stopped, as the queue wait of ``run_nodes`` would have raised it.
    """
    remaining = _remaining(graph)
    if remaining is None:  # no deadline: no timeout context (one per node of a chain otherwise)
        done = await _node_task(graph, node_id, node_input, running, invocation_state)
        expired = False
    else:
        async with asyncio.timeout(remaining) as deadline:
            done = await _node_task(graph, node_id, node_input, running, invocation_state)
        expired = deadline.expired()
    if expired:  # the deadline's cancel stopped the node already
        _time_out(graph, running.tasks)
    else:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise asyncio.CancelledError
    return done


def _halted(graph: Graph) -> bool:
    return (graph._cancel_requested or graph._stop_reason is not None or graph._fatal is not None
            or bool(graph.state.interrupted_nodes))


def _remaining(graph: Graph) -> float | None:
    """Seconds left of ``execution_timeout``; ``None`` when there is none (or it was hit already)."""
    if graph.execution_timeout is None or graph._deadline_hit:
        return None
    return max(graph.execution_timeout - (graph.state.execution_time / 1000
                                          + time.monotonic() - graph.state.start_time), 0.0)


async def _next_item(graph: Graph, queue: asyncio.Queue[Any]) -> Any:
    remaining = _remaining(graph)
    if remaining is None:
        return await queue.get()
    try:
        return await asyncio.wait_for(queue.get(), remaining)
    except TimeoutError:
        return None


def _time_out(graph: Graph, tasks: dict[str, asyncio.Task[_NodeDone]]) -> None:
    """``execution_timeout`` passed: stop what runs; nothing starts after this."""
    graph._deadline_hit = True
    graph._stop_reason = f"Execution timed out: {graph.execution_timeout}s"
    _stop_tasks(graph, tasks)


def _stop_tasks(graph: Graph, tasks: dict[str, asyncio.Task[_NodeDone]]) -> None:
    """Stop the running node tasks: each node ends stopped (``CANCELLED``, "was cancelled", its run undone).

    The node runner's cancel (one broadcast on Ray) comes on the loop's next turn, after the tasks have taken
    their cancellation (and a nested graph's run has cancelled its own node tasks): an agent never takes the
    graph's cancellation for its own cancel, which would end it with its "cancelled" result instead, depending
    on where it was.
    """
    for task in tasks.values():
        task.cancel()
    asyncio.get_running_loop().call_soon(graph._node_runner.cancel)


def _done_of(node_id: str, task: asyncio.Task[_NodeDone]) -> _NodeDone:
    if task.cancelled():  # cancelled before its first step
        return _NodeDone(node_id, stopped=True)
    return task.result()


def _start_task(graph: Graph, node_id: str, node_input: Any, running: _Running,
                invocation_state: dict[str, Any]) -> None:
    graph.nodes[node_id].execution_status = Status.DISPATCHED  # EXECUTING once its task starts (_node_task)
    queue = running.queue
    task = asyncio.create_task(_node_task(graph, node_id, node_input, running, invocation_state),
                               name=f"ray_harness-graph-{graph.id}-{node_id}")
    # The done callback runs after every event the task queued, so a node's events precede its completion.
    task.add_done_callback(lambda finished: queue.put_nowait((node_id, finished)))
    running.tasks[node_id] = task


async def _launch_ready(graph: Graph, running: _Running, invocation_state: dict[str, Any]) -> dict[str, Any] | None:
    """Launch the ready nodes, one task each; returns the handoff event for ``run_nodes`` to yield (or None).

    A quiet batch of one node with nothing else running goes to ``inline`` instead, and ``run_nodes`` awaits
    it itself: no task, queue item or callback (a chain's nodes cost less), and no node events to relay.
    """
    # Without edge conditions nothing is awaited to fire an edge (most graphs, every chain of a P2 row).
    from_ids = _propagate(graph, await _fire_conditions(graph, invocation_state) if graph._conditional else None)
    launches: dict[str, Any] = {}
    ready = [node_id for node_id in graph._scheduler.ready if node_id not in running.tasks]
    limited = graph.max_node_executions is not None or graph.execution_timeout is not None
    if ready and not graph._cancel_requested and limited:
        # Checked once per batch, as in Strands: a batch that starts under the limit runs whole.
        go, reason = graph.state.should_continue(graph.max_node_executions, graph.execution_timeout)
        if not go:
            logger.debug("reason=<%s> | stopping graph execution", reason)
            graph._stop_reason = reason
            ready = []
    for node_id in ready:
        if graph._cancel_requested or node_id in launches:
            continue
        graph._scheduler.launch(node_id)
        node = graph.nodes[node_id]
        if graph.reset_on_revisit and node in graph.state.completed_nodes:
            graph._node_runner.reset_node(node_id)  # this graph's runner (a node built into two graphs has two)
            graph.state.completed_nodes.discard(node)
        graph._inputs[node_id] = (await graph._input_sources(node_id, invocation_state) if graph._conditional
                                  else graph._completed_sources(node_id))
        graph.state.launched += 1
        launches[node_id] = graph._node_input(node_id)
    if len(launches) == 1 and graph._quiet and not running.tasks:
        ((node_id, node_input),) = launches.items()
        graph.nodes[node_id].execution_status = Status.DISPATCHED
        running.inline.append((node_id, node_input))
    else:
        for node_id, node_input in launches.items():
            _start_task(graph, node_id, node_input, running, invocation_state)
    if launches and from_ids and not graph._quiet:
        return handoff_event(from_ids, list(launches))
    return None


async def _fire_conditions(graph: Graph, invocation_state: dict[str, Any]) -> dict[str, list[str]]:
    """The targets each finished, completed node fires into: its edges whose condition holds (asked here, in order).

    Conditions see the state after the whole batch. An edge without a condition fires without awaiting anything.
    """
    return {node_id: [edge.to_node.node_id for edge in graph._outgoing[node_id]
                      if edge.condition is None or await edge.should_traverse_async(graph.state, invocation_state)]
            for node_id in graph._scheduler.finished if graph.nodes[node_id].execution_status == Status.COMPLETED}


def _propagate(graph: Graph, fired: dict[str, list[str]] | None) -> list[str]:
    """Fire the edges of every finished node; returns those nodes.

    ``fired``: what :func:`_fire_conditions` found, or None for a graph without edge conditions (every edge fires).
    """
    finished = list(graph._scheduler.finished)
    for node_id in finished:
        if graph.nodes[node_id].execution_status == Status.COMPLETED:
            targets = fired[node_id] if fired is not None else [edge.to_node.node_id
                                                                for edge in graph._outgoing[node_id]]
            graph._scheduler.propagate(node_id, targets, failed=False)
        else:
            graph._scheduler.propagate(node_id, [], failed=True)
    graph._scheduler.collect_ready()
    return finished


# -- one node -----------------------------------------------------------------------------------------


async def _node_task(graph: Graph, node_id: str, node_input: Any, running: _Running,
                     invocation_state: dict[str, Any]) -> _NodeDone:
    done = _NodeDone(node_id)
    quiet = graph._quiet
    # Dispatched with its batch, in flight from then on; it executes from here (as Strands' _execute_node).
    graph.nodes[node_id].execution_status = Status.EXECUTING
    try:
        if not quiet:
            running.queue.put_nowait(node_start_event(node_id, node_type(graph.nodes[node_id].executor)))
        if graph.hooks.has_callbacks(BeforeNodeCallEvent):
            before, interrupts = await graph.hooks.invoke_callbacks_async(
                BeforeNodeCallEvent(source=graph, node_id=node_id, invocation_state=invocation_state))
            if interrupts:
                done.interrupts = interrupts
                return done
            graph._owed[node_id] = None  # run_nodes fires its AfterNodeCallEvent (or _close_owed, if it never comes)
            if before.cancel_node:
                done.cancel_message = (before.cancel_node if isinstance(before.cancel_node, str)
                                       else "node cancelled by user")
                return done
        done.started = time.monotonic()
        try:
            if graph.node_timeout is None:  # no timeout context then (one per node otherwise)
                await _run_node(graph, done, node_input, running, invocation_state)
            else:
                async with asyncio.timeout(graph.node_timeout):
                    await _run_node(graph, done, node_input, running, invocation_state)
        except TimeoutError:
            graph._node_runner.cancel_node(node_id)
            done.error = Exception(f"Node '{node_id}' execution timed out after {graph.node_timeout}s")
            return done
        if done.result is None:
            done.error = RuntimeError(f"Node '{node_id}' did not produce a result")
    except asyncio.CancelledError:
        done.stopped = True
    except Exception as error:
        logger.warning("node_id=<%s>, error=<%s> | node failed", node_id, error)
        done.error = error
    return done


async def _run_node(graph: Graph, done: _NodeDone, node_input: Any, running: _Running,
                    invocation_state: dict[str, Any]) -> None:
    """The node runner's run of the node, in its telemetry scopes; ``done.result`` is its ``NodeResult``."""
    node_id, quiet = done.node_id, graph._quiet

    def outcome() -> Any:
        return done.result and done.result.status

    # A node runner's optional ``node_result`` coroutine is its ``run_node(events="result")`` without a generator.
    result_of = getattr(graph._node_runner, "node_result", None) if quiet else None
    with span_scope(f"execute_node {node_id}", {"ray_harness.node.id": node_id}, outcome=outcome), \
            node_scope(node_id, outcome=outcome):
        if result_of is not None:
            done.result = await result_of(node_id, node_input, invocation_state)
            return
        async for item in graph._node_runner.run_node(node_id, node_input, invocation_state,
                                                      events="result" if quiet else "all"):
            if isinstance(item, NodeResult):
                done.result = item
            elif not quiet:
                running.queue.put_nowait(node_stream_event(node_id, item))


async def _record(graph: Graph, done: _NodeDone, invocation_state: dict[str, Any]
                  ) -> AsyncGenerator[dict[str, Any], None]:
    """Record a node's end in a streamed invocation, with its events (see :func:`_record_quiet`)."""
    node = _recorded(graph, done)
    if _interrupted(done):
        yield _suspend_node(graph, node, done)
        save_state(graph, graph.session_manager)
        return
    if done.cancel_message is not None:
        yield node_cancel_event(node.node_id, done.cancel_message)
    result = _settle(graph, node, done)
    yield node_stop_event(node.node_id, result)
    await _after_node(graph, node, invocation_state)


async def _record_quiet(graph: Graph, done: _NodeDone, invocation_state: dict[str, Any]) -> dict[str, Any] | None:
    """:func:`_record` for a quiet invocation, without a generator: the same steps, and no events but an interrupt.

    The interrupt event is returned; ``run_nodes`` yields it and writes the session after it, as ``_record`` does.
    """
    node = _recorded(graph, done)
    if _interrupted(done):
        return _suspend_node(graph, node, done)
    _settle(graph, node, done)
    await _after_node(graph, node, invocation_state)
    return None


def _recorded(graph: Graph, done: _NodeDone) -> GraphNode:
    graph._owed.pop(done.node_id, None)  # recorded: its AfterNodeCallEvent (none for an interrupt) comes below
    node: GraphNode = graph.nodes[done.node_id]
    return node


def _interrupted(done: _NodeDone) -> bool:
    return bool(done.interrupts) or (done.result is not None and done.result.status == Status.INTERRUPTED)


def _suspend_node(graph: Graph, node: GraphNode, done: _NodeDone) -> dict[str, Any]:
    """Suspend an interrupted node (what it spent counts); returns its interrupt event."""
    if done.result is not None:
        _count_interrupted(graph, node, done.result)
    return _suspend(graph, node, done)


def _settle(graph: Graph, node: GraphNode, done: _NodeDone) -> NodeResult:
    """Store the result of a node that ended without an interrupt; returns it."""
    result = _result_of(graph, node, done)
    _store(graph, node, result, ran=done.result is not None and not done.stopped)
    return result


async def _after_node(graph: Graph, node: GraphNode, invocation_state: dict[str, Any]) -> None:
    if graph.hooks.has_callbacks(AfterNodeCallEvent):
        await graph.hooks.invoke_callbacks_async(AfterNodeCallEvent(source=graph, node_id=node.node_id,
                                                                    invocation_state=invocation_state))
    save_state(graph, graph.session_manager)


def _result_of(graph: Graph, node: GraphNode, done: _NodeDone) -> NodeResult:
    """The result a node that ended without an interrupt is recorded with (a fail-fast failure is noted too)."""
    if done.cancel_message is not None:
        cancelled = RuntimeError(done.cancel_message)
        if graph.failure_policy == "fail_fast":
            graph._fatal = cancelled
        return NodeResult(result=cancelled, status=Status.CANCELLED, execution_count=0)
    if done.result is not None and not done.stopped:
        return done.result
    error = done.error if isinstance(done.error, Exception) else Exception(f"Node '{node.node_id}' was cancelled")
    elapsed = round((time.monotonic() - done.started) * 1000)
    status = Status.CANCELLED if done.stopped else Status.FAILED
    if status == Status.FAILED and graph.failure_policy == "fail_fast":
        graph._fatal = error
    return NodeResult(result=error, execution_time=elapsed, status=status,
                      accumulated_metrics={"latencyMs": elapsed}, execution_count=1)


def _store(graph: Graph, node: GraphNode, result: NodeResult, *, ran: bool) -> None:
    node.execution_status = result.status
    node.result = result
    graph.state.results[node.node_id] = result
    status = result.status
    if status == Status.COMPLETED:
        graph.state.completed_nodes.add(node)
    elif status == Status.FAILED:
        graph.state.failed_nodes.add(node)
    elif status == Status.CANCELLED:
        graph.state.cancelled_nodes.add(node)
    else:
        raise KeyError(status)  # as before: a result recorded here has one of those three statuses
    if ran:
        graph.state.execution_order.append(node)
    add_usage(graph.state.accumulated_usage, result.accumulated_usage)
    add_usage(graph.state.accumulated_metrics, result.accumulated_metrics)
    graph.state.accumulated_cost_usd += result.accumulated_cost_usd
    graph.state.execution_count += result.execution_count
    graph._scheduler.finish(node.node_id)


def _count_interrupted(graph: Graph, node: GraphNode, result: NodeResult) -> None:
    """What a node spent before its interrupt counts (the resumed run's result counts only its own).

    The result is the node's (``graph.nodes[id].result``) but not yet the graph's: as in Strands, ``results``
    holds the nodes that finished.
    """
    node.result = result
    add_usage(graph.state.accumulated_usage, result.accumulated_usage)
    add_usage(graph.state.accumulated_metrics, result.accumulated_metrics)
    graph.state.accumulated_cost_usd += result.accumulated_cost_usd


def _suspend(graph: Graph, node: GraphNode, done: _NodeDone) -> dict[str, Any]:
    from_hook = bool(done.interrupts)
    interrupts = done.interrupts or (done.result.interrupts if done.result is not None else [])
    node.execution_status = Status.INTERRUPTED
    graph.state.interrupted_nodes.add(node)
    graph._scheduler.suspend(node.node_id)
    for item in interrupts:
        graph._interrupt_state.interrupts[item.id] = item
    context: dict[str, Any] = {"from_hook": from_hook, "interrupt_ids": [item.id for item in interrupts]}
    if not from_hook:
        # Stored so that a new process (a new Graph from the session) can resume the node's own interrupt.
        context["node_state"] = graph._node_runner.export_node_state(node.node_id)
    graph._interrupt_state.context[node.node_id] = context
    graph._interrupt_state.activate()
    return node_interrupt_event(node.node_id, interrupts)

