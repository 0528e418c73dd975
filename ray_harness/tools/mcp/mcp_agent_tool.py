"""Strands' import path ``strands.tools.mcp.mcp_agent_tool``.

The same objects as :mod:`ray_harness.tools.mcp` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.tools.mcp import MCPAgentTool

__all__ = ("MCPAgentTool",)
