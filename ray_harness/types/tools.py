"""Tool specifications and tool choice; also the tool types Strands' ``strands.types.tools`` holds.

``ToolUse``, ``ToolResult`` and the other content types live in :mod:`ray_harness.types.content`, ``AgentTool`` and
``ToolContext`` in :mod:`ray_harness.tools`; they are importable from here too, as Strands' programs import them.
Every public name of Strands' ``strands.types.tools`` is here; ``ToolChoice`` is one TypedDict of three optional
keys where Strands writes a union of three one-key dicts (``ToolChoiceAutoDict``, ...), which fit it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NotRequired, Protocol

from typing_extensions import TypedDict

from ray_harness.types.content import (
    ContentBlock,
    DocumentContent,
    ImageContent,
    ToolResult,
    ToolResultContent,
    ToolResultStatus,
    ToolUse,
)

if TYPE_CHECKING:
    from ray_harness.tools.base import AgentTool, ToolContext

__all__ = ("AgentTool", "DocumentContent", "ImageContent", "JSONSchema", "RunToolHandler", "Tool", "ToolChoice",
           "ToolChoiceAny", "ToolChoiceAnyDict", "ToolChoiceAuto", "ToolChoiceAutoDict", "ToolChoiceTool",
           "ToolChoiceToolDict", "ToolConfig", "ToolContext", "ToolFunc", "ToolGenerator", "ToolInputSchema",
           "ToolResult", "ToolResultBlock", "ToolResultContent", "ToolResultStatus", "ToolSpec", "ToolUse")

JSONSchema = dict
"""A JSON schema, as a dict."""


class ToolInputSchema(TypedDict):
    """A tool's input as a JSON schema: ``{"json": {...}}``."""

    json: dict[str, Any]


class ToolSpec(TypedDict):
    """What the model is told about a tool: name, description and input schema."""

    name: str
    description: str
    inputSchema: ToolInputSchema
    outputSchema: NotRequired[dict[str, Any]]
    annotations: NotRequired[dict[str, object]]


class Tool(TypedDict):
    """A tool as a model request lists it: ``{"toolSpec": {...}}``."""

    toolSpec: ToolSpec


class ToolChoiceAuto(TypedDict):
    """The value of ``{"auto": {}}``: the model decides whether to call a tool."""


class ToolChoiceAny(TypedDict):
    """The value of ``{"any": {}}``: the model must call some tool."""


class ToolChoiceTool(TypedDict):
    """Force the tool named ``name``."""

    name: str


class ToolChoice(TypedDict, total=False):
    """How the model must use tools: ``{"auto": {}}``, ``{"any": {}}`` or ``{"tool": {"name": ...}}``."""

    auto: dict[str, Any]
    any: dict[str, Any]
    tool: ToolChoiceTool


ToolChoiceAutoDict = dict[Literal["auto"], ToolChoiceAuto]
ToolChoiceAnyDict = dict[Literal["any"], ToolChoiceAny]
ToolChoiceToolDict = dict[Literal["tool"], ToolChoiceTool]


class ToolConfig(TypedDict):
    """The tools of a model request and how the model must use them."""

    tools: list[Tool]
    toolChoice: ToolChoice


@dataclass
class ToolResultBlock:
    """A tool result as an object (Strands' ``ToolResultBlock``); ``to_dict()`` is the ``toolResult`` block."""

    tool_use_id: str
    status: ToolResultStatus
    content: list[ToolResultContent]

    def to_dict(self) -> ContentBlock:
        """The block as a message holds it."""
        return {"toolResult": {"toolUseId": self.tool_use_id, "status": self.status, "content": self.content}}


class ToolFunc(Protocol):
    """A function a tool is made of: called with the tool's arguments, it returns (or awaits) a ``ToolResult``."""

    __name__: str

    def __call__(self, *args: Any, **kwargs: Any) -> ToolResult | Awaitable[ToolResult]:
        """Run the tool."""
        ...


ToolGenerator = AsyncGenerator[Any, None]
"""What a tool's ``stream`` yields: events, the last one the result."""

RunToolHandler = Callable[[ToolUse], AsyncGenerator[dict[str, Any], None]]
"""A callable that runs one tool call and streams its events."""


def __getattr__(name: str) -> Any:
    # ray_harness.tools imports this module: its classes are looked up when first asked for, not at import.
    if name in ("AgentTool", "ToolContext"):
        from ray_harness.tools import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
