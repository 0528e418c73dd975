"""The MCP client's errors.

``ray_harness.tools.mcp`` re-exports the public ones (and gives them its name: see there).
"""

from __future__ import annotations

from ray_harness.types.exceptions import RayHarnessError, ToolProviderException

__all__ = ("CallTimedOut", "MCPCallCancelled", "MCPClientInitializationError")


class MCPClientInitializationError(ToolProviderException, RuntimeError):
    """The MCP server could not be started or reached; the message names the command or URL.

    A ``ToolProviderException``: an agent whose MCP server fails to start raises it from its first run, and
    Strands code catches it there as ``ToolProviderException``.
    """


class MCPCallCancelled(RayHarnessError):
    """The agent was cancelled while an MCP call was running (the server was sent ``notifications/cancelled``)."""


class CallTimedOut(RayHarnessError, TimeoutError):
    """A call outlived its read timeout; the server was sent ``notifications/cancelled``."""
