"""``MCPAgentTool``: one tool of an MCP server, as the agent calls it (``MCPClient`` lists them).

The client's module imports this one, to build the tools it lists; this one knows the client only as a
type, and imports it at run time in one place: where a tool built by hand checks its arguments.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import mcp_types
from typing_extensions import override

from ray_harness.middleware.types import ToolResultEvent
from ray_harness.tools._mcp_convert import to_tool_result, to_tool_spec
from ray_harness.tools._mcp_errors import MCPCallCancelled
from ray_harness.tools._mcp_wait import timeout_seconds
from ray_harness.tools.base import HeldSpecBase, RawReturn, ToolContext, error_result, observe_raw
from ray_harness.types.content import ToolUse

if TYPE_CHECKING:
    from ray_harness.tools.mcp import MCPClient

__all__ = ("CANCELLED_TEXT", "MCPAgentTool")

CANCELLED_TEXT = "Tool execution cancelled"


class MCPAgentTool(HeldSpecBase):
    """One tool of an MCP server, callable by the agent.

    Args (Strands' order and names):
        mcp_tool: the tool as the server lists it.
        mcp_client: the client that calls it.
        name_override: the name the model sees (default: the server's name).
        timeout: how long a call may wait for the server's answer (``timedelta`` or seconds; ``None``:
            no limit). A call that takes longer ends with an error result and the server is told to cancel
            it. Settable later: ``tool.timeout = timedelta(seconds=30)``; it ships with the client (a
            RemoteAgent's actor lists the tools again and applies it).
    """

    exposes_raw_call = True  # TOOL_RAW extensions see the server's call result

    def __init__(self, mcp_tool: mcp_types.Tool, mcp_client: MCPClient, name_override: str | None = None,
                 timeout: timedelta | float | None = None) -> None:
        from ray_harness.tools.mcp import MCPClient  # not at the top: that module imports this one (see above)

        if not isinstance(mcp_tool, mcp_types.Tool) or not isinstance(mcp_client, MCPClient):
            raise TypeError("MCPAgentTool(mcp_tool, mcp_client, name_override=None, timeout=None) takes an "
                            "mcp_types.Tool and an MCPClient, in that order")
        timeout_seconds(timeout, "timeout")
        self._client = mcp_client
        self._mcp_tool = mcp_tool
        self._name = name_override or mcp_tool.name
        self._spec = to_tool_spec(mcp_tool, self._name)
        self.timeout = timeout

    @property
    @override
    def tool_type(self) -> str:
        return "mcp"

    @property
    def mcp_tool(self) -> mcp_types.Tool:
        """The tool as the server describes it (its own name, schemas, annotations)."""
        return self._mcp_tool

    @property
    def mcp_client(self) -> MCPClient:
        """The client that calls this tool."""
        return self._client

    def __repr__(self) -> str:
        return f"<mcp tool {self._name} via {self._client!r}>"

    @override
    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        use_id = tool_use["toolUseId"]
        arguments = tool_use.get("input") or {}
        if not isinstance(arguments, dict):
            yield ToolResultEvent(error_result(use_id, f"Error: input of MCP tool '{self._name}' must be a JSON "
                                                       f"object, got {type(arguments).__name__}"))
            return
        try:
            if context._raw_observer is None:
                result = await self._client.call_tool_async(self._mcp_tool.name, arguments,
                                                            read_timeout_seconds=self.timeout,
                                                            cancel_signal=context.cancel_signal)
            else:  # TOOL_RAW extensions see the server's call result (or the call's exception)
                async for event in observe_raw(context, lambda: self._raw_call(arguments, context)):
                    result = event.value
        except MCPCallCancelled:
            yield ToolResultEvent(error_result(use_id, CANCELLED_TEXT))
            return
        except Exception as error:
            yield ToolResultEvent(error_result(use_id, f"Error: MCP tool '{self._name}' failed: {error}"),
                                  exception=error)
            return
        yield ToolResultEvent(to_tool_result(use_id, result))

    async def _raw_call(self, arguments: dict[str, Any], context: ToolContext) -> AsyncGenerator[Any, None]:
        yield RawReturn(await self._client.call_tool_async(self._mcp_tool.name, arguments,
                                                           read_timeout_seconds=self.timeout,
                                                           cancel_signal=context.cancel_signal))
