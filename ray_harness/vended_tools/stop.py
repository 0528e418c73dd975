"""``stop``: the model ends the agent loop, with an optional final message.

Strands' ``strands.vended_tools.stop``. The tool calls ``agent.cancel(message=..., after_current_tools=True)``:
the other tools of the same batch still run, then the loop ends with ``stop_reason == "cancelled"`` and the
message as the last assistant message. The tool's result (what the history shows for the call) is the message too.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import DecoratedFunctionTool, tool

__all__ = ("DEFAULT_MAX_MESSAGE_LENGTH", "DEFAULT_STOP_DESCRIPTION", "make_stop", "stop")

DEFAULT_MESSAGE = "Agent loop stopped."
"""The final message of a stop without one (the history never ends with a blank turn)."""
DEFAULT_MAX_MESSAGE_LENGTH = 4096
"""The longest ``message`` accepted: a runaway model must not flood the history in one call."""
DEFAULT_STOP_DESCRIPTION = (
    "Gracefully ends the agent loop when the task is complete. Call this tool once with an optional final "
    "message when no further work is needed. This is a cooperative stop, not an abort: any tools already "
    "requested in this turn still run."
)


def make_stop(*, name: str = "stop", description: str = DEFAULT_STOP_DESCRIPTION,
              max_message_length: int = DEFAULT_MAX_MESSAGE_LENGTH) -> DecoratedFunctionTool:
    """A tool that ends the agent loop after the current tool batch.

    Args:
        name: The tool's name.
        description: What the model reads.
        max_message_length: The longest ``message`` accepted (a positive int).

    Raises:
        ValueError: ``max_message_length`` is not a positive int.
    """
    if isinstance(max_message_length, bool) or not isinstance(max_message_length, int) or max_message_length <= 0:
        raise ValueError(f"max_message_length must be a positive integer, got {max_message_length!r}")

    @tool(name=name, description=description, context=True)
    async def stop_tool(tool_context: ToolContext, message: str | None = None) -> str:
        """Ends the agent loop gracefully. Call once when the task is complete.

        Args:
            message: Optional final message saying why the loop ends.
            tool_context: Injected by the agent (not an input).
        """
        if message is not None and len(message) > max_message_length:
            raise ValueError(f"`message` is {len(message)} characters long; the maximum is {max_message_length}")
        final = message or DEFAULT_MESSAGE
        tool_context.agent.cancel(message=final, after_current_tools=True)
        return final

    return stop_tool


stop = make_stop()
"""The default stop tool."""
