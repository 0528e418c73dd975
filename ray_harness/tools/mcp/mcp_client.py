"""Strands' import path ``strands.tools.mcp.mcp_client``.

The same objects as :mod:`ray_harness.tools.mcp` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.tools.mcp import MCPClient

__all__ = ("MCPClient",)
