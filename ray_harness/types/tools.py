"""Tool specifications and tool choice."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

__all__ = ("ToolChoice", "ToolInputSchema", "ToolSpec")


class ToolInputSchema(TypedDict):
    json: dict[str, Any]


class ToolSpec(TypedDict):
    name: str
    description: str
    inputSchema: ToolInputSchema


class ToolChoiceTool(TypedDict):
    name: str


class ToolChoice(TypedDict, total=False):
    auto: dict[str, Any]
    any: dict[str, Any]
    tool: ToolChoiceTool
