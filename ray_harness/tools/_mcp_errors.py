"""The MCP client's errors.

``ray_harness.tools.mcp`` re-exports the public ones (and gives them its name: see there);
``MCPClientInitializationError`` is defined with the other exceptions (Strands' ``strands.types.exceptions`` has it).
"""

from __future__ import annotations

from ray_harness.types.exceptions import MCPClientInitializationError, RayHarnessError

__all__ = ("CallTimedOut", "MCPCallCancelled", "MCPClientInitializationError")


class MCPCallCancelled(RayHarnessError):
    """The agent was cancelled while an MCP call was running (the server was sent ``notifications/cancelled``)."""


class CallTimedOut(RayHarnessError, TimeoutError):
    """A call outlived its read timeout; the server was sent ``notifications/cancelled``."""
