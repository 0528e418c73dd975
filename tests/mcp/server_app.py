"""A real MCP server for the tests, built with the mcp package's own server API (``MCPServer``).

Run as ``python server_app.py stdio`` or ``python server_app.py http <port>``. When
``MCP_TEST_MARKER_DIR`` is set, the ``slow`` tool writes ``cancelled-<tag>`` there when
the client cancels it (so a test can see that ``notifications/cancelled`` arrived), and
``started-<tag>`` when it begins. When ``MCP_TEST_STARTED_FILE`` is set, the server writes
its process id there on startup (so a test can see whether a server was started at all).
The ``grow`` tool adds a tool at run time and announces the change; ``greet`` is a prompt,
``text://readme`` a resource and ``greeting://{name}`` a resource template.
With ``MCP_TEST_LEGACY=1`` an HTTP server does not answer ``server/discover``: it speaks only the
pre-2026 protocol (``initialize`` handshake, sessions, replies as server-sent events). Over stdio the
mcp package locks the connection to the 2026 protocol at the unanswered probe, so it is for HTTP only.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

server = MCPServer("ray-harness-test-server", log_level="WARNING")


class Sum(BaseModel):
    total: int


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> Sum:
    return Sum(total=a + b)


@server.tool(description="Always fails with the given message.")
def fail(message: str) -> str:
    raise ToolError(message)


@server.tool(description="Sleep, noticing cancellation.")
async def slow(seconds: float, tag: str = "slow") -> str:
    _mark(f"started-{tag}")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _mark(f"cancelled-{tag}")
        raise
    return f"slept {seconds}"


_meetings: dict[str, tuple[list[int], anyio.Event]] = {}


@server.tool(description="Wait until `count` calls with this `group` are inside the tool at once.")
async def meet(group: str, count: int) -> str:
    # Proves concurrency by state, not by timing: calls served one after the other never meet.
    arrived, everyone_in = _meetings.setdefault(group, ([0], anyio.Event()))
    arrived[0] += 1
    if arrived[0] >= count:
        everyone_in.set()
    with anyio.move_on_after(60):
        await everyone_in.wait()
        return "met"
    return "alone"


@server.tool(description="Return a tiny PNG.")
def picture() -> Image:
    return Image(data=PNG, format="png")


@server.tool(description="Kill the server process in the middle of the call.")
async def crash() -> str:
    await anyio.sleep(0.2)
    os._exit(3)


@server.tool(description="Read one HTTP request header (empty over stdio).")
def header(name: str, ctx: Context) -> str:
    headers = ctx.headers or {}
    return headers.get(name.lower(), "")


@server.tool(name="clock.now", description="A dotted name (allowed by MCP, refused by model providers).")
def clock_now() -> str:
    return "tick"


@server.tool(description="Return `size` characters of text.")
def big(size: int) -> str:
    return "x" * size


@server.tool(description="Report the server's process id.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="Add a tool named `name` and announce that the tool list changed.")
async def grow(name: str, ctx: Context) -> str:
    server.add_tool(lambda: f"hello from {name}", name=name, description=f"Added at run time: {name}.")
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()  # to subscriptions/listen streams (2026-07-28)
    else:
        await ctx.session.send_tool_list_changed()  # the pre-2026 notification, pushed unprompted
    return f"added {name}"


@server.prompt(description="Greet someone.")
def greet(name: str) -> str:
    return f"Say hello to {name}."


@server.resource("text://readme", description="A fixed text.", mime_type="text/plain")
def readme() -> str:
    return "read me"


@server.resource("greeting://{name}", description="A greeting per name.")
def greeting(name: str) -> str:
    return f"hello {name}"


def _mark(name: str) -> None:
    marker_dir = os.environ.get("MCP_TEST_MARKER_DIR")
    if marker_dir:
        Path(marker_dir, name).write_text(str(os.getpid()))


def main() -> None:
    started_file = os.environ.get("MCP_TEST_STARTED_FILE")
    if started_file:
        Path(started_file).write_text(str(os.getpid()))
    if os.environ.get("MCP_TEST_LEGACY"):
        server._lowlevel_server._request_handlers.pop("server/discover")  # no public switch for this
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))


if __name__ == "__main__":
    main()
