"""``MCPClient``: the tools of a Model Context Protocol server, as a tool provider.

```python
from ray_harness import Agent
from ray_harness.tools.mcp import MCPClient

with MCPClient(command=["uvx", "mcp-server-fetch"], prefix="web") as fetch:
    agent = Agent(model, tools=[fetch])      # nothing connects yet
    agent("Summarize https://example.com")   # the first invocation starts the server
```

The client is lazy: creating it, or an ``Agent`` with it, connects to nothing;
the agent's first invocation loads the tools (``load_tools()``) and a start
failure raises there, before the model is called, naming the command or URL.
The session lives on a thread of its own (see ``_mcp_session``), so the client
works from any event loop and from sync code. The client pickles as its
configuration (plus the ``timeout`` set on each of its listed tools), so in a Ray
actor the connection opens in the actor's process.

Errors: ``MCPClientInitializationError`` (the server could not be started or
reached, or a ``tool_filter`` raised). Failures during a call (a tool error,
the server dying, a lost connection) never raise into the agent: they become
error tool results, and a call that may have reached the server is never sent
twice. A call that surely did not reach it is sent to a new session: a stdio
server that exited between calls is started again, and an HTTP server that no
longer knows the session (it restarted) gets a new one, as the MCP spec asks.

Strands' names work too: ``start()``/``stop()``, ``read_timeout_seconds=`` on calls and
``MCPAgentTool.timeout`` (a hung call ends with an error result and the server is told to cancel it),
``on_tools_changed=`` and the prompt and resource methods (``list_prompts_sync`` ...). The tool list is
listed again after ``notifications/tools/list_changed`` or a new session.

Tool names that model providers would refuse (dots, spaces, more than 64
characters: all fine in MCP) are published sanitised (``published_names``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shlex
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from functools import partial
from types import TracebackType
from typing import Any, TextIO, TypeVar

import anyio
import httpx2
import mcp_types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import AnyUrl, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ray_harness.tools._mcp_convert import published_names, to_tool_result
from ray_harness.tools._mcp_errors import CallTimedOut, MCPCallCancelled, MCPClientInitializationError
from ray_harness.tools._mcp_listen import follow_tool_changes
from ray_harness.tools._mcp_protocol import list_all_tools, negotiate_auto, page_params, session_expired
from ray_harness.tools._mcp_session import SessionGone, SessionRunner, WatchedDispatcher, describe_error
from ray_harness.tools._mcp_tool import CANCELLED_TEXT as CANCELLED_TEXT, MCPAgentTool  # the text, as before
from ray_harness.tools._mcp_wait import settled, timeout_seconds, wait_for_call
from ray_harness.tools.base import AgentTool, error_result
from ray_harness.types.content import ToolResult
from ray_harness.types.validation import describe_validation_error

__all__ = ("MCPAgentTool", "MCPCallCancelled", "MCPClient", "MCPClientConfig", "MCPClientInitializationError")

T = TypeVar("T")
logger = logging.getLogger(__name__)

_START_GRACE_SECONDS = 5.0  # beyond startup_timeout, for the session thread to report its own timeout
_REFRESH_TIMEOUT = 60.0  # seconds for listing the tools after a change announcement
_PREFIX = re.compile(r"^[A-Za-z0-9_-]{1,48}$")

# Defined in private modules, these carry this module's name, as httpx's classes carry httpx's: it is where users
# import them from and what tracebacks and reprs show, and pickles name them here as before they moved.
for _public in (MCPAgentTool, MCPCallCancelled, MCPClientInitializationError):
    _public.__module__ = __name__
del _public


class MCPClientConfig(BaseModel):
    """What an ``MCPClient`` is: everything needed to (re)connect, and nothing live."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    command: list[str] | None = Field(default=None, min_length=1)
    """argv of a stdio server, e.g. ``["python", "server.py"]``."""
    url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    """Endpoint of a streamable-HTTP server, e.g. ``http://127.0.0.1:8000/mcp``."""
    headers: dict[str, str] | None = None
    """HTTP headers sent with every request (``url`` only)."""
    env: dict[str, str] | None = None
    """Extra environment for a stdio server, on top of the mcp package's safe defaults (``command`` only)."""
    cwd: str | None = None
    """Working directory of a stdio server (``command`` only)."""
    prefix: str | None = Field(default=None, pattern=_PREFIX.pattern)
    """Tools are published as ``<prefix>_<name>``."""
    tool_filter: Callable[[str], bool] | None = None
    """Keeps the server tools (by the server's own name) for which it returns true."""
    startup_timeout: float = Field(default=30.0, gt=0)
    """Seconds allowed for starting the server and the ``initialize`` handshake."""
    on_tools_changed: Callable[[list[str], list[Any]], None] | None = None
    """Called as ``(previous_names, refreshed_tools)`` after the server announced a tool-list change and the
    client listed the tools again (on a thread of the client's)."""

    @model_validator(mode="after")
    def _one_transport(self) -> MCPClientConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command=[argv...] (stdio) or url=... (streamable HTTP)")
        if self.command is not None and not self.command[0]:
            raise ValueError("command[0] must name the program to run")
        if self.url is not None and (self.env is not None or self.cwd is not None):
            raise ValueError("env= and cwd= apply to stdio servers (command=...), not to url=...")
        if self.command is not None and self.headers is not None:
            raise ValueError("headers= applies to HTTP servers (url=...), not to command=...")
        return self

    @property
    def label(self) -> str:
        """How errors name the server: the command line or the URL."""
        if self.command is not None:
            return f"command {shlex.join(self.command)!r}"
        return f"at URL {self.url}"


class MCPClient:
    """A tool provider backed by one MCP server (stdio subprocess or streamable HTTP).

    Args:
        command: argv of a stdio server; the client spawns it and ``close()`` ends it.
        url: endpoint of a streamable-HTTP server (instead of ``command``).
        headers: HTTP headers for every request to ``url`` (e.g. ``Authorization``).
        env: extra environment variables for a stdio server (the mcp package passes only a safe
            default set, such as ``PATH`` and ``HOME``, from ours).
        cwd: working directory of a stdio server.
        prefix: publish tools as ``<prefix>_<name>`` (to keep several servers apart).
        tool_filter: keep only tools whose server-side name passes this predicate.
        startup_timeout: seconds allowed for the server to start and answer ``initialize``.
        on_tools_changed: Strands' hook: called as ``(previous_names, refreshed_tools)`` after the server
            announced a change of its tool list (``notifications/tools/list_changed``) and the client
            listed the tools again. The agent's own tools do not change by themselves.
    """

    def __init__(
        self,
        command: list[str] | None = None,
        *,
        url: str | None = None,
        headers: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        prefix: str | None = None,
        tool_filter: Callable[[str], bool] | None = None,
        startup_timeout: float = 30.0,
        on_tools_changed: Callable[[list[str], list[Any]], None] | None = None,
    ) -> None:
        _refuse_other_command_forms(command)
        try:
            config = MCPClientConfig(command=command, url=url, headers=headers, env=env, cwd=cwd, prefix=prefix,
                                     tool_filter=tool_filter, startup_timeout=startup_timeout,
                                     on_tools_changed=on_tools_changed)
        except ValidationError as error:
            raise ValueError(f"invalid MCPClient: {describe_validation_error(error, 'MCPClient')}") from None
        self._config = config
        self._init_live_state()

    def _init_live_state(self) -> None:
        self._lock = threading.Lock()
        self._runner: SessionRunner | None = None
        self._tools: list[MCPAgentTool] | None = None
        # Bumped when the server's tool list may have changed (notifications/tools/list_changed, a new
        # session); the cached tools are stale when they were listed at an older generation.
        self._tools_generation = 0
        self._listed_generation = -1
        self._refreshing = False  # an on_tools_changed refresh is running
        self._refresh_again = False  # another change was announced meanwhile
        self._shipped_timeouts: dict[str, timedelta | float] = {}  # tool name -> timeout set before pickling

    # -- configuration and pickling ------------------------------------------------------------------

    @property
    def config(self) -> MCPClientConfig:
        """The client's configuration (what pickles and ships into Ray actors)."""
        return self._config

    def __getstate__(self) -> dict[str, Any]:
        # Only the configuration travels: the session, its thread and its server stay where they are. So do the
        # timeouts set on its listed tools (``tool.timeout``): the tools are listed again where it arrives.
        timeouts = self._shipped_timeouts if self._tools is None else {
            tool.tool_name: tool.timeout for tool in self._tools if tool.timeout is not None}
        return {"config": self._config, "tool_timeouts": dict(timeouts)} if timeouts else {"config": self._config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._config = state["config"]
        self._init_live_state()
        self._shipped_timeouts = dict(state.get("tool_timeouts") or {})

    def __repr__(self) -> str:
        return f"MCPClient({self._config.label})"

    # -- lifecycle ------------------------------------------------------------------------------------

    def __enter__(self) -> MCPClient:
        return self  # lazy: the first call connects (Strands' __enter__ connects at once; start() does here)

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> MCPClient:
        """Connect now (Strands' spelling) instead of at the first call; returns the client.

        Raises ``MCPClientInitializationError`` when the server cannot be started or reached. Calling it
        on a connected client does nothing (Strands raises there).
        """
        async def connect() -> None:
            await self._session_runner()

        _run_sync(connect())
        return self

    def stop(self, exc_type: type[BaseException] | None = None, exc_val: BaseException | None = None,
             exc_tb: TracebackType | None = None) -> None:
        """``close()`` under Strands' name and signature (the arguments are ignored)."""
        self.close()

    def close(self) -> None:
        """End the session (a stdio server exits). Idempotent; a later call would start a new session."""
        with self._lock:
            runner, self._runner = self._runner, None
        if runner is not None:
            runner.stop(wait=True)

    # -- the ToolProvider protocol ----------------------------------------------------------------------

    async def load_tools(self) -> list[AgentTool]:
        """Connect (first time only) and list the server's tools as ``AgentTool``s, filtered and prefixed.

        The list is cached until the server announces a change (``notifications/tools/list_changed``), or
        the session ended or was replaced (the server exited or restarted); then the next call lists the
        tools again (starting a new session if needed). Tools the server
        still describes the same way stay the same objects (a ``timeout`` set on one survives).
        """
        runner = self._runner
        if (self._tools is None or self._listed_generation != self._tools_generation
                or (runner is not None and runner.lost is not None)):  # the server went away: it may come back changed
            await self._list_tools()
        assert self._tools is not None
        return list(self._tools)

    async def _list_tools(self) -> None:
        generation: list[int] = []
        try:
            listed = await self._run(partial(self._list_all_tools, generation))
        except MCPClientInitializationError:
            raise
        except Exception as error:
            raise MCPClientInitializationError(
                f"could not list the tools of MCP server {self._config.label}: {describe_error(error)}") from error
        self._adopt(listed, generation[-1])

    async def _list_all_tools(self, generation: list[int], session: ClientSession) -> list[mcp_types.Tool]:
        # Read on the session, after any new session was counted: a change announced while the list is on
        # its way leaves the result stale, so the next load_tools() lists again.
        generation.append(self._tools_generation)
        return await list_all_tools(session)

    def _adopt(self, listed: list[mcp_types.Tool], generation: int) -> None:
        kept = [tool for tool in listed if self._keeps(tool.name)]
        names = published_names([tool.name for tool in kept], self._config.prefix)
        known = {tool.tool_name: tool for tool in self._tools or []}
        tools: list[MCPAgentTool] = []
        for mcp_tool, name in zip(kept, names, strict=True):
            same = known.get(name)
            tools.append(same if same is not None and same.mcp_tool == mcp_tool
                         else MCPAgentTool(mcp_tool, self, name, timeout=self._shipped_timeouts.get(name)))
        self._tools = tools
        self._listed_generation = generation

    def _tool_list_changed(self) -> None:
        self._tools_generation += 1  # one writer at a time: the session thread, or _session_runner's lock

    def _tools_announced(self) -> None:
        """The server sent ``notifications/tools/list_changed`` (runs on the session thread)."""
        self._tool_list_changed()
        if self._config.on_tools_changed is None:
            return  # the next load_tools() lists again
        with self._lock:
            if self._refreshing:
                self._refresh_again = True  # a burst of notifications costs at most one more listing
                return
            self._refreshing = True
        # A thread of its own: the callback may block, and the session thread must keep serving.
        threading.Thread(target=self._refresh, name="ray_harness-mcp-refresh", daemon=True).start()

    def _refresh(self) -> None:
        callback = self._config.on_tools_changed
        assert callback is not None
        while True:
            with self._lock:
                runner, self._refresh_again = self._runner, False
            try:
                # Only from the live session: after close() (or a lost session) nothing is started for this.
                if runner is not None and runner.lost is None:
                    generation: list[int] = []
                    future = runner.submit(partial(self._list_all_tools, generation))
                    try:
                        listed = future.result(_REFRESH_TIMEOUT)
                    finally:
                        future.cancel()  # no-op once done; else the listing is abandoned, not left running
                    previous = [tool.tool_name for tool in self._tools or []]
                    self._adopt(listed, generation[-1])
                    callback(previous, list(self._tools or []))
            except Exception:  # a failed refresh leaves the cache stale, so the next load_tools() lists again
                if runner is not None and runner.lost is None:  # not merely the session ending under it
                    logger.warning("refreshing the tools of MCP server %s after a change failed",
                                   self._config.label, exc_info=True)
            with self._lock:
                if not self._refresh_again:
                    self._refreshing = False
                    return

    def _keeps(self, name: str) -> bool:
        keep = self._config.tool_filter
        if keep is None:
            return True
        try:
            return bool(keep(name))
        except Exception as error:
            # A bug in the filter is the user's, not the server's, but it keeps the agent from knowing its
            # tools either way: say which filter failed on which tool (Strands lets the bare exception out).
            filter_name = getattr(keep, "__qualname__", None) or repr(keep)
            raise MCPClientInitializationError(
                f"tool_filter {filter_name!r} raised on tool {name!r} of MCP server {self._config.label}: "
                f"{describe_error(error)}") from error

    def list_tools_sync(self) -> list[AgentTool]:
        """The server's tools as the server lists them now (Strands' spelling): every page, filtered and prefixed.

        Like Strands it asks the server each time (and refreshes what ``load_tools()`` returns). Unlike
        Strands there is no ``pagination_token`` (all pages come at once) and no need to enter
        ``with client:`` first; ``Agent(tools=[client])`` loads the tools by itself.
        """

        async def listed() -> list[AgentTool]:
            await self._list_tools()
            return list(self._tools or [])

        result: list[AgentTool] = _run_sync(listed())
        return result

    def call_tool_sync(self, tool_use_id: str, name: str, arguments: dict[str, Any] | None = None,
                       read_timeout_seconds: timedelta | float | None = None) -> ToolResult:
        """Call the server's tool ``name`` (its own, unprefixed name) from sync code, as Strands does.

        Returns the converted tool result; a failure (a timeout, the server dying, a lost connection) is an
        error result. ``read_timeout_seconds`` bounds the wait for the answer (see ``call_tool_async``).
        """
        return _run_sync(self._call_to_result(tool_use_id, name, arguments or {}, read_timeout_seconds))

    async def _call_to_result(self, tool_use_id: str, name: str, arguments: dict[str, Any],
                              read_timeout_seconds: timedelta | float | None) -> ToolResult:
        try:
            result = await self.call_tool_async(name, arguments, read_timeout_seconds=read_timeout_seconds)
            return to_tool_result(tool_use_id, result)
        except Exception as error:
            return error_result(tool_use_id, f"Error: MCP tool '{name}' failed: {error}")

    async def call_tool_async(self, name: str, arguments: dict[str, Any], *,
                              read_timeout_seconds: timedelta | float | None = None,
                              cancel_signal: threading.Event | None = None) -> mcp_types.CallToolResult:
        """Call the server's tool ``name`` (its own, unprefixed name).

        ``read_timeout_seconds`` (a ``timedelta`` as in Strands, or seconds) bounds the wait for the
        answer; when it passes the server is sent ``notifications/cancelled`` and ``TimeoutError`` is
        raised (the session stays usable). Raises ``MCPCallCancelled`` when ``cancel_signal`` is set
        meanwhile (the server is told to stop), ``ConnectionError`` when the connection is lost,
        ``MCPError`` for a protocol-level error.
        """
        seconds = timeout_seconds(read_timeout_seconds, "read_timeout_seconds")

        async def call(session: ClientSession) -> mcp_types.CallToolResult:
            try:
                return await session.call_tool(name, arguments, read_timeout_seconds=seconds)
            except MCPError as error:
                if error.code != REQUEST_TIMEOUT or seconds is None:
                    raise
                raise CallTimedOut(f"no answer from MCP tool {name!r} within {seconds:g}s (the server was told "
                                  f"to cancel the call)") from error

        return await self._run(call, cancel_signal)

    # -- prompts and resources (Strands' names; they return the mcp result types) ------------------------

    def list_prompts_sync(self, pagination_token: str | None = None) -> mcp_types.ListPromptsResult:
        """One page of the server's prompts; pass the result's ``next_cursor`` to get the next one."""

        async def work(session: ClientSession) -> mcp_types.ListPromptsResult:
            return await session.list_prompts(params=page_params(pagination_token))

        return self._run_sync_on_session(work)

    def get_prompt_sync(self, prompt_id: str, args: dict[str, Any]) -> mcp_types.GetPromptResult:
        """The prompt ``prompt_id`` rendered with ``args``."""

        async def work(session: ClientSession) -> mcp_types.GetPromptResult:
            return await session.get_prompt(prompt_id, arguments=args)

        return self._run_sync_on_session(work)

    def list_resources_sync(self, pagination_token: str | None = None) -> mcp_types.ListResourcesResult:
        """One page of the server's resources; pass the result's ``next_cursor`` to get the next one."""

        async def work(session: ClientSession) -> mcp_types.ListResourcesResult:
            return await session.list_resources(params=page_params(pagination_token))

        return self._run_sync_on_session(work)

    def read_resource_sync(self, uri: AnyUrl | str) -> mcp_types.ReadResourceResult:
        """The contents of the resource at ``uri``."""

        async def work(session: ClientSession) -> mcp_types.ReadResourceResult:
            return await session.read_resource(str(uri))

        return self._run_sync_on_session(work)

    def list_resource_templates_sync(self, pagination_token: str | None = None
                                     ) -> mcp_types.ListResourceTemplatesResult:
        """One page of the server's resource templates (URI patterns such as ``greeting://{name}``)."""

        async def work(session: ClientSession) -> mcp_types.ListResourceTemplatesResult:
            return await session.list_resource_templates(params=page_params(pagination_token))

        return self._run_sync_on_session(work)

    def _run_sync_on_session(self, work: Callable[[ClientSession], Awaitable[T]]) -> T:
        result: T = _run_sync(self._run(work))
        return result

    # -- plumbing ---------------------------------------------------------------------------------------

    async def _run(self, work: Callable[[ClientSession], Awaitable[T]],
                   cancel_signal: threading.Event | None = None) -> T:
        runner = await self._session_runner(cancel_signal)
        try:
            return await self._run_on(runner, work, cancel_signal)
        except SessionGone:
            pass  # the session ended before the request went out (a stdio server exited while idle): resend it
        except MCPError as error:
            if self._config.url is None or not session_expired(error):
                raise
            # The server no longer knows our session (it restarted, or expired it) and rejected the request
            # unrun; the spec tells a client to start a new session then, so the request is sent once more.
            runner.mark_lost(f"the server ended the session ({error.message})")
        return await self._run_on(await self._session_runner(cancel_signal), work, cancel_signal)

    async def _run_on(self, runner: SessionRunner, work: Callable[[ClientSession], Awaitable[T]],
                      cancel_signal: threading.Event | None) -> T:
        future = runner.submit(work)
        try:
            return await wait_for_call(future, runner, cancel_signal)
        except (ConnectionError, CallTimedOut):
            raise  # a timed-out call leaves the session usable (TimeoutError is an OSError too)
        except MCPError as error:
            if error.code != CONNECTION_CLOSED:
                raise
            runner.mark_lost(error.message)
            # The request may have reached the server before it went away, so it is not sent again.
            raise ConnectionError(f"MCP server {runner.label} closed the connection before answering "
                                  f"({error.message}); the call may or may not have run") from error
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, httpx2.HTTPError) as error:
            runner.mark_lost(describe_error(error))
            raise ConnectionError(f"MCP server {runner.label}: {describe_error(error)}") from error

    async def _session_runner(self, cancel_signal: threading.Event | None = None) -> SessionRunner:
        """The live session, started now if there is none (or the last one was lost).

        Raises ``MCPCallCancelled`` when ``cancel_signal`` is set while the server is starting (the start goes
        on, for the next call).
        """
        with self._lock:
            runner = self._runner
            if runner is None or runner.lost is not None:
                runner = SessionRunner(self._config.label, self._connect)
                self._runner = runner
                self._tool_list_changed()  # a new session may be a restarted server with other tools
                runner.start()
        try:
            await settled(runner.ready, self._config.startup_timeout + _START_GRACE_SECONDS, cancel_signal)
        except (asyncio.CancelledError, MCPCallCancelled):
            raise  # our caller gave up; the session may still serve the next call
        except Exception as error:
            self._discard(runner)
            raise MCPClientInitializationError(_start_failure(self._config, error)) from error
        return runner

    def _discard(self, runner: SessionRunner) -> None:
        with self._lock:
            if self._runner is runner:
                self._runner = None
        runner.stop(wait=False)

    async def _connect(self, stack: contextlib.AsyncExitStack, on_end: Callable[[], None]) -> ClientSession:
        """Runs on the session thread: open the transport and the session, then negotiate the protocol."""
        config = self._config
        if config.command is not None:
            params = StdioServerParameters(command=config.command[0], args=config.command[1:], env=config.env,
                                           cwd=config.cwd)
            read, write = await stack.enter_async_context(stdio_client(params, errlog=_server_errlog()))
        else:
            assert config.url is not None
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=config.headers, follow_redirects=True, timeout=httpx2.Timeout(30.0, read=300.0)))
            read, write = await stack.enter_async_context(streamable_http_client(config.url, http_client=http))

        async def on_message(message: object) -> None:
            if isinstance(message, mcp_types.ToolListChangedNotification):
                self._tools_announced()

        session = await stack.enter_async_context(ClientSession(dispatcher=WatchedDispatcher(read, write, on_end),
                                                                message_handler=on_message))
        with anyio.fail_after(config.startup_timeout):
            # The official client's connect policy: server/discover (the 2026-07-28 protocol, whose replies
            # are plain JSON) and the legacy initialize handshake when the server predates it. Legacy
            # streamable HTTP replies as server-sent events, which httpx2 caps at 1 MiB each.
            await negotiate_auto(session)
        await follow_tool_changes(stack, session, self._tool_list_changed, config.startup_timeout)
        return session


def _run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    from ray_harness.agent.agent import run_sync  # here: the agent package imports the tools package

    result: T = run_sync(coroutine)
    return result


def _refuse_other_command_forms(command: object) -> None:
    # The two forms users bring from elsewhere get a message that says what to pass instead.
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError:  # unbalanced quotes: the example need not be exact
            argv = command.split()
        raise ValueError(f"invalid MCPClient: command= takes the argv as a list, e.g. command={argv!r}")
    if callable(command):
        raise ValueError("invalid MCPClient: a transport callable (Strands' MCPClient(lambda: stdio_client(...))) is "
                         "not supported; pass command=[argv...] for a stdio server or url=... for streamable HTTP")


def _start_failure(config: MCPClientConfig, error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        cause = f"no answer to initialize within {config.startup_timeout:g}s"
    else:
        cause = describe_error(error)
    verb = "start" if config.command is not None else "connect to"
    hint = ""
    if config.url is not None and config.url.split("?", 1)[0].rstrip("/").endswith("/sse"):
        hint = " (MCPClient speaks streamable HTTP, usually at /mcp; legacy SSE-only servers are not supported)"
    return f"could not {verb} MCP server {config.label}: {cause}{hint}"


def _server_errlog() -> TextIO:
    # The server's stderr goes to ours; under pytest's capture sys.stderr may have no file descriptor.
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ or sys.stderr
    return sys.stderr
