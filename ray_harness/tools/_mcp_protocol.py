"""What the MCP client says over a session: the connect policy, listing in pages, and the session-expired answer."""

from __future__ import annotations

import mcp_types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_REQUEST

try:  # the official Client's connect policy (server/discover, else the legacy handshake); it is not exported
    from mcp.client._probe import negotiate_auto
except ImportError:  # pragma: no cover - a later mcp moved it: the legacy handshake alone still works

    async def negotiate_auto(session: ClientSession) -> None:
        await session.initialize()


__all__ = ("list_all_tools", "negotiate_auto", "page_params", "session_expired")

_SESSION_NOT_FOUND = -32001  # the TypeScript SDK's code for a request naming a session the server does not know


def session_expired(error: MCPError) -> bool:
    """Whether the server rejected a request because it does not know the session (HTTP 404 with a session id).

    The mcp client reports that 404 as the server's JSON-RPC error ("Session not found" from the Python SDK,
    code -32001 from the TypeScript one) or, without a JSON body, as its own "Session terminated".
    """
    message = error.message.lower()
    return error.code in (INVALID_REQUEST, _SESSION_NOT_FOUND) and "session" in message and (
        "not found" in message or "terminated" in message)


def page_params(cursor: str | None) -> mcp_types.PaginatedRequestParams | None:
    return mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None


async def list_all_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(params=page_params(cursor))
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
