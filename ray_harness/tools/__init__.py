"""Tools: the ``@tool`` decorator, ``PythonAgentTool``, tool context, registry, executors and spec normalisation."""

from ray_harness.tools._spec import normalize_schema, normalize_tool_spec
from ray_harness.tools.base import AgentTool, ToolContext, ToolProvider, ToolStreamEvent
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.tools.executors import ConcurrentToolExecutor, SequentialToolExecutor, ToolExecutor
from ray_harness.tools.python_tool import PythonAgentTool
from ray_harness.tools.registry import ToolRegistry

__all__ = [
    "AgentTool",
    "ConcurrentToolExecutor",
    "DecoratedFunctionTool",
    "PythonAgentTool",
    "SequentialToolExecutor",
    "ToolContext",
    "ToolExecutor",
    "ToolProvider",
    "ToolRegistry",
    "ToolStreamEvent",
    "normalize_schema",
    "normalize_tool_spec",
    "tool",
]
