"""Strands' import path ``strands.tools.tool_provider``.

The same objects as :mod:`ray_harness.tools` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.tools import ToolProvider

__all__ = ("ToolProvider",)
