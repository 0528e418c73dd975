"""``AgentTool``: what the agent loop executes, and ``ToolContext``: what a tool may see."""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from typing_extensions import override

from ray_harness.hooks.events import raise_or_respond
from ray_harness.interrupts import interrupt_id
from ray_harness.tools._spec import checked_spec

if TYPE_CHECKING:
    from ray_harness.types.content import ToolResult, ToolUse
    from ray_harness.types.tools import ToolSpec

__all__ = ("AgentTool", "HeldSpecBase", "HeldSpecTool", "RawReturn", "ToolContext", "ToolProvider", "ToolStreamEvent",
           "error_result", "observe_raw", "until_set")


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

    A subclass's ``stream`` may yield typed events (``ToolStreamEvent``, then a ``ToolResultEvent``) or, as for
    Strands, plain values: each is a stream event and the last one the result (a ``ToolResult`` dict, or any
    value a ``@tool`` may return). Declared Strands' way, ``stream(self, tool_use, invocation_state, **kwargs)``,
    it gets the invocation state with the calling agent under ``agent`` instead of the ``ToolContext``.

    A tool whose ``exposes_raw_call`` is True runs its underlying call through :func:`observe_raw`, so
    ``TOOL_RAW`` extensions see the raw return value or exception; for others they wrap ``stream``.
    """

    exposes_raw_call = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A user's subclass runs its ``stream`` as Strands runs a custom tool's (see ``_user_stream``)."""
        super().__init_subclass__(**kwargs)
        stream = cls.__dict__.get("stream")
        # NOTE: our own tools yield typed events already; only code outside the package is adapted.
        if stream is None or cls.__module__.split(".")[0] == "ray_harness" \
                or getattr(stream, "__isabstractmethod__", False) or getattr(stream, "__ray_harness_adapted__", False):
            return
        from ray_harness.tools._user_stream import as_strands_runs_it

        cls.stream = as_strands_runs_it(stream)  # type: ignore[method-assign]

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
        """A label for telemetry and display (``function``, ``python``, ``mcp``, ``agent``, ...)."""
        return "python"

    # Class defaults, not set in __init__ as Strands does: subclasses need not call AgentTool.__init__.
    _is_dynamic = False
    _hot_reload = False

    @property
    def supports_hot_reload(self) -> bool:
        """Whether this tool may replace a registered tool of its name (``ToolRegistry.register_tool``).

        As in Strands: True for ``@tool`` functions and ``PythonAgentTool``s, False for the others (MCP tools,
        agents as tools, custom ``AgentTool`` subclasses unless they override this property).
        """
        return self._hot_reload

    @property
    def is_dynamic(self) -> bool:
        """Whether the tool was marked as loaded at run time (:meth:`mark_dynamic`); ``False`` by default."""
        return self._is_dynamic

    def mark_dynamic(self) -> None:
        """Mark the tool as loaded at run time: ``ToolRegistry.dynamic_tools`` lists it."""
        self._is_dynamic = True

    def get_display_properties(self) -> dict[str, str]:
        """What a UI shows of the tool: ``{"Name": ..., "Type": ...}``; subclasses add their own entries."""
        return {"Name": self.tool_name, "Type": self.tool_type}

    @abstractmethod
    def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        """Run the tool. Yield stream data, then finally the ``ToolResult`` (wrapped in ``ToolResultEvent``)."""


class HeldSpecBase(AgentTool):
    """A tool that holds its name and spec (``_name``, ``_spec``); both are read-only, as for Strands' MCP tools."""

    _name: str
    _spec: ToolSpec

    @property
    @override
    def tool_name(self) -> str:
        return self._name

    @property
    @override
    def tool_spec(self) -> ToolSpec:
        return self._spec


class HeldSpecTool(HeldSpecBase):
    """A tool that holds its name and spec; the spec may be replaced at run time, as in Strands."""

    _spec_replaced = False

    @property
    @override
    def tool_spec(self) -> ToolSpec:
        return super().tool_spec  # the getter is HeldSpecBase's: declared again only to take a setter

    @tool_spec.setter
    def tool_spec(self, value: ToolSpec) -> None:
        """Replace the spec the model sees: the same name, a description and an input schema."""
        self._spec = checked_spec(value, self._name)
        self._spec_replaced = True


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
