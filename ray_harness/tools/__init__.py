"""Tools: the ``@tool`` decorator, tool context, registry and executors."""

from ray_harness.tools.base import AgentTool, ToolContext, ToolProvider, ToolStreamEvent
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.tools.executors import ConcurrentToolExecutor, SequentialToolExecutor, ToolExecutor
from ray_harness.tools.registry import ToolRegistry

__all__ = [
    "AgentTool",
    "ConcurrentToolExecutor",
    "DecoratedFunctionTool",
    "SequentialToolExecutor",
    "ToolContext",
    "ToolExecutor",
    "ToolProvider",
    "ToolRegistry",
    "ToolStreamEvent",
    "tool",
]
