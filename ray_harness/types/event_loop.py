"""Usage, timing and stop reasons of model calls (Strands' ``strands.types.event_loop``).

:mod:`ray_harness.types.streaming` and :mod:`ray_harness.types.content` hold the same objects; they live here so
that both can use them without importing each other.
"""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict

__all__ = ("Metrics", "StopReason", "Usage")

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
