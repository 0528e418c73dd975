"""``make_mcp_router``: one tool with which the model connects to MCP servers the developer allowed, and uses them.

Strands' ``strands.vended_tools.mcp_router``, for when the model, not the developer, picks the server at run time
(wiring an :class:`~ray_harness.tools.mcp.MCPClient` into ``tools=`` stays the usual way). Its ``command`` is one
of ``connect`` (open a connection named ``connection_id`` to ``server_name``), ``list_connections``,
``list_tools`` (the server's tool specs, under the server's own names), ``call_tool`` (``tool_name`` with
``arguments``; the server's result is the tool's result) and ``disconnect``.

- ``servers`` maps each permitted name to Strands' server entry (``{"command": ..., "args": [...], "env": ...,
  "cwd": ...}`` for stdio, ``{"url": ..., "headers": ...}`` for streamable HTTP, optional ``transport`` and
  ``startup_timeout``; ``${VAR}`` / ``${env:VAR}`` in its strings are read from the environment when it
  connects, ``~`` in ``command`` and ``cwd`` is the home directory), or to an ``MCPClient`` whose configuration
  each connection copies (its ``tool_filter`` also limits what ``list_tools`` shows and ``call_tool`` reaches).
- Connections belong to the calling agent and outlive its invocations, up to ``max_connections`` at once; they
  close on ``disconnect`` or when the agent is garbage collected.
- ``agent.cancel()`` stops a connect, a listing or a call at once (a call's server is told to cancel it).
- The tool pickles (an agent holding it ships to a Ray host) with its server list; open connections stay in the
  process that opened them.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

import logging
import os
import re
import threading
import weakref
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.types.exceptions import RayHarnessError
from ray_harness.types.validation import describe_validation_error
from ray_harness.vended_tools._cancel import unless_cancelled

if TYPE_CHECKING:
    from ray_harness.tools.mcp import MCPClient, MCPClientConfig

__all__ = ("MCP_ROUTER_DESCRIPTION", "MCPRouterToolError", "MCPServerConfig", "make_mcp_router")

logger = logging.getLogger(__name__)

# The model reads Strands' description (and the permitted server names).
MCP_ROUTER_DESCRIPTION = (
    "Connects to Model Context Protocol (MCP) servers at runtime to discover and invoke their tools. "
    "'connect' opens a connection to a permitted server. "
    "'list_connections' returns all currently open connection IDs. "
    "'list_tools' returns the tools the connected server exposes, including their names and input schemas. "
    "'call_tool' invokes a named tool on a connected server and returns its result. "
    "'disconnect' closes a connection. "
    "Multiple servers can be connected simultaneously. "
    "Use connection_id to identify which connection to use for list_tools, call_tool, and disconnect."
)
"""What the model reads of the tool, before the permitted server names."""
_DEFAULT_MAX_CONNECTIONS = 10
_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")


class MCPServerConfig(TypedDict, total=False):
    """One server entry (the keys of Strands' ``MCPServerConfig`` that ray_harness's ``MCPClient`` supports)."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str
    url: str
    headers: dict[str, str]
    transport: str
    startup_timeout: float


class MCPRouterToolError(RayHarnessError, RuntimeError):
    """A command the router refuses or that failed (the model reads the message)."""


class _Entry(BaseModel):
    """A checked server entry; what ships with the tool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = Field(default=None, min_length=1)
    headers: dict[str, str] | None = None
    transport: Literal["stdio", "streamable-http"] | None = None
    startup_timeout: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_transport(self) -> "_Entry":
        transport = self.transport or ("stdio" if self.command is not None and self.url is None else
                                       "streamable-http" if self.url is not None and self.command is None else None)
        if transport is None:
            raise ValueError("give either 'command' (stdio) or 'url' (streamable HTTP), or set 'transport'")
        if transport == "stdio" and (self.command is None or self.headers is not None):
            raise ValueError("a stdio server needs 'command' and takes no 'headers'")
        if transport == "streamable-http" and (self.url is None or self.args or self.env is not None
                                               or self.cwd is not None):
            raise ValueError("a streamable HTTP server needs 'url' and takes no 'args', 'env' or 'cwd'")
        return self.model_copy(update={"transport": transport})


class _Connections:
    """Each agent's open connections (``connection_id`` → client); none of them pickles."""

    def __init__(self) -> None:
        self._by_agent: weakref.WeakKeyDictionary[Any, dict[str, MCPClient]] = weakref.WeakKeyDictionary()

    def __getstate__(self) -> dict[str, Any]:
        return {}  # the connections stay in the process that opened them

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def of(self, agent: Any) -> dict[str, "MCPClient"]:
        if agent is None:
            raise MCPRouterToolError("the mcp_router tool keeps its connections per agent: call it from an agent")
        connections = self._by_agent.get(agent)
        if connections is None:
            connections = self._by_agent[agent] = {}
            # An agent dropped without disconnecting closes its servers (off the collecting thread's back).
            weakref.finalize(agent, _close_all, connections)
        return connections


def make_mcp_router(*, name: str = "mcp_router", description: str | None = None,
                    servers: "dict[str, MCPServerConfig | MCPClient]", max_connections: int = _DEFAULT_MAX_CONNECTIONS
                    ) -> DecoratedFunctionTool:
    """An MCP router tool for the ``servers`` only.

    Args:
        name: The tool's name.
        description: What the model reads (default: Strands' description and the permitted server names).
        servers: The permitted servers by name: each a server entry (see :class:`MCPServerConfig`) or an
            ``MCPClient`` (its configuration is copied). Must not be empty.
        max_connections: The most connections one agent may hold open at once (default 10).

    Raises:
        ValueError: An argument is invalid (the message names it, and the server entry's field).
    """
    permitted = _checked_servers(servers)
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
        raise ValueError(f"max_connections must be an integer of at least 1, got {max_connections!r}")
    if description is None:
        description = (f"{MCP_ROUTER_DESCRIPTION} Permitted server names: "
                       f"{', '.join(repr(server) for server in sorted(permitted))}.")
    elif not isinstance(description, str) or not description:
        raise ValueError(f"description must be a non-empty string or None, got {description!r}")
    connections = _Connections()

    @tool(name=name, description=description, context=True)
    async def mcp_router_tool(command: Literal["connect", "list_connections", "list_tools", "call_tool",
                                               "disconnect"],
                              tool_context: ToolContext, connection_id: str | None = None,
                              server_name: str | None = None, tool_name: str | None = None,
                              arguments: dict[str, Any] | None = None) -> Any:
        """Open, inspect, use and close connections to MCP servers.

        Args:
            command: ``connect``, ``list_connections``, ``list_tools``, ``call_tool`` or ``disconnect``.
            connection_id: A name for the connection (unique among the agent's open ones); required by every
                command but ``list_connections``.
            server_name: The server to connect to; required by ``connect``.
            tool_name: The server's tool to call; required by ``call_tool``.
            arguments: The tool's arguments, for ``call_tool``.
            tool_context: Injected by the agent (not an input).
        """
        opened = connections.of(tool_context.agent)
        if command == "list_connections":
            return ", ".join(sorted(opened))
        if not connection_id:
            raise MCPRouterToolError("`connection_id` is required for all commands except 'list_connections'")
        if command == "connect":
            if not server_name:
                raise MCPRouterToolError("`server_name` is required for command='connect'")
            return await _connect(opened, permitted, server_name, connection_id, max_connections, tool_context)
        return await _on_connection(opened, connection_id, command, tool_name, arguments, tool_context)

    return mcp_router_tool


# -- the factory's checks -------------------------------------------------------------------------------------


def _checked_servers(servers: Any) -> "dict[str, _Entry | MCPClientConfig]":
    from ray_harness.tools.mcp import MCPClient

    if not isinstance(servers, dict) or not servers:
        raise ValueError(f"servers must be a non-empty dict of server names to server entries, got {servers!r}")
    checked: dict[str, _Entry | MCPClientConfig] = {}
    for server, entry in servers.items():
        if not isinstance(server, str) or not server:
            raise ValueError(f"servers: every server name must be a non-empty string, got {server!r}")
        if isinstance(entry, MCPClient):
            checked[server] = entry.config
            continue
        if not isinstance(entry, dict):
            raise ValueError(f"servers[{server!r}] must be a server entry (a dict) or an MCPClient, got "
                             f"{type(entry).__name__}")
        try:
            checked[server] = _Entry.model_validate(entry)
        except ValidationError as error:
            raise ValueError(describe_validation_error(error, f"servers[{server!r}]")) from None
    return checked


# -- commands -------------------------------------------------------------------------------------------------


async def _connect(opened: dict[str, "MCPClient"], permitted: "dict[str, _Entry | MCPClientConfig]",
                   server_name: str, connection_id: str, max_connections: int, context: ToolContext) -> str:
    from ray_harness.tools.mcp import MCPClientInitializationError

    if server_name not in permitted:
        raise MCPRouterToolError(f"Server {server_name!r} is not on the MCP server allowlist: "
                                 f"{', '.join(sorted(permitted))}")
    _check_room(opened, connection_id, max_connections)
    client = _client(server_name, permitted[server_name])
    try:
        # The first listing starts the server and proves it answers; the tools are cached for list_tools.
        await unless_cancelled(client.load_tools(), context.cancel_signal,
                               MCPRouterToolError(f"Connecting to {server_name!r} was cancelled"))
    except BaseException as error:
        _close_soon(client)
        if isinstance(error, MCPClientInitializationError):
            raise MCPRouterToolError(f"Server {server_name!r} failed to start: {error}") from error
        raise
    try:
        _check_room(opened, connection_id, max_connections)  # again: another call may have connected meanwhile
    except MCPRouterToolError:
        _close_soon(client)
        raise
    opened[connection_id] = client
    logger.debug("connection_id=<%s>, server_name=<%s> | opened MCP connection", connection_id, server_name)
    return f"Successfully connected to {server_name} as {connection_id!r}"


async def _on_connection(opened: dict[str, "MCPClient"], connection_id: str, command: str, tool_name: str | None,
                         arguments: dict[str, Any] | None, context: ToolContext) -> Any:
    """``list_tools``, ``call_tool`` or ``disconnect`` on an open connection."""
    client = opened.get(connection_id)
    if client is None:
        raise MCPRouterToolError(f"No active connection for id {connection_id!r}")
    if command == "list_tools":
        return await _list_tools(client, context)
    if command == "call_tool":
        if not tool_name:
            raise MCPRouterToolError("`tool_name` is required for command='call_tool'")
        return await _call(client, tool_name, arguments or {}, context)
    opened.pop(connection_id, None)
    await _close(client)
    return "Successfully disconnected"


def _check_room(opened: dict[str, "MCPClient"], connection_id: str, max_connections: int) -> None:
    if connection_id in opened:
        raise MCPRouterToolError(f"Connection {connection_id!r} already exists. Disconnect it first or use a "
                                 "different connection_id.")
    if len(opened) >= max_connections:
        raise MCPRouterToolError(f"Connection limit of {max_connections} reached. Disconnect one of the active "
                                 f"connections before opening a new one. Active connection_ids: "
                                 f"{', '.join(sorted(opened))}")


async def _list_tools(client: "MCPClient", context: ToolContext) -> list[dict[str, Any]]:
    from ray_harness.tools.mcp import MCPAgentTool

    tools = await unless_cancelled(client.load_tools(), context.cancel_signal,
                                   MCPRouterToolError("Listing the tools was cancelled"))
    # Under the server's own names (not a prefixed or sanitized one), so call_tool takes them as they are.
    return [{**tool.tool_spec, "name": tool.mcp_tool.name} for tool in tools if isinstance(tool, MCPAgentTool)]


async def _call(client: "MCPClient", tool_name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
    from ray_harness.tools._mcp_convert import to_tool_result
    from ray_harness.tools.mcp import MCPCallCancelled

    keep = client.config.tool_filter
    if keep is not None and not keep(tool_name):
        raise MCPRouterToolError(f"Tool {tool_name!r} is not offered by this connection")
    try:
        result = await client.call_tool_async(tool_name, arguments, cancel_signal=context.cancel_signal)
    except MCPCallCancelled as error:
        raise MCPRouterToolError(f"The call to {tool_name!r} was cancelled") from error
    except Exception as error:  # a lost connection, a timeout, a protocol error: the model reads which
        raise MCPRouterToolError(f"MCP tool {tool_name!r} failed: {error}") from error
    return to_tool_result(str(context.tool_use["toolUseId"]), result)


# -- clients --------------------------------------------------------------------------------------------------


def _client(server_name: str, entry: "_Entry | MCPClientConfig") -> "MCPClient":
    """A new client for one connection, its entry's variables read from this process's environment."""
    from ray_harness.tools.mcp import MCPClient, MCPClientConfig

    if isinstance(entry, MCPClientConfig):
        return MCPClient(**{field: getattr(entry, field) for field in MCPClientConfig.model_fields})
    values = _interpolated(server_name, entry.model_dump())
    try:
        if values["transport"] == "stdio":
            command = [os.path.expanduser(values["command"]), *values["args"]]
            cwd = os.path.expanduser(values["cwd"]) if values["cwd"] else None
            return MCPClient(command=command, env=values["env"], cwd=cwd, startup_timeout=values["startup_timeout"])
        return MCPClient(url=values["url"], headers=values["headers"], startup_timeout=values["startup_timeout"])
    except ValueError as error:  # e.g. a URL that is not http(s) once its variables are filled in
        raise MCPRouterToolError(f"Server {server_name!r}: {error}") from error


def _interpolated(server_name: str, value: Any) -> Any:
    if isinstance(value, str):
        def variable(match: re.Match[str]) -> str:
            found = os.environ.get(match.group(1))
            if found is None:
                raise MCPRouterToolError(f"Server {server_name!r}: the environment variable {match.group(1)!r} "
                                         "is not set")
            return found

        return _VARIABLE.sub(variable, value)
    if isinstance(value, list):
        return [_interpolated(server_name, item) for item in value]
    if isinstance(value, dict):
        return {key: _interpolated(server_name, item) for key, item in value.items()}
    return value


async def _close(client: "MCPClient") -> None:
    import asyncio

    await asyncio.to_thread(client.close)  # waits for a stdio server to exit: off the event loop


def _close_soon(client: "MCPClient") -> None:
    """Close without waiting (a failed or cancelled connect, a collected agent)."""
    threading.Thread(target=_quiet_close, args=(client,), name="mcp-router-close", daemon=True).start()


def _quiet_close(client: "MCPClient") -> None:
    try:
        client.close()
    except Exception:
        logger.debug("failed to close an MCP connection", exc_info=True)


def _close_all(connections: dict[str, "MCPClient"]) -> None:
    for connection_id, client in list(connections.items()):
        logger.debug("connection_id=<%s> | closing MCP connection of a collected agent", connection_id)
        _close_soon(client)
    connections.clear()
