"""Middleware: onions around the model call and the tool call."""

from ray_harness.middleware.registry import MiddlewareRegistry
from ray_harness.middleware.types import (
    ExecuteToolContext,
    ExecuteToolResult,
    ExecuteToolStage,
    InvokeModelContext,
    InvokeModelResult,
    InvokeModelStage,
    MiddlewareError,
    MiddlewareInterruptResult,
    MiddlewareStage,
    ModelStopReason,
    ToolResultEvent,
)

__all__ = [
    "ExecuteToolContext",
    "ExecuteToolResult",
    "ExecuteToolStage",
    "InvokeModelContext",
    "InvokeModelResult",
    "InvokeModelStage",
    "MiddlewareError",
    "MiddlewareInterruptResult",
    "MiddlewareRegistry",
    "MiddlewareStage",
    "ModelStopReason",
    "ToolResultEvent",
]
