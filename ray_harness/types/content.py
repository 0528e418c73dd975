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

Every public name of Strands' ``strands.types.content`` is here too. Some describe what a block key holds
(``CachePoint``, ``GuardContent``, ``CitationsContentBlock``) while ``ContentBlock`` types those keys as plain
dicts: validation then passes provider fields through as sent (Bedrock's ``guardContent`` image, say), and
``AudioContent`` is importable though no ``audio`` block is accepted. Strands' ``ReasoningContentBlock`` and
``ReasoningTextBlock`` are ``ReasoningContent`` and ``ReasoningText``; the stream's pieces Strands keeps here
(``ContentBlockStart``, ``DeltaContent``, ...) are the ones :mod:`ray_harness.types.streaming` uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, cast

from typing_extensions import TypedDict

from ray_harness.types.citations import CitationsContentBlock
from ray_harness.types.event_loop import Metrics, Usage

__all__ = (
    "AudioContent",
    "CachePoint",
    "CitationsContentBlock",
    "ContentBlock",
    "ContentBlockDelta",
    "ContentBlockStart",
    "ContentBlockStartToolUse",
    "ContentBlockStop",
    "DeltaContent",
    "DocumentContent",
    "GuardContent",
    "GuardContentText",
    "ImageContent",
    "ImageSource",
    "InterruptResponse",
    "InterruptResponseContent",
    "Message",
    "MessageMetadata",
    "Messages",
    "Metrics",
    "ReasoningContent",
    "ReasoningContentBlock",
    "ReasoningText",
    "ReasoningTextBlock",
    "Role",
    "SystemContentBlock",
    "SystemPrompt",
    "TextBlock",
    "ToolResult",
    "ToolResultContent",
    "ToolResultStatus",
    "ToolUse",
    "Usage",
    "VideoContent",
    "get_message_metadata",
    "split_system_prompt",
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


class AudioContent(TypedDict):
    """An audio clip (``{"format": "mp3", "source": {"bytes": ...}}``): importable as in Strands, not a block kind."""

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


ReasoningTextBlock = ReasoningText
"""Strands' name of :class:`ReasoningText` (there every key is optional; here a reasoning text has its ``text``)."""
ReasoningContentBlock = ReasoningContent
"""Strands' name of :class:`ReasoningContent`."""


class CachePoint(TypedDict):
    """A ``cachePoint`` block's value: ``{"type": "default"}``, with a ``ttl`` (``"5m"``, ``"1h"``) where supported."""

    type: str
    ttl: NotRequired[str]


class GuardContentText(TypedDict):
    """Text a guardrail assesses, with the ``qualifiers`` that say what it is."""

    qualifiers: NotRequired[list[Literal["grounding_source", "query", "guard_content"]]]
    text: str


class GuardContent(TypedDict):
    """A ``guardContent`` block's value (Bedrock guardrails): ``{"text": {"text": ...}}``."""

    text: GuardContentText


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
"""A conversation: its messages in order."""


class MessageMetadata(TypedDict, total=False):
    """What Strands keeps beside a message under ``metadata`` (never sent to a model): usage, timing, custom data."""

    usage: Usage
    metrics: Metrics
    custom: dict[str, Any]


def get_message_metadata(message: Message) -> MessageMetadata:
    """The message's ``metadata`` (an empty dict when it has none).

    Validation keeps only the keys of :class:`Message`, so a message the agent holds has none: this is for
    messages read as Strands wrote them.
    """
    return cast(MessageMetadata, cast(Mapping[str, Any], message).get("metadata", {}))


def split_system_prompt(system_prompt: SystemPrompt | None) -> tuple[str | None, list[SystemContentBlock] | None]:
    """The two forms a model's ``stream`` takes: the text (blocks' texts joined by newlines) and the blocks.

    A string is also its one text block; a list without text blocks has no text; ``None`` is ``(None, None)``.
    """
    if isinstance(system_prompt, str):
        return system_prompt, [{"text": system_prompt}]
    if system_prompt is None:
        return None, None
    texts = [block["text"] for block in system_prompt if "text" in block]
    return ("\n".join(texts) if texts else None), system_prompt


@dataclass
class TextBlock:
    """A text block as an object (Strands' ``TextBlock``): ``TextBlock("hi").to_dict() == {"text": "hi"}``."""

    text: str

    def to_dict(self) -> ContentBlock:
        """The block as a message holds it."""
        return {"text": self.text}


class ContentBlockStartToolUse(TypedDict):
    """The tool call a ``contentBlockStart`` opens (``reasoningSignature`` ties it to the model's reasoning)."""

    toolUseId: str
    name: str
    reasoningSignature: NotRequired[str]


class ContentBlockStart(TypedDict, total=False):
    """What a content block starts with (a tool call; text blocks start empty)."""

    toolUse: ContentBlockStartToolUse


class DeltaContent(TypedDict, total=False):
    """A piece of streamed text or of a tool call's JSON input (Strands' older delta shape)."""

    text: str
    toolUse: dict[Literal["input"], str]


class ContentBlockDelta(TypedDict):
    """A piece of content block number ``contentBlockIndex`` (Strands' older shape of a delta event)."""

    contentBlockIndex: int
    delta: DeltaContent


class ContentBlockStop(TypedDict):
    """Content block number ``contentBlockIndex`` ended."""

    contentBlockIndex: int
