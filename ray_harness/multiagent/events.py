"""Stream events of graphs and swarms: plain dicts with a ``"type"`` key and the Strands keys."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray_harness.interrupts import Interrupt
    from ray_harness.multiagent.base import MultiAgentResult, NodeResult

__all__ = (
    "handoff_event",
    "node_cancel_event",
    "node_interrupt_event",
    "node_start_event",
    "node_stop_event",
    "node_stream_event",
    "result_event",
)


def node_start_event(node_id: str, node_type: str) -> dict[str, Any]:
    """The event a node yields when it starts; ``node_type`` is ``"agent"`` or ``"multiagent"``."""
    return {"type": "multiagent_node_start", "node_id": node_id, "node_type": node_type}


def node_stream_event(node_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """Wrap an event of node ``node_id``'s own stream."""
    # The node's own event is nested so its keys cannot collide with ours.
    return {"type": "multiagent_node_stream", "node_id": node_id, "event": event}


def node_stop_event(node_id: str, node_result: NodeResult) -> dict[str, Any]:
    """The event a node yields when it finishes, with its ``NodeResult``."""
    return {"type": "multiagent_node_stop", "node_id": node_id, "node_result": node_result}


def handoff_event(from_node_ids: list[str], to_node_ids: list[str], message: str | None = None) -> dict[str, Any]:
    """The event a swarm yields when control passes from ``from_node_ids`` to ``to_node_ids``."""
    event: dict[str, Any] = {"type": "multiagent_handoff", "from_node_ids": from_node_ids, "to_node_ids": to_node_ids}
    if message is not None:
        event["message"] = message
    return event


def node_cancel_event(node_id: str, message: str) -> dict[str, Any]:
    """The event a node yields when it is cancelled, with the cancel message."""
    return {"type": "multiagent_node_cancel", "node_id": node_id, "message": message}


def node_interrupt_event(node_id: str, interrupts: list[Interrupt]) -> dict[str, Any]:
    """The event a node yields when its agent raises interrupts for a human."""
    return {"type": "multiagent_node_interrupt", "node_id": node_id, "interrupts": interrupts}


def result_event(result: MultiAgentResult) -> dict[str, Any]:
    """The last event of a multi-agent stream: the ``MultiAgentResult``."""
    return {"type": "multiagent_result", "result": result}
