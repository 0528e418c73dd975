"""Multi-agent state in a session: any object with ``write_multi_agent_json(dict)`` / ``read_multi_agent_json()``.

Stores that take a ``multi_agent_id`` keyword (``ray_harness.session`` managers) get the
orchestrator's id, so several graphs and swarms can share one session. What a Graph or a Swarm
writes there (:func:`graph_snapshot`, :func:`swarm_snapshot`) is JSON; restoring it
(:func:`restore_graph`, :func:`restore_swarm`) resumes an interrupted or unfinished run and
resets a finished one.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ray_harness.interrupts import InterruptState
from ray_harness.multiagent.base import NodeResult, Status, zero_usage
from ray_harness.multiagent.graph_model import GraphNode, GraphState
from ray_harness.multiagent.swarm_model import SharedContext, SwarmState

if TYPE_CHECKING:
    from ray_harness.multiagent.graph import Graph
    from ray_harness.multiagent.swarm import Swarm

__all__ = (
    "MultiAgentSessionStore",
    "graph_snapshot",
    "load_state",
    "restore_graph",
    "restore_swarm",
    "save_state",
    "swarm_snapshot",
    "write_state",
)

_TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)


@runtime_checkable
class MultiAgentSessionStore(Protocol):
    def write_multi_agent_json(self, data: dict[str, Any]) -> None: ...

    def read_multi_agent_json(self) -> dict[str, Any] | None: ...


def _id_kwargs(method: Any, orchestrator: Any) -> dict[str, Any]:
    try:
        accepts = "multi_agent_id" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        accepts = False
    return {"multi_agent_id": orchestrator.id} if accepts else {}


def write_state(orchestrator: Any, store: Any, data: dict[str, Any]) -> None:
    """Write ``data`` (the orchestrator's snapshot) with ``store``, when there is one."""
    if store is not None:
        method = store.write_multi_agent_json
        method(data, **_id_kwargs(method, orchestrator))


def save_state(orchestrator: Any, store: Any) -> None:
    if store is not None:
        write_state(orchestrator, store, orchestrator.serialize_state())


def load_state(orchestrator: Any, store: Any) -> None:
    """Restore what the store holds (nothing happens for an empty store)."""
    method = store.read_multi_agent_json
    data = method(**_id_kwargs(method, orchestrator))
    if data:
        orchestrator.deserialize_state(data)


# -- what a Graph and a Swarm store ---------------------------------------------------------------------------


def graph_snapshot(graph: Graph) -> dict[str, Any]:
    """The graph's state as JSON: status, task, nodes by outcome, execution order, results, scheduler."""
    def ids(nodes: set[GraphNode]) -> list[str]:
        return sorted(node.node_id for node in nodes)

    return {
        "type": "graph",
        "id": graph.id,
        "status": graph.state.status.value,
        "task": graph.state.task,
        "completed_nodes": ids(graph.state.completed_nodes),
        "failed_nodes": ids(graph.state.failed_nodes),
        "interrupted_nodes": ids(graph.state.interrupted_nodes),
        "cancelled_nodes": ids(graph.state.cancelled_nodes),
        "execution_order": [node.node_id for node in graph.state.execution_order],
        **_totals(graph.state),
        "execution_count": graph.state.execution_count,
        "execution_time": graph.state.execution_time,
        "launched": graph.state.launched,
        "scheduler": graph._scheduler.to_dict(),
        "inputs": dict(graph._inputs),
        "interrupt_state": graph._interrupt_state.to_dict(),
    }


def restore_graph(graph: Graph, payload: dict[str, Any]) -> None:
    """Restore a :func:`graph_snapshot`: a finished run resets the graph; an interrupted or unfinished one resumes."""
    status = _status(payload, "graph")
    if status in _TERMINAL or status == Status.PENDING:
        graph.state = GraphState()
        graph._scheduler = graph._new_scheduler()
        graph._interrupt_state = InterruptState()
        graph._resume_pending = False
        return
    state = GraphState(task=payload.get("task", ""), status=status, total_nodes=len(graph.nodes),
                       edges=[(edge.from_node, edge.to_node) for edge in graph.edges],
                       entry_points=list(graph.entry_points))

    def nodes(key: str) -> set[GraphNode]:
        return {graph.nodes[node_id] for node_id in payload.get(key) or [] if node_id in graph.nodes}

    state.completed_nodes, state.failed_nodes = nodes("completed_nodes"), nodes("failed_nodes")
    state.interrupted_nodes, state.cancelled_nodes = nodes("interrupted_nodes"), nodes("cancelled_nodes")
    state.execution_order = [graph.nodes[n] for n in payload.get("execution_order") or [] if n in graph.nodes]
    state.results = _results(payload, graph.nodes)
    state.accumulated_usage, state.accumulated_metrics, state.accumulated_cost_usd = _restored_totals(payload)
    state.execution_count = int(payload.get("execution_count") or 0)
    state.execution_time = int(payload.get("execution_time") or 0)
    state.launched = int(payload.get("launched") or 0)
    graph.state = state
    for node in graph.nodes.values():
        result = state.results.get(node.node_id)
        node.execution_status = Status.INTERRUPTED if node in state.interrupted_nodes else (
            result.status if result is not None else Status.PENDING)
        node.result = result
    graph._scheduler = graph._new_scheduler()
    graph._scheduler.load(payload.get("scheduler") or {})
    graph._inputs = {key: list(value) for key, value in (payload.get("inputs") or {}).items()}
    _restore_interrupts(graph, payload)
    graph._resume_pending = status == Status.EXECUTING


def swarm_snapshot(swarm: Swarm) -> dict[str, Any]:
    """The swarm's state as JSON (status, task, current member, handoff message, context, history, results)."""
    current = swarm.state.current_node
    return {
        "type": "swarm",
        "id": swarm.id,
        "status": swarm.state.completion_status.value,
        "task": swarm.state.task,
        "current_node": current.node_id if current is not None else None,
        "handoff_message": swarm.state.handoff_message,
        "shared_context": swarm.shared_context.context,
        "node_history": [node.node_id for node in swarm.state.node_history],
        **_totals(swarm.state),
        "execution_time": swarm.state.execution_time,
        "interrupt_state": swarm._interrupt_state.to_dict(),
    }


def restore_swarm(swarm: Swarm, payload: dict[str, Any]) -> None:
    """Restore a :func:`swarm_snapshot`: an interrupted or unfinished run resumes, a finished one starts over."""
    status = _status(payload, "swarm")
    current = payload.get("current_node")
    if status not in (Status.INTERRUPTED, Status.EXECUTING) or not isinstance(current, str) or current not in swarm.nodes:
        swarm.state = SwarmState()
        swarm.shared_context = SharedContext()
        swarm._interrupt_state = InterruptState()
        swarm._resume_pending = False
        return
    swarm.shared_context = SharedContext({key: dict(value) for key, value in
                                          (payload.get("shared_context") or {}).items() if key in swarm.nodes})
    swarm.state = SwarmState(
        current_node=swarm.nodes[current], task=payload.get("task", ""), completion_status=status,
        shared_context=swarm.shared_context,
        node_history=[swarm.nodes[n] for n in payload.get("node_history") or [] if n in swarm.nodes],
        results=_results(payload, swarm.nodes),
        execution_time=int(payload.get("execution_time") or 0),
        handoff_message=payload.get("handoff_message"),
    )
    swarm.state.accumulated_usage, swarm.state.accumulated_metrics, swarm.state.accumulated_cost_usd = \
        _restored_totals(payload)
    _restore_interrupts(swarm, payload)
    swarm._resume_pending = status == Status.EXECUTING


def _totals(state: GraphState | SwarmState) -> dict[str, Any]:
    """What a Graph and a Swarm both store of a run: its node results and what they added up to."""
    return {
        "node_results": {key: value.to_dict() for key, value in state.results.items()},
        "accumulated_usage": dict(state.accumulated_usage),
        "accumulated_metrics": dict(state.accumulated_metrics),
        "accumulated_cost_usd": state.accumulated_cost_usd,
    }


def _restored_totals(payload: dict[str, Any]) -> tuple[Any, Any, float]:
    """Usage, metrics and cost of a stored run (the counters a snapshot lacks start at zero)."""
    return ({**zero_usage(), **(payload.get("accumulated_usage") or {})},
            {"latencyMs": 0, **(payload.get("accumulated_metrics") or {})},
            float(payload.get("accumulated_cost_usd") or 0.0))


def _status(payload: Any, kind: str) -> Status:
    """The snapshot's status. Raises ValueError naming the field: not a ``kind`` snapshot, or an unknown status."""
    if not isinstance(payload, dict) or payload.get("type") != kind:
        raise ValueError(f"{kind} state field 'type' must be '{kind}'")
    try:
        return Status(payload.get("status", "pending"))
    except ValueError:
        raise ValueError(f"{kind} state field 'status' is invalid: {payload.get('status')!r}") from None


def _results(payload: dict[str, Any], nodes: Mapping[str, Any]) -> dict[str, NodeResult]:
    return {key: NodeResult.from_dict(value) for key, value in (payload.get("node_results") or {}).items()
            if key in nodes}


def _restore_interrupts(orchestrator: Graph | Swarm, payload: dict[str, Any]) -> None:
    """The snapshot's interrupt state; each node suspended in its own interrupt gets its node state back."""
    orchestrator._interrupt_state = InterruptState.from_dict(payload.get("interrupt_state") or {})
    for node_id, context in orchestrator._interrupt_state.context.items():
        if node_id in orchestrator.nodes and isinstance(context, dict) and "node_state" in context:
            orchestrator._node_runner.import_node_state(node_id, context["node_state"])
