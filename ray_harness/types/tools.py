"""Tool specifications and tool choice; also the tool types Strands' ``strands.types.tools`` holds.

``ToolUse``, ``ToolResult`` and the other content types live in :mod:`ray_harness.types.content`, ``AgentTool`` and
``ToolContext`` in :mod:`ray_harness.tools`; they are importable from here too, as Strands' programs import them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from ray_harness.types.content import (
    DocumentContent,
    ImageContent,
    ToolResult,
    ToolResultContent,
    ToolResultStatus,
    ToolUse,
)

if TYPE_CHECKING:
    from ray_harness.tools.base import AgentTool, ToolContext

__all__ = ("AgentTool", "DocumentContent", "ImageContent", "ToolChoice", "ToolContext", "ToolInputSchema",
           "ToolResult", "ToolResultContent", "ToolResultStatus", "ToolSpec", "ToolUse")


class ToolInputSchema(TypedDict):
    """A tool's input as a JSON schema: ``{"json": {...}}``."""

    json: dict[str, Any]


class ToolSpec(TypedDict):
    """What the model is told about a tool: name, description and input schema."""

    name: str
    description: str
    inputSchema: ToolInputSchema


class ToolChoiceTool(TypedDict):
    """Force the tool named ``name``."""

    name: str


class ToolChoice(TypedDict, total=False):
    """How the model must use tools: ``{"auto": {}}``, ``{"any": {}}`` or ``{"tool": {"name": ...}}``."""

    auto: dict[str, Any]
    any: dict[str, Any]
    tool: ToolChoiceTool


def __getattr__(name: str) -> Any:
    # ray_harness.tools imports this module: its classes are looked up when first asked for, not at import.
    if name in ("AgentTool", "ToolContext"):
        from ray_harness.tools import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
