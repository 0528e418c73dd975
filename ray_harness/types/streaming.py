"""Converse stream events, as models yield them.

A model's ``stream()`` yields dicts with exactly one of these keys:
``messageStart``, ``contentBlockStart``, ``contentBlockDelta``,
``contentBlockStop``, ``messageStop``, ``metadata`` (and provider-specific
``redactContent``). The agent loop assembles them into a message.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

__all__ = (
    "ContentBlockDelta",
    "ContentBlockDeltaEvent",
    "ContentBlockStart",
    "ContentBlockStartEvent",
    "ContentBlockStopEvent",
    "MessageStartEvent",
    "MessageStopEvent",
    "Metrics",
    "MetadataEvent",
    "StopReason",
    "StreamEvent",
    "Usage",
)

StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "content_filtered",
    "guardrail_intervened",
    "interrupt",
    "cancelled",
    "checkpoint",
    "limit_turns",
    "limit_total_tokens",
    "limit_output_tokens",
    "limit_cost_usd",
]


class Usage(TypedDict):
    """Token counts of a model call; ``inputTokens`` includes cached prompt tokens.

    ``estimatedTokens`` (ray_harness) is how many of ``totalTokens`` are estimates, not provider reports.
    """

    inputTokens: int
    outputTokens: int
    totalTokens: int
    cacheReadInputTokens: NotRequired[int]
    cacheWriteInputTokens: NotRequired[int]
    estimatedTokens: NotRequired[int]


class Metrics(TypedDict):
    """Timing of a model call, in milliseconds."""

    latencyMs: int
    timeToFirstByteMs: NotRequired[int]


class MessageStartEvent(TypedDict):
    """The model started a message with ``role``."""

    role: Literal["user", "assistant"]


class ContentBlockStartToolUse(TypedDict):
    """The tool call a ``contentBlockStart`` opens."""

    toolUseId: str
    name: str


class ContentBlockStart(TypedDict, total=False):
    """What a content block starts with (a tool call; text blocks start empty)."""

    toolUse: ContentBlockStartToolUse


class ContentBlockStartEvent(TypedDict):
    """A content block started."""

    start: ContentBlockStart
    contentBlockIndex: NotRequired[int]


class ContentBlockDeltaToolUse(TypedDict):
    """A piece of a tool call's JSON input, as text."""

    input: str


class ContentBlockDeltaReasoning(TypedDict, total=False):
    """A piece of reasoning (text, signature or redacted content)."""

    text: str
    signature: str
    redactedContent: bytes


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


class MetadataEvent(TypedDict, total=False):
    """Usage and timing of the call, sent last."""

    usage: Usage
    metrics: Metrics


class StreamEvent(TypedDict, total=False):
    """One Converse stream event; exactly one key is set."""

    messageStart: MessageStartEvent
    contentBlockStart: ContentBlockStartEvent
    contentBlockDelta: ContentBlockDeltaEvent
    contentBlockStop: ContentBlockStopEvent
    messageStop: MessageStopEvent
    metadata: MetadataEvent
    redactContent: dict[str, Any]
