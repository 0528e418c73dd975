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
    """Token counts; ``estimatedTokens`` (ray_harness) is how many of ``totalTokens`` are estimates, not reports."""

    inputTokens: int
    outputTokens: int
    totalTokens: int
    cacheReadInputTokens: NotRequired[int]
    cacheWriteInputTokens: NotRequired[int]
    estimatedTokens: NotRequired[int]


class Metrics(TypedDict):
    latencyMs: int
    timeToFirstByteMs: NotRequired[int]


class MessageStartEvent(TypedDict):
    role: Literal["user", "assistant"]


class ContentBlockStartToolUse(TypedDict):
    toolUseId: str
    name: str


class ContentBlockStart(TypedDict, total=False):
    toolUse: ContentBlockStartToolUse


class ContentBlockStartEvent(TypedDict):
    start: ContentBlockStart
    contentBlockIndex: NotRequired[int]


class ContentBlockDeltaToolUse(TypedDict):
    input: str


class ContentBlockDeltaReasoning(TypedDict, total=False):
    text: str
    signature: str
    redactedContent: bytes


class ContentBlockDelta(TypedDict, total=False):
    text: str
    toolUse: ContentBlockDeltaToolUse
    reasoningContent: ContentBlockDeltaReasoning


class ContentBlockDeltaEvent(TypedDict):
    delta: ContentBlockDelta
    contentBlockIndex: NotRequired[int]


class ContentBlockStopEvent(TypedDict, total=False):
    contentBlockIndex: int


class MessageStopEvent(TypedDict):
    stopReason: str
    additionalModelResponseFields: NotRequired[Any]


class MetadataEvent(TypedDict, total=False):
    usage: Usage
    metrics: Metrics


class StreamEvent(TypedDict, total=False):
    messageStart: MessageStartEvent
    contentBlockStart: ContentBlockStartEvent
    contentBlockDelta: ContentBlockDeltaEvent
    contentBlockStop: ContentBlockStopEvent
    messageStop: MessageStopEvent
    metadata: MetadataEvent
    redactContent: dict[str, Any]
