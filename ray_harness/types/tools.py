"""Tool specifications and tool choice."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

__all__ = ("ToolChoice", "ToolInputSchema", "ToolSpec")


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
