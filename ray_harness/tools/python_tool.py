"""``PythonAgentTool``: a tool made of a spec and a function taking the tool use (Strands' module tools)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable
from typing import Any

from typing_extensions import override

from ray_harness.middleware.types import ToolResultEvent
from ray_harness.tools._spec import checked_name, checked_spec
from ray_harness.tools._threads import run_in_tool_thread
from ray_harness.tools.base import HeldSpecTool, ToolContext
from ray_harness.tools.decorator import to_tool_result
from ray_harness.types.content import ToolUse
from ray_harness.types.tools import ToolSpec

__all__ = ("PythonAgentTool",)


class PythonAgentTool(HeldSpecTool):
    """A tool from a hand-written spec and a function, as Strands' ``PythonAgentTool``.

    ``tool_func(tool_use, **invocation_state)`` gets the whole tool use (its ``input`` unvalidated) and the
    invocation state with the calling agent under ``agent``; it returns a ``ToolResult`` (any other value is
    converted as a ``@tool``'s return value is). A sync function runs in a worker thread. A Strands module
    tool (a module with ``TOOL_SPEC`` and a function of the same name) becomes
    ``PythonAgentTool(module.TOOL_SPEC["name"], module.TOOL_SPEC, getattr(module, module.TOOL_SPEC["name"]))``.

    Raises:
        ValueError: An invalid name, a spec naming another tool or missing ``description`` / ``inputSchema``,
            or a function that is not callable.
    """

    _hot_reload = True  # as in Strands: a new version may replace the tool (ToolRegistry.register_tool)

    def __init__(self, tool_name: str, tool_spec: ToolSpec, tool_func: Callable[..., Any]) -> None:
        self._name = checked_name(tool_name)
        self._spec = checked_spec(tool_spec, self._name)
        if not callable(tool_func):
            raise ValueError(f"tool {tool_name!r}: tool_func must be callable, got {type(tool_func).__name__}")
        self._func = tool_func

    def __repr__(self) -> str:
        return f"<PythonAgentTool {self._name}>"

    @override
    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        state = {**context.invocation_state, "agent": context.agent}
        if inspect.iscoroutinefunction(self._func):
            result = await self._func(tool_use, **state)
        else:
            result = await run_in_tool_thread(functools.partial(self._func, tool_use), **state)
        yield ToolResultEvent(to_tool_result(tool_use["toolUseId"], result))
