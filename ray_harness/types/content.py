"""Converse-style messages and content blocks.

The shapes follow the Bedrock Converse API (and the Strands SDK): a message is
``{"role": "user" | "assistant", "content": [block, ...]}`` and each block holds
exactly one of ``text``, ``toolUse``, ``toolResult``, ``reasoningContent``,
``image``, ``document``, ``video``, ``cachePoint``, ``guardContent``,
``citationsContent`` or ``json`` (a prompt may also be ``interruptResponse`` or
``checkpointResume`` blocks).

Validation (:mod:`ray_harness.types.validation`) keeps only the keys named here, so every
block kind a provider here sends is declared (Strands' ``audio`` is not: none sends it).
A caller's block of no known kind is refused, naming it (validation would otherwise leave ``{}``).
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
    "SystemPrompt",
    "ToolResult",
    "ToolResultContent",
    "ToolResultStatus",
    "ToolUse",
    "VideoContent",
)

Role = Literal["user", "assistant"]
ToolResultStatus = Literal["success", "error"]


class ImageSource(TypedDict):
    """The bytes of an image or document."""

    bytes: bytes


class ImageContent(TypedDict):
    """An image block: ``{"format": "png", "source": {"bytes": ...}}``."""

    format: str
    source: ImageSource


class DocumentContent(TypedDict):
    """A document block (``format`` such as ``pdf`` or ``txt``, a ``name``, and its bytes).

    ``citations`` (``{"enabled": True}``) and ``context`` are Bedrock's, as in Strands.
    """

    format: str
    name: str
    source: ImageSource
    citations: NotRequired[dict[str, Any] | None]
    context: NotRequired[str | None]


class VideoContent(TypedDict):
    """A video block: ``{"format": "mp4", "source": {"bytes": ...}}`` (Bedrock)."""

    format: str
    source: ImageSource


class ReasoningText(TypedDict):
    """Visible model reasoning, with the provider's ``signature`` when it has one."""

    text: str
    signature: NotRequired[str]


class ReasoningContent(TypedDict, total=False):
    """A reasoning block: ``reasoningText`` or provider-encrypted ``redactedContent``."""

    reasoningText: ReasoningText
    redactedContent: bytes


class ToolUse(TypedDict):
    """A tool call requested by the model: its id, the tool's name and the JSON input."""

    toolUseId: str
    name: str
    input: Any


class ToolResultContent(TypedDict, total=False):
    """One piece of a tool result: ``text``, ``json``, ``image`` or ``document``."""

    text: str
    json: Any
    image: ImageContent
    document: DocumentContent


class ToolResult(TypedDict):
    """The result of one tool call, matched to its ``toolUse`` by ``toolUseId``."""

    toolUseId: str
    status: ToolResultStatus
    content: list[ToolResultContent]


class InterruptResponse(TypedDict):
    """A human's answer to one interrupt: ``{"interruptId": ..., "response": ...}``."""

    interruptId: str
    response: Any


class InterruptResponseContent(TypedDict):
    """A prompt block that answers an interrupt: ``{"interruptResponse": {...}}``."""

    interruptResponse: InterruptResponse


class ContentBlock(TypedDict, total=False):
    """One block of a message; exactly one key is set (``text``, ``toolUse``, ``toolResult``, ...)."""

    text: str
    toolUse: ToolUse
    toolResult: ToolResult
    reasoningContent: ReasoningContent
    image: ImageContent
    document: DocumentContent
    video: VideoContent
    cachePoint: dict[str, Any]
    guardContent: dict[str, Any]
    citationsContent: dict[str, Any]
    json: Any


class SystemContentBlock(TypedDict, total=False):
    """One block of a system prompt.

    ``{"text": ...}``, or ``{"cachePoint": {"type": "default"}}`` to mark the blocks before it for prompt caching
    (Bedrock, Anthropic; other providers send the text only).
    """

    text: str
    cachePoint: dict[str, Any]


SystemPrompt = str | list[SystemContentBlock]
"""A system prompt: a string, or blocks (as in Strands)."""


class Message(TypedDict):
    """A conversation message: ``{"role": "user" | "assistant", "content": [block, ...]}``."""

    role: Role
    content: list[ContentBlock]


Messages = list[Message]
