"""Converse-style messages and content blocks.

The shapes follow the Bedrock Converse API (and the Strands SDK): a message is
``{"role": "user" | "assistant", "content": [block, ...]}`` and each block holds
exactly one of ``text``, ``toolUse``, ``toolResult``, ``reasoningContent``,
``image``, ``document``, ``json``, ``interruptResponse`` or
``checkpointResume``.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

__all__ = (
    "ContentBlock",
    "DocumentContent",
    "ImageContent",
    "ImageSource",
    "InterruptResponse",
    "InterruptResponseContent",
    "Message",
    "Messages",
    "ReasoningContent",
    "ReasoningText",
    "Role",
    "SystemContentBlock",
    "ToolResult",
    "ToolResultContent",
    "ToolResultStatus",
    "ToolUse",
)

Role = Literal["user", "assistant"]
ToolResultStatus = Literal["success", "error"]


class ImageSource(TypedDict):
    bytes: bytes


class ImageContent(TypedDict):
    format: str
    source: ImageSource


class DocumentContent(TypedDict):
    format: str
    name: str
    source: ImageSource


class ReasoningText(TypedDict):
    text: str
    signature: NotRequired[str]


class ReasoningContent(TypedDict, total=False):
    reasoningText: ReasoningText
    redactedContent: bytes


class ToolUse(TypedDict):
    toolUseId: str
    name: str
    input: Any


class ToolResultContent(TypedDict, total=False):
    text: str
    json: Any
    image: ImageContent
    document: DocumentContent


class ToolResult(TypedDict):
    toolUseId: str
    status: ToolResultStatus
    content: list[ToolResultContent]


class InterruptResponse(TypedDict):
    interruptId: str
    response: Any


class InterruptResponseContent(TypedDict):
    interruptResponse: InterruptResponse


class ContentBlock(TypedDict, total=False):
    text: str
    toolUse: ToolUse
    toolResult: ToolResult
    reasoningContent: ReasoningContent
    image: ImageContent
    document: DocumentContent
    json: Any


class SystemContentBlock(TypedDict, total=False):
    text: str


class Message(TypedDict):
    role: Role
    content: list[ContentBlock]


Messages = list[Message]
