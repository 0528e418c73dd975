"""``AgentTool``: what the agent loop executes, and ``ToolContext``: what a tool may see."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ray_harness.hooks.events import raise_or_respond
from ray_harness.interrupts import interrupt_id

if TYPE_CHECKING:
    from ray_harness.types.content import ToolResult, ToolUse
    from ray_harness.types.tools import ToolSpec

__all__ = ("AgentTool", "ToolContext", "ToolProvider", "ToolStreamEvent", "error_result")


@dataclass
class ToolContext:
    """Injected into tools declared with ``@tool(context=True)``."""

    tool_use: ToolUse
    agent: Any
    invocation_state: dict[str, Any] = field(default_factory=dict)
    cancel_signal: threading.Event = field(default_factory=threading.Event)

    def interrupt(self, name: str, reason: Any = None) -> Any:
        """Pause for a human: raises the first time, returns the response after resume."""
        key = interrupt_id("tool_call", str(self.tool_use["toolUseId"]), name)
        return raise_or_respond(self.agent.interrupt_state, key, name, reason)


class ToolStreamEvent(dict[str, Any]):
    """An intermediate event yielded by a streaming tool: ``{"tool_stream_event": {"tool_use", "data"}}``."""

    def __init__(self, tool_use: ToolUse, data: Any) -> None:
        super().__init__(type="tool_stream", tool_stream_event={"tool_use": tool_use, "data": data})


class AgentTool(ABC):
    """A tool the agent can call."""

    @property
    @abstractmethod
    def tool_name(self) -> str: ...

    @property
    @abstractmethod
    def tool_spec(self) -> ToolSpec: ...

    @property
    def tool_type(self) -> str:
        return "python"

    @abstractmethod
    def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        """Run the tool. Yield stream data, then finally the ``ToolResult`` (wrapped in ``ToolResultEvent``)."""


@runtime_checkable
class ToolProvider(Protocol):
    """A source of tools loaded when the agent first runs (e.g. an MCP client)."""

    async def load_tools(self) -> list[AgentTool]: ...

    def close(self) -> None: ...


def error_result(tool_use_id: str, text: str) -> ToolResult:
    return {"toolUseId": tool_use_id, "status": "error", "content": [{"text": text}]}
