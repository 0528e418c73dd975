"""One admitted tool call, run in the background: the ``ExecuteToolStage`` middleware, the tool, ``AfterToolCallEvent``.

``BeforeToolCallEvent`` ran when the call was admitted (in the invocation); the dispatch acknowledgement the model
got had no ``AfterToolCallEvent``: this one, with the tool's real result, is the call's (as in Strands, where a
hook's ``retry`` runs the tool again unless the task was cancelled). The tool's stream events go to the agent's
``callback_handler``; interrupts cannot be answered from the background, so a tool that raises one fails.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from ray_harness.hooks.events import AfterToolCallEvent
from ray_harness.interrupts import InterruptException
from ray_harness.middleware.types import ExecuteToolContext, ExecuteToolStage, ToolResultEvent
from ray_harness.tools.base import ToolContext, error_result
from ray_harness.types.content import ToolResult, ToolUse
from ray_harness.types.exceptions import RayHarnessError
from ray_harness.types.validation import copy_json

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.tools.base import AgentTool

__all__ = ("BackgroundInterruptError", "execute_in_background")


class BackgroundInterruptError(RayHarnessError, RuntimeError):
    """A background tool (or middleware around it) asked for human input, which only a foreground call can get."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Interrupt '{name}' raised in the background: background tasks cannot request input")
        self.name = name

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name,))


class _BackgroundToolContext(ToolContext):
    """A tool's context in the background: ``interrupt()`` fails the task instead of pausing the agent."""

    def interrupt(self, name: str, reason: Any = None) -> Any:
        """Raise :class:`BackgroundInterruptError`: nobody can answer an interrupt from the background."""
        raise BackgroundInterruptError(name)


async def execute_in_background(agent: Agent, tool: AgentTool, call: ToolUse, invocation_state: dict[str, Any],
                                signal: threading.Event) -> ToolResult:
    """Run ``call`` with ``tool`` and return the result as ``AfterToolCallEvent`` hooks leave it.

    Raises:
        BackgroundInterruptError: The tool or a middleware raised an interrupt.
    """
    while True:
        started = time.perf_counter()
        result, exception = await _run_chain(agent, tool, call, invocation_state, signal)
        if not agent.hooks.has_callbacks(AfterToolCallEvent):
            return result
        after, _ = await agent.hooks.invoke_callbacks_async(
            AfterToolCallEvent(agent=agent, selected_tool=tool, tool_use=call, result=result,
                               invocation_state=invocation_state, exception=exception,
                               duration=time.perf_counter() - started)
        )
        if after.retry and not signal.is_set():
            continue
        return _normalize(call["toolUseId"], after.result)


async def _run_chain(agent: Agent, tool: AgentTool, call: ToolUse, invocation_state: dict[str, Any],
                     signal: threading.Event) -> tuple[ToolResult, BaseException | None]:
    """The tool through the agent's ``ExecuteToolStage`` middleware: its result and the exception behind it."""
    use_id = call["toolUseId"]

    async def terminal(ctx: ExecuteToolContext) -> AsyncGenerator[Any, None]:
        if ctx.tool is None:
            yield ToolResultEvent(error_result(ctx.tool_use["toolUseId"], f"Unknown tool: {ctx.tool_use['name']}"))
            return
        context = _BackgroundToolContext(tool_use=ctx.tool_use, agent=agent, invocation_state=ctx.invocation_state,
                                         cancel_signal=ctx.cancel_signal)
        stream = ctx.tool.stream(ctx.tool_use, context)
        try:
            async for event in stream:
                yield event
        finally:
            close = getattr(stream, "aclose", None)  # a custom AgentTool's stream may be any async iterator
            if close is not None:
                await close()

    ctx = ExecuteToolContext(agent=agent, tool=tool, tool_use=copy_json(call), invocation_state=invocation_state,
                             cancel_signal=signal)
    chain = agent._middleware.compose(ExecuteToolStage, terminal)(ctx)
    outcome: ToolResultEvent | None = None
    handler = agent.callback_handler
    try:
        async for event in chain:
            if isinstance(event, ToolResultEvent):
                outcome = event
            elif handler is not None and isinstance(event, dict):
                handler(**event)
    except BackgroundInterruptError:
        raise
    except InterruptException as signal_raised:  # a middleware's (or a sub-agent's) interrupt
        raise BackgroundInterruptError(signal_raised.interrupt.name) from None
    except Exception as error:
        return error_result(use_id, f"Error: {error}"), error
    finally:
        await chain.aclose()
    if outcome is None:
        return error_result(use_id, "Error: the ExecuteToolStage middleware chain yielded no tool result"), None
    return _normalize(use_id, outcome.tool_result), outcome.exception


def _normalize(use_id: str, result: Any) -> ToolResult:
    """A well-formed result for ``use_id`` (a hook may hand back anything)."""
    if not isinstance(result, dict) or "content" not in result:
        return error_result(use_id, f"Error: invalid tool result {result!r}")
    status = result.get("status", "success")
    return {"toolUseId": use_id, "status": status if status in ("success", "error") else "error",
            "content": list(result["content"])}
