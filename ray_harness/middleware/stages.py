"""Strands' import path ``strands.middleware.stages``.

The same objects as :mod:`ray_harness.middleware` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.middleware import (
    ExecuteToolContext,
    ExecuteToolResult,
    InvokeModelContext,
    InvokeModelResult,
    MiddlewareInterruptResult,
)

__all__ = ("ExecuteToolContext", "ExecuteToolResult", "InvokeModelContext", "InvokeModelResult", "MiddlewareInterruptResult")
