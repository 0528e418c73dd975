"""``AgentTool``: what the agent loop executes, and ``ToolContext``: what a tool may see."""

from __future__ import annotations

import asyncio
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

__all__ = ("AgentTool", "RawReturn", "ToolContext", "ToolProvider", "ToolStreamEvent", "error_result", "observe_raw",
           "until_set")


@dataclass
class ToolContext:
    """Injected into tools declared with ``@tool(context=True)``."""

    tool_use: ToolUse
    agent: Any
    invocation_state: dict[str, Any] = field(default_factory=dict)
    cancel_signal: threading.Event = field(default_factory=threading.Event)
    # Set by the loop only when a TOOL_RAW extension observes this call (ray_harness.extensions); a tool
    # that exposes its raw call runs it through ``observe_raw``. Not a field: never part of the context's API.
    _raw_observer = None

    def interrupt(self, name: str, reason: Any = None) -> Any:
        """Pause for a human: raises the first time, returns the response after resume."""
        key = interrupt_id("tool_call", str(self.tool_use["toolUseId"]), name)
        return raise_or_respond(self.agent.interrupt_state, key, name, reason)


class ToolStreamEvent(dict[str, Any]):
    """An intermediate event yielded by a streaming tool: ``{"tool_stream_event": {"tool_use", "data"}}``."""

    def __init__(self, tool_use: ToolUse, data: Any) -> None:
        super().__init__(type="tool_stream", tool_stream_event={"tool_use": tool_use, "data": data})


class RawReturn:
    """The last event of a raw call: the tool's own return value, before any conversion to a ``ToolResult``."""

    __slots__ = ("extra", "value")

    def __init__(self, value: Any, extra: Any = None) -> None:
        self.value = value
        self.extra = extra  # what the tool needs besides the value (never shown to extensions)


async def until_set(signal: threading.Event, poll_s: float = 0.05) -> None:
    """Return once ``signal`` (a tool context's ``cancel_signal``) is set.

    Polled: a ``threading.Event`` cannot be awaited, and a thread parked in ``Event.wait()`` could not be stopped
    when what it watches ends first. Cancel the task awaiting this when it is no longer needed.
    """
    while not signal.is_set():  # noqa: ASYNC110
        await asyncio.sleep(poll_s)


def observe_raw(context: ToolContext, produce: Any) -> AsyncGenerator[Any, None]:
    """Run ``produce()`` (stream events, then a ``RawReturn``) under the context's raw observer, if any."""
    observer = context._raw_observer
    return produce() if observer is None else observer(produce)  # type: ignore[no-any-return]


class AgentTool(ABC):
    """A tool the agent can call.

    A tool whose ``exposes_raw_call`` is True runs its underlying call through :func:`observe_raw`, so
    ``TOOL_RAW`` extensions see the raw return value or exception; for others they wrap ``stream``.
    """

    exposes_raw_call = False

    @property
    @abstractmethod
    def tool_name(self) -> str:
        """The name the model calls the tool by."""

    @property
    @abstractmethod
    def tool_spec(self) -> ToolSpec:
        """The spec sent to the model (name, description, input schema)."""

    @property
    def tool_type(self) -> str:
        """A label for telemetry (``python``, ``mcp``, ``agent``, ...)."""
        return "python"

    @abstractmethod
    def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        """Run the tool. Yield stream data, then finally the ``ToolResult`` (wrapped in ``ToolResultEvent``)."""


@runtime_checkable
class ToolProvider(Protocol):
    """A source of tools loaded when the agent first runs (e.g. an MCP client)."""

    async def load_tools(self) -> list[AgentTool]:
        """Connect if needed and return the provider's tools (called at the agent's first invocation)."""

    def close(self) -> None:
        """Release the provider's connections and processes."""


def error_result(tool_use_id: str, text: str) -> ToolResult:
    """An error ``toolResult`` for ``tool_use_id`` with ``text`` as its content."""
    return {"toolUseId": tool_use_id, "status": "error", "content": [{"text": text}]}
