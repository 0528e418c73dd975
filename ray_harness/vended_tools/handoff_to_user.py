"""``handoff_to_user``: the model asks the human a question and waits for the answer.

Strands' ``strands.vended_tools.handoff_to_user``, on ray_harness's interrupts: the first call raises an
interrupt named :data:`HANDOFF_INTERRUPT_NAME` whose ``reason`` is the model's message, so the invocation ends
with ``stop_reason == "interrupt"``; the caller answers with an ``interruptResponse`` block and the answer is the
tool's result. The interrupt name stays the same when the tool is renamed, so callers can match on it.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

from typing import Any

from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import DecoratedFunctionTool, tool

__all__ = ("DEFAULT_HANDOFF_TO_USER_DESCRIPTION", "HANDOFF_INTERRUPT_NAME", "handoff_to_user", "make_handoff_to_user")

HANDOFF_INTERRUPT_NAME = "strands:handoff-to-user"
"""``Interrupt.name`` of every handoff (Strands' value: one program's interrupts keep their names)."""
DEFAULT_HANDOFF_TO_USER_DESCRIPTION = (
    "Ask the user a question and wait for their answer. Use it only when you cannot proceed without "
    "confirmation, approval, or information that only the user has. Do not call it to deliver a final answer or "
    "to report progress. The user's reply is returned as the tool result."
)


def make_handoff_to_user(*, name: str = "handoff_to_user",
                         description: str = DEFAULT_HANDOFF_TO_USER_DESCRIPTION) -> DecoratedFunctionTool:
    """A tool that pauses the agent with the model's message and returns the human's answer on resume.

    Args:
        name: The tool's name (the interrupt's name stays ``HANDOFF_INTERRUPT_NAME``).
        description: What the model reads.
    """

    @tool(name=name, description=description, context=True)
    async def handoff_to_user_tool(tool_context: ToolContext, message: str) -> Any:
        """Pause the agent loop and surface a message to the user.

        Args:
            message: The message to surface to the user.
            tool_context: Injected by the agent (not an input).
        """
        if not message.strip():
            raise ValueError("`message` must not be empty")
        return tool_context.interrupt(HANDOFF_INTERRUPT_NAME, reason=message)

    return handoff_to_user_tool


handoff_to_user = make_handoff_to_user()
"""The default handoff tool."""
