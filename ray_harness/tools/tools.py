"""Strands' import path ``strands.tools.tools``.

The same objects as :mod:`ray_harness.tools` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.tools import PythonAgentTool, normalize_schema, normalize_tool_spec

__all__ = ("PythonAgentTool", "normalize_schema", "normalize_tool_spec")
