"""``sleep``: pause for a bounded number of seconds; the agent's cancel ends the pause at once.

Strands' ``strands.vended_tools.sleep``. ray_harness does not cancel a running tool's task on ``agent.cancel()``
(a tool sees the cancel through ``tool_context.cancel_signal``), so the pause is awaited against that signal: a
cancelled sleep returns an error result ("Error: sleep cancelled") right away instead of running out its time.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

import asyncio
import math
from typing import Annotated

from pydantic import Field, Strict

from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.types.exceptions import RayHarnessError
from ray_harness.vended_tools._cancel import unless_cancelled

__all__ = ("DEFAULT_MAX_DURATION", "SleepCancelledError", "make_sleep", "sleep", "sleep_description")

DEFAULT_MAX_DURATION = 60.0
"""The longest pause (seconds) the default ``sleep`` tool accepts."""


class SleepCancelledError(RayHarnessError, RuntimeError):
    """The agent was cancelled during the pause (the model reads "Error: sleep cancelled")."""


def sleep_description(max_duration: float) -> str:
    """The description the model reads, naming the cap."""
    return (f"Pauses execution for a specified number of seconds (max {max_duration}). Cooperative and "
            "cancellable: the sleep aborts immediately when the agent invocation is cancelled. Rejects negative, "
            f"NaN, infinite, or non-numeric durations, and durations above {max_duration}.")


def make_sleep(*, max_duration: float = DEFAULT_MAX_DURATION, name: str = "sleep",
               description: str | None = None) -> DecoratedFunctionTool:
    """A sleep tool whose ``duration`` may be at most ``max_duration`` seconds.

    Args:
        max_duration: The cap, a positive finite number of seconds (default 60).
        name: The tool's name.
        description: What the model reads (default: ``sleep_description(max_duration)``).

    Raises:
        ValueError: ``max_duration`` is not a positive finite number.
    """
    if isinstance(max_duration, bool) or not isinstance(max_duration, int | float):
        raise ValueError(f"max_duration must be a number, got {type(max_duration).__name__}")
    if not math.isfinite(max_duration) or max_duration <= 0:
        raise ValueError(f"max_duration must be positive and finite, got {max_duration!r}")
    cap = float(max_duration)

    # Strict: a string or a bool is no duration (pydantic would read "5" and True as numbers).
    @tool(name=name, description=description or sleep_description(cap), context=True)
    async def sleep_tool(duration: Annotated[float, Strict(), Field(ge=0, le=cap, allow_inf_nan=False)],
                         tool_context: ToolContext) -> str:
        """Pauses execution for the given number of seconds.

        Args:
            duration: Seconds to pause: a finite number from 0 to the tool's maximum.
            tool_context: Injected by the agent (not an input).
        """
        await unless_cancelled(asyncio.sleep(duration), tool_context.cancel_signal,
                               SleepCancelledError("sleep cancelled"))
        return f"Slept for {duration:g} seconds"

    return sleep_tool


sleep = make_sleep()
"""The default sleep tool: at most 60 seconds."""
