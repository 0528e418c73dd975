"""Converse stream events, as models yield them.

A model's ``stream()`` yields dicts with exactly one of these keys:
``messageStart``, ``contentBlockStart``, ``contentBlockDelta``,
``contentBlockStop``, ``messageStop``, ``metadata`` (and provider-specific
``redactContent``). The agent loop assembles them into a message.

Every public name of Strands' ``strands.types.streaming`` is here too; ``Usage``, ``Metrics`` and ``StopReason``
live in :mod:`ray_harness.types.event_loop`, ``ContentBlockStart`` in :mod:`ray_harness.types.content` (as in
Strands). Strands' ``ReasoningContentBlockDelta`` is ``ContentBlockDeltaReasoning``.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from ray_harness.types.citations import Citation, CitationLocation, CitationSourceContent
from ray_harness.types.content import ContentBlockStart, ContentBlockStartToolUse, Role
from ray_harness.types.event_loop import Metrics, StopReason, Usage

__all__ = (
    "CitationLocation",
    "CitationSourceContentDelta",
    "CitationsDelta",
    "ContentBlockDelta",
    "ContentBlockDeltaEvent",
    "ContentBlockDeltaReasoning",
    "ContentBlockDeltaText",
    "ContentBlockDeltaToolUse",
    "ContentBlockStart",
    "ContentBlockStartEvent",
    "ContentBlockStartToolUse",
    "ContentBlockStopEvent",
    "ExceptionEvent",
    "MessageStartEvent",
    "MessageStopEvent",
    "MetadataEvent",
    "Metrics",
    "ModelStreamErrorEvent",
    "ReasoningContentBlockDelta",
    "RedactContentEvent",
    "Role",
    "StopReason",
    "StreamEvent",
    "Trace",
    "Usage",
)

class MessageStartEvent(TypedDict):
    """The model started a message with ``role``."""

    role: Literal["user", "assistant"]


class ContentBlockStartEvent(TypedDict):
    """A content block started."""

    start: ContentBlockStart
    contentBlockIndex: NotRequired[int]


class ContentBlockDeltaText(TypedDict):
    """A piece of streamed text."""

    text: str


class ContentBlockDeltaToolUse(TypedDict):
    """A piece of a tool call's JSON input, as text (some providers name the call here, not at its start)."""

    input: str
    toolUseId: NotRequired[str]
    name: NotRequired[str]


CitationSourceContentDelta = CitationSourceContent
"""A piece of the cited source text (the shape of :class:`~ray_harness.types.citations.CitationSourceContent`)."""
CitationsDelta = Citation
"""A piece of a citation (the shape of :class:`~ray_harness.types.citations.Citation`): title, location, source."""


class ContentBlockDeltaReasoning(TypedDict, total=False):
    """A piece of reasoning (text, signature or redacted content)."""

    text: str
    signature: str
    redactedContent: bytes


ReasoningContentBlockDelta = ContentBlockDeltaReasoning
"""Strands' name of :class:`ContentBlockDeltaReasoning`."""


class ContentBlockDelta(TypedDict, total=False):
    """A piece of a content block: ``text``, ``toolUse`` input, ``reasoningContent`` or a ``citation`` of the text."""

    text: str
    toolUse: ContentBlockDeltaToolUse
    reasoningContent: ContentBlockDeltaReasoning
    citation: dict[str, Any]


class ContentBlockDeltaEvent(TypedDict):
    """A content block grew by ``delta``."""

    delta: ContentBlockDelta
    contentBlockIndex: NotRequired[int]


class ContentBlockStopEvent(TypedDict, total=False):
    """A content block ended."""

    contentBlockIndex: int


class MessageStopEvent(TypedDict):
    """The message ended with ``stopReason`` (``end_turn``, ``tool_use``, ``max_tokens``, ...)."""

    stopReason: str
    additionalModelResponseFields: NotRequired[Any]


class Trace(TypedDict):
    """Bedrock's trace of a call: ``guardrail`` holds the guardrail's assessments of the input and output."""

    guardrail: dict[str, Any]


class MetadataEvent(TypedDict, total=False):
    """Usage and timing of the call, sent last (Bedrock adds a guardrail ``trace``)."""

    usage: Usage
    metrics: Metrics
    trace: Trace | None


class ExceptionEvent(TypedDict):
    """An error the stream reports as an event (Bedrock's ``throttlingException``, ...): its ``message``."""

    message: str


class ModelStreamErrorEvent(ExceptionEvent):
    """Bedrock's ``modelStreamErrorException``: also the provider's own message and HTTP status."""

    originalMessage: str
    originalStatusCode: int


class RedactContentEvent(TypedDict, total=False):
    """A guardrail's instruction to replace the user's input or the assistant's output by the given text."""

    redactUserContentMessage: str | None
    redactAssistantContentMessage: str | None


class StreamEvent(TypedDict, total=False):
    """One Converse stream event; exactly one key is set."""

    messageStart: MessageStartEvent
    contentBlockStart: ContentBlockStartEvent
    contentBlockDelta: ContentBlockDeltaEvent
    contentBlockStop: ContentBlockStopEvent
    messageStop: MessageStopEvent
    metadata: MetadataEvent
    redactContent: dict[str, Any]
    internalServerException: ExceptionEvent
    modelStreamErrorException: ModelStreamErrorEvent
    serviceUnavailableException: ExceptionEvent
    throttlingException: ExceptionEvent
    validationException: ExceptionEvent
