"""The swarm's ``handoff_to_agent`` tool, its detection in a member's events, and the member prompt text.

The tool itself only validates and answers; the swarm learns about a handoff
from the member's ``tool_start``/``tool_result`` stream events. Nothing is
written into the swarm from inside the tool, so the same tool works when the
member runs in a Ray actor (only its events come back).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ray_harness.tools.decorator import DecoratedFunctionTool, tool

__all__ = ("HANDOFF_TOOL_NAME", "Handoff", "HandoffTracker", "build_swarm_node_text", "make_handoff_tool")

HANDOFF_TOOL_NAME = "handoff_to_agent"


# The spec Strands' decorator gives this tool, word for word: the model sees the same tool in both SDKs.
HANDOFF_TOOL_DESCRIPTION = ("Transfer control to another agent in the swarm for specialized help.\n\n"
                            "Returns:\n    Confirmation of handoff initiation")
HANDOFF_INPUT_SCHEMA: dict[str, Any] = {
    "properties": {
        "agent_name": {"description": "Name of the agent to hand off to", "type": "string"},
        "message": {"description": "Message explaining what needs to be done and why you're handing off",
                    "type": "string"},
        "context": {"default": None, "description": "Additional context to share with the next agent",
                    "type": "object"},
    },
    "required": ["agent_name", "message"],
    "type": "object",
}


def make_handoff_tool(member_names: list[str]) -> DecoratedFunctionTool:
    names = list(member_names)

    @tool(name=HANDOFF_TOOL_NAME, description=HANDOFF_TOOL_DESCRIPTION, inputSchema=HANDOFF_INPUT_SCHEMA)
    def handoff_to_agent(agent_name: str, message: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
        """Transfer control to another agent in the swarm for specialized help.

        Args:
            agent_name: Name of the agent to hand off to
            message: Message explaining what needs to be done and why you're handing off
            context: Additional context to share with the next agent
        """
        if agent_name not in names:
            return {"status": "error", "content": [{"text": f"Error: Agent '{agent_name}' not found in swarm"}]}
        problem = context_problem(context or {})
        if problem is not None:
            # Refused here, so the model can retry: the swarm only acts on successful handoffs.
            return {"status": "error", "content": [{"text": f"Error in handoff: {problem}"}]}
        return {"status": "success", "content": [{"text": f"Handing off to {agent_name}: {message}"}]}

    return handoff_to_agent


def context_problem(context: dict[str, Any]) -> str | None:
    """Why ``context`` cannot join the shared context (Strands' texts), or None when it can."""
    for key, value in context.items():
        if not isinstance(key, str):
            return "Key must be a string"
        if not key.strip():
            return "Key cannot be empty"
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            return (f"Value is not JSON serializable: {type(value).__name__}. Only JSON-compatible types "
                    "(str, int, float, bool, list, dict, None) are allowed.")
    return None


@dataclass
class Handoff:
    target: str
    message: str
    context: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON for the swarm's interrupt state (a member interrupted after handing off)."""
        return {"target": self.target, "message": self.message, "context": dict(self.context)}

    @classmethod
    def from_dict(cls, data: Any) -> Handoff | None:
        """The handoff :meth:`to_dict` wrote, or None when there is none (or it is not a handoff)."""
        if not isinstance(data, dict) or not isinstance(data.get("target"), str):
            return None
        context = data.get("context")
        return cls(data["target"], str(data.get("message") or ""), dict(context) if isinstance(context, dict) else {})


class HandoffTracker:
    """Follows a member's stream events; :attr:`handoff` is the last successful handoff call."""

    def __init__(self) -> None:
        self._calls: dict[str, dict[str, Any]] = {}
        self.handoff: Handoff | None = None

    def observe(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "tool_start":
            use = event.get("tool_use") or {}
            if use.get("name") == HANDOFF_TOOL_NAME and isinstance(use.get("input"), dict):
                self._calls[str(use.get("toolUseId"))] = use["input"]
        elif kind == "tool_result":
            result = event.get("tool_result") or {}
            call = self._calls.pop(str(result.get("toolUseId")), None)
            if call is not None and result.get("status") == "success":
                context = call.get("context")
                self.handoff = Handoff(str(call.get("agent_name")), str(call.get("message", "")),
                                       dict(context) if isinstance(context, dict) else {})


def build_swarm_node_text(*, node_id: str, task: Any, handoff_message: str | None, history: list[str],
                          shared_context: dict[str, dict[str, Any]], members: dict[str, str | None]) -> str:
    """The context a member receives (the Strands text, section by section)."""
    text = ""
    if handoff_message:
        text += f"Handoff Message: {handoff_message}\n\n"
    if isinstance(task, str):
        text += f"User Request: {task}\n\n"
    elif isinstance(task, list):
        text += "User Request: Multi-modal task\n\n"
    if history:
        text += f"Previous agents who worked on this: {' → '.join(history)}\n\n"
    if shared_context:
        text += "Shared knowledge from previous agents:\n"
        for name, knowledge in shared_context.items():
            if knowledge:
                text += f"• {name}: {knowledge}\n"
        text += "\n"
    others = [name for name in members if name != node_id]
    if others:
        text += "Other agents available for collaboration:\n"
        for name in others:
            text += f"Agent name: {name}."
            if members[name]:
                text += f" Agent description: {members[name]}"
            text += "\n"
        text += "\n"
    text += ("You have access to swarm coordination tools if you need help from other agents. "
             "If you don't hand off to another agent, the swarm will consider the task complete.")
    return text
