"""The ``stream`` of a user's ``AgentTool`` subclass, run as Strands runs a custom tool's.

Strands calls ``stream(tool_use, invocation_state, **kwargs)`` and takes any value a tool yields that is
not one of its typed events as a stream event, the last one also as the tool's result. A subclass written
that way for Strands runs unchanged here: its ``stream`` gets the invocation state (with the calling agent
under ``agent``, as Strands' holds it) instead of the ``ToolContext``, and its plain yields are converted.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any

from ray_harness.middleware.types import ToolResultEvent
from ray_harness.tools.base import ToolStreamEvent, error_result
from ray_harness.tools.decorator import to_tool_result

if TYPE_CHECKING:
    from ray_harness.tools.base import AgentTool, ToolContext
    from ray_harness.types.content import ToolUse

__all__ = ("as_strands_runs_it",)

_NOTHING = object()


def as_strands_runs_it(stream: Callable[..., Any]) -> Callable[..., AsyncGenerator[Any, None]]:
    """``stream`` (a user's ``AgentTool.stream``) taking ``(tool_use, context)`` and yielding typed events."""
    wants_state = _takes_invocation_state(stream)

    @functools.wraps(stream)
    async def adapted(self: AgentTool, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        given: Any = {**context.invocation_state, "agent": context.agent} if wants_state else context
        events = stream(self, tool_use, given)
        last: Any = _NOTHING
        try:
            async for event in events:
                if isinstance(event, ToolResultEvent):
                    yield event
                    return
                yield event if isinstance(event, ToolStreamEvent) else ToolStreamEvent(tool_use, event)
                last = event
        finally:
            with contextlib.suppress(AttributeError):
                await events.aclose()  # the user's generator's `finally` runs now, not at garbage collection
        if last is _NOTHING:
            yield ToolResultEvent(error_result(tool_use["toolUseId"],
                                               f"Tool '{tool_use['name']}' did not return a result"))
            return
        data = last["tool_stream_event"]["data"] if isinstance(last, ToolStreamEvent) else last
        yield ToolResultEvent(to_tool_result(tool_use["toolUseId"], data))

    adapted.__ray_harness_adapted__ = True  # type: ignore[attr-defined]
    return adapted


def _takes_invocation_state(stream: Callable[..., Any]) -> bool:
    """Whether ``stream`` is declared as Strands' ``stream(self, tool_use, invocation_state, **kwargs)``."""
    try:
        parameters = list(inspect.signature(stream).parameters)
    except (TypeError, ValueError):
        return False
    return len(parameters) > 2 and parameters[2] == "invocation_state"
