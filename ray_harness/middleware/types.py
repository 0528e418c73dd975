"""Middleware stage tokens, contexts and result events.

A stage token (``InvokeModelStage``, ``ExecuteToolStage``) names a point the
loop wraps. ``stage`` itself registers a Wrap handler (an async generator
``(ctx, next_fn)``); ``stage.Input`` registers ``ctx -> ctx`` and
``stage.Output`` registers ``result -> result``. The result of a chain is its
last result event (``ModelStopReason`` / ``ToolResultEvent``).
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ray_harness.interrupts import Interrupt, InterruptException, InterruptState, interrupt_id
from ray_harness.types.exceptions import RayHarnessError

if TYPE_CHECKING:
    from ray_harness.tools.registry import AgentTool
    from ray_harness.types.content import Message, SystemPrompt, ToolResult, ToolUse
    from ray_harness.types.tools import ToolSpec

__all__ = (
    "ExecuteToolContext",
    "ExecuteToolResult",
    "ExecuteToolStage",
    "InvokeModelContext",
    "InvokeModelResult",
    "InvokeModelStage",
    "MiddlewareError",
    "MiddlewareInterruptResult",
    "MiddlewareStage",
    "ModelStopReason",
    "ToolResultEvent",
)


class MiddlewareError(RayHarnessError, RuntimeError):
    """A stage's middleware chain ended without its result event (a Wrap handler neither forwarded nor answered).

    A ``RuntimeError`` too, as Strands raises one: in the model stage it reaches ``AfterModelCallEvent.exception``
    (a hook may retry) and then the caller; in the tool stage it becomes the tool's error result.
    """

    @classmethod
    def no_result(cls, stage: MiddlewareStage) -> MiddlewareError:
        """The error for ``stage``'s chain yielding no result event (Strands' text)."""
        event = stage.result_event.__name__
        return cls(
            f"{stage.name} middleware chain did not yield a {event}. A Wrap handler must forward the "
            f"events from next_fn(context), or yield its own {event} to short-circuit."
        )


class _Phase:
    def __init__(self, stage: MiddlewareStage, phase: str) -> None:
        self.stage = stage
        self.phase = phase

    def __repr__(self) -> str:
        return f"{self.stage.name}.{self.phase.capitalize()}"


class MiddlewareStage:
    """A point of the loop that middleware can wrap."""

    def __init__(self, name: str, result_event: type, result_type: type) -> None:
        self.name = name
        self.result_event = result_event
        self.result_type = result_type
        self.Input = _Phase(self, "input")
        self.Output = _Phase(self, "output")
        self.Wrap = _Phase(self, "wrap")

    def __repr__(self) -> str:
        return self.name


@dataclass
class ModelStopReason:
    """The result event of the model stage (the last event of its stream)."""

    stop_reason: str
    message: Message
    usage: dict[str, int] = field(default_factory=lambda: {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0})
    metrics: dict[str, int] = field(default_factory=lambda: {"latencyMs": 0})


class ToolResultEvent(dict[str, Any]):
    """The result event of the tool stage: a mapping with key ``"tool_result"``."""

    def __init__(self, tool_result: ToolResult, exception: BaseException | None = None) -> None:
        super().__init__(tool_result=tool_result)
        self.exception = exception

    @property
    def tool_result(self) -> ToolResult:
        """The ``toolResult`` block."""
        return self["tool_result"]  # type: ignore[no-any-return]


@dataclass
class InvokeModelResult:
    """What a model-stage Output handler receives and returns.

    Attributes:
        result: The model call's ``ModelStopReason``.
    """

    result: ModelStopReason


@dataclass
class ExecuteToolResult:
    """What a tool-stage Output handler receives and returns.

    Attributes:
        result: The tool call's ``ToolResultEvent``.
    """

    result: ToolResultEvent


@dataclass
class MiddlewareInterruptResult:
    """The answer to ``ExecuteToolContext.interrupt`` after resume.

    Attributes:
        response: The human's response.
    """

    response: Any


@dataclass
class InvokeModelContext:
    """Inputs of one model call. Messages, prompt and specs are copies: changing them cannot corrupt the agent."""

    agent: Any
    messages: list[Message]
    system_prompt: SystemPrompt | None
    tool_specs: list[ToolSpec]
    tool_choice: dict[str, Any] | None
    invocation_state: dict[str, Any]

    def replace(self, **changes: Any) -> InvokeModelContext:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)


@dataclass
class ExecuteToolContext:
    """Inputs of one tool call. ``tool_use`` is a copy; history keeps the model's original input."""

    agent: Any
    tool: AgentTool | None
    tool_use: ToolUse
    invocation_state: dict[str, Any]
    cancel_signal: threading.Event

    def replace(self, **changes: Any) -> ExecuteToolContext:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def interrupt(self, name: str, reason: Any = None) -> MiddlewareInterruptResult:
        """Pause for a human; on resume returns the response (as ``.response``)."""
        state: InterruptState = self.agent.interrupt_state
        key = interrupt_id("middleware_execute_tool", str(self.tool_use["toolUseId"]), name)
        known = state.interrupts.get(key)
        if known is not None and known.response is not None:
            return MiddlewareInterruptResult(response=known.response)
        raise InterruptException(Interrupt(id=key, name=name, reason=reason))


def copy_model_context(ctx: InvokeModelContext) -> InvokeModelContext:
    """A context whose messages, tool specs and tool choice are deep copies of ``ctx``'s."""
    return InvokeModelContext(
        agent=ctx.agent,
        messages=copy.deepcopy(ctx.messages),
        system_prompt=ctx.system_prompt,
        tool_specs=copy.deepcopy(ctx.tool_specs),
        tool_choice=copy.deepcopy(ctx.tool_choice),
        invocation_state=ctx.invocation_state,
    )


InvokeModelStage = MiddlewareStage("InvokeModelStage", ModelStopReason, InvokeModelResult)
ExecuteToolStage = MiddlewareStage("ExecuteToolStage", ToolResultEvent, ExecuteToolResult)
