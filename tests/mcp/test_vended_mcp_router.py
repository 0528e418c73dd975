"""``make_mcp_router`` against the real MCP test server (stdio and streamable HTTP) and, when set up, the reference
time server (``RAY_HARNESS_MCP_TIME_SERVER``)."""

from __future__ import annotations

import gc
import os
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls
from ray_harness.tools.mcp import MCPClient
from ray_harness.vended_tools import make_mcp_router
from ray_harness.vended_tools.mcp_router import MCP_ROUTER_DESCRIPTION
from tests.mcp.conftest import SERVER_APP, STDIO_COMMAND, HttpServer, alive, not_crash, tool_results

STDIO_ENTRY: dict[str, Any] = {"command": sys.executable, "args": [SERVER_APP, "stdio"]}


def router_results(*calls: tuple[str, dict[str, Any]], servers: dict[str, Any], **options: Any) -> list[Any]:
    """The results of ``calls`` made one per turn (calls of one turn run concurrently)."""
    model = ScriptedModel(*(tool_call(name, inputs) for name, inputs in calls), text("done"))
    agent = Agent(model, tools=[make_mcp_router(servers=servers, **options)])
    agent("go")
    return [(result["status"], *result["content"][0].values()) for result in tool_results(agent)]


def route(command: str, **inputs: Any) -> tuple[str, dict[str, Any]]:
    return ("mcp_router", {"command": command, **inputs})


def test_connect_list_call_and_disconnect_across_two_servers(http_server: HttpServer, tmp_path: Path) -> None:
    started = tmp_path / "pid"
    servers = {"local": {**STDIO_ENTRY, "env": {"MCP_TEST_STARTED_FILE": str(started)}},
               "remote": {"url": http_server.url}}
    model = ScriptedModel(
        tool_calls(route("connect", server_name="local", connection_id="a"),
                   route("connect", server_name="remote", connection_id="b")),
        tool_calls(route("list_connections"), route("list_tools", connection_id="a"),
                   route("call_tool", connection_id="a", tool_name="echo", arguments={"text": "hi"}),
                   route("call_tool", connection_id="b", tool_name="clock.now"),
                   route("call_tool", connection_id="b", tool_name="add", arguments={"a": 2, "b": 3}),
                   route("call_tool", connection_id="a", tool_name="fail", arguments={"message": "nope"})),
        tool_call("mcp_router", {"command": "disconnect", "connection_id": "a"}),
        tool_call("mcp_router", {"command": "list_connections"}),
        text("done"))
    tool = make_mcp_router(servers=servers)
    assert tool.tool_spec["description"] == f"{MCP_ROUTER_DESCRIPTION} Permitted server names: 'local', 'remote'."
    agent = Agent(model, tools=[tool])
    agent("go")
    (connect_a, connect_b, listed, tools, echoed, dotted, added, failed, disconnected, left) = tool_results(agent)
    assert connect_a["content"] == [{"text": "Successfully connected to local as 'a'"}]
    assert connect_b["content"] == [{"text": "Successfully connected to remote as 'b'"}]
    assert listed["content"] == [{"text": "a, b"}]
    specs = {spec["name"]: spec for spec in tools["content"][0]["json"]}
    assert {"echo", "add", "clock.now", "slow"} <= set(specs)  # the server's own names, dotted one included
    assert specs["echo"]["inputSchema"]["json"]["required"] == ["text"]
    assert echoed["content"][0] == {"text": "echo: hi"}
    assert dotted["status"] == "success"
    assert added["content"][-1] == {"json": {"total": 5}}  # structured content, as a wired MCPClient gives it
    assert failed["status"] == "error" and "nope" in failed["content"][0]["text"]
    assert disconnected["content"] == [{"text": "Successfully disconnected"}]
    assert left["content"] == [{"text": "b"}]
    assert not alive(int(started.read_text()))  # disconnect ended the stdio server


def test_what_the_model_gets_wrong_is_an_error_result() -> None:
    results = router_results(
        route("connect", server_name="elsewhere", connection_id="x"),
        route("connect", connection_id="x"),
        route("list_tools"),
        route("list_tools", connection_id="never"),
        route("connect", server_name="local", connection_id="one"),
        route("connect", server_name="local", connection_id="one"),
        route("connect", server_name="local", connection_id="two"),
        route("call_tool", connection_id="one"),
        route("call_tool", connection_id="one", tool_name="crash"),
        route("ping"),
        servers={"local": MCPClient(command=STDIO_COMMAND, tool_filter=not_crash)}, max_connections=1)
    (elsewhere, no_server, no_id, unknown, ok, again, full, no_tool, filtered, bad_command) = results
    assert elsewhere == ("error", "Error: Server 'elsewhere' is not on the MCP server allowlist: local")
    assert no_server == ("error", "Error: `server_name` is required for command='connect'")
    assert no_id == ("error", "Error: `connection_id` is required for all commands except 'list_connections'")
    assert unknown == ("error", "Error: No active connection for id 'never'")
    assert ok == ("success", "Successfully connected to local as 'one'")
    assert again[0] == "error" and "Connection 'one' already exists" in again[1]
    assert full[0] == "error" and "Connection limit of 1 reached" in full[1] and "Active connection_ids: one" in full[1]
    assert no_tool == ("error", "Error: `tool_name` is required for command='call_tool'")
    assert filtered == ("error", "Error: Tool 'crash' is not offered by this connection")  # the client's filter
    assert bad_command[0] == "error" and "input.command" in bad_command[1]


def test_a_server_that_cannot_start_and_a_missing_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RH_ROUTER_TEST_ARG", raising=False)
    servers = {"broken": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"], "startup_timeout": 20},
               "needs_env": {**STDIO_ENTRY, "args": [SERVER_APP, "${env:RH_ROUTER_TEST_ARG}"]}}
    broken, missing = router_results(route("connect", server_name="broken", connection_id="b"),
                                     route("connect", server_name="needs_env", connection_id="n"), servers=servers)
    assert broken[0] == "error" and broken[1].startswith("Error: Server 'broken' failed to start:")
    assert missing == ("error", "Error: Server 'needs_env': the environment variable 'RH_ROUTER_TEST_ARG' is not set")
    monkeypatch.setenv("RH_ROUTER_TEST_ARG", "stdio")  # read when connecting, where the tool runs
    (connected,) = router_results(route("connect", server_name="needs_env", connection_id="n"), servers=servers)
    assert connected == ("success", "Successfully connected to needs_env as 'n'")


def test_a_cancel_ends_a_running_call_and_the_server_is_told(tmp_path: Path) -> None:
    servers = {"local": {**STDIO_ENTRY, "env": {"MCP_TEST_MARKER_DIR": str(tmp_path)}}}
    model = ScriptedModel(
        tool_call("mcp_router", {"command": "connect", "server_name": "local", "connection_id": "c"}),
        tool_call("mcp_router", {"command": "call_tool", "connection_id": "c", "tool_name": "slow",
                                 "arguments": {"seconds": 60, "tag": "router"}}),
        text("unused"))
    agent = Agent(model, tools=[make_mcp_router(servers=servers)])

    def cancel_once_started() -> None:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started-router").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        agent.cancel()

    canceller = threading.Thread(target=cancel_once_started)
    canceller.start()
    result = agent("go")
    canceller.join()
    assert result.stop_reason == "cancelled"
    assert tool_results(agent)[-1]["status"] == "error"
    deadline = time.monotonic() + 60
    while not (tmp_path / "cancelled-router").exists() and time.monotonic() < deadline:  # notifications/cancelled
        time.sleep(0.02)
    assert (tmp_path / "cancelled-router").exists()


def test_connections_belong_to_one_agent_and_close_with_it(tmp_path: Path) -> None:
    started = tmp_path / "pid"
    tool = make_mcp_router(servers={"local": {**STDIO_ENTRY, "env": {"MCP_TEST_STARTED_FILE": str(started)}}})
    first = Agent(ScriptedModel(tool_call("mcp_router", {"command": "connect", "server_name": "local",
                                                         "connection_id": "mine"}), text("ok")), tools=[tool])
    first("go")
    other = Agent(ScriptedModel(tool_call("mcp_router", {"command": "list_connections"}), text("ok")), tools=[tool])
    other("go")
    assert tool_results(other)[0]["content"] == [{"text": ""}]  # the first agent's connection is not its
    pid = int(started.read_text())
    assert alive(pid)
    del first
    gc.collect()
    deadline = time.monotonic() + 30
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)  # the collected agent's server was closed


def test_the_tool_ships_and_connects_on_the_copy(http_server: HttpServer) -> None:
    tool = make_mcp_router(servers={"remote": {"url": http_server.url},
                                    "filtered": MCPClient(command=STDIO_COMMAND, tool_filter=not_crash)})
    connect = ScriptedModel(tool_call("mcp_router", {"command": "connect", "server_name": "remote",
                                                     "connection_id": "r"}), text("ok"))
    original = Agent(connect, tools=[tool])
    original("go")
    model = ScriptedModel(tool_call(*route("list_connections")),
                          tool_call(*route("connect", server_name="remote", connection_id="r")),
                          tool_call(*route("call_tool", connection_id="r", tool_name="echo",
                                           arguments={"text": "shipped"})), text("done"))
    copy = cloudpickle.loads(cloudpickle.dumps(Agent(model, tools=[tool])))
    copy("go")
    listed, connected, echoed = tool_results(copy)
    assert listed["content"] == [{"text": ""}]  # open connections stay where they were opened
    assert connected["status"] == "success" and echoed["content"][0] == {"text": "echo: shipped"}


@pytest.mark.skipif(not os.environ.get("RAY_HARNESS_MCP_TIME_SERVER"),
                    reason="RAY_HARNESS_MCP_TIME_SERVER (the reference mcp-server-time) is not set up")
def test_the_reference_time_server() -> None:
    argv = shlex.split(os.environ["RAY_HARNESS_MCP_TIME_SERVER"])
    tools, now = router_results(
        route("connect", server_name="time", connection_id="t"), route("list_tools", connection_id="t"),
        route("call_tool", connection_id="t", tool_name="get_current_time", arguments={"timezone": "UTC"}),
        servers={"time": {"command": argv[0], "args": argv[1:]}})[1:]
    assert {spec["name"] for spec in tools[1]} >= {"get_current_time", "convert_time"}
    assert now[0] == "success" and "UTC" in str(now[1])


def test_bad_factory_arguments_are_named() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"servers": {}}, "servers must be a non-empty dict"),
        ({"servers": {"a": "python server.py"}}, r"servers\['a'\] must be a server entry"),
        ({"servers": {"a": {}}}, r"servers\['a'\]: .*give either 'command'"),
        ({"servers": {"a": {"command": "x", "url": "http://y"}}}, r"servers\['a'\]: .*give either"),
        ({"servers": {"a": {"url": "http://y", "args": ["z"]}}}, r"servers\['a'\]: .*a streamable HTTP server"),
        ({"servers": {"a": {"command": "x", "transport": "sse"}}}, r"servers\['a'\]\.transport"),
        ({"servers": {"a": {"command": "x", "auth": {}}}}, r"servers\['a'\]\.auth"),
        ({"servers": {"a": {"command": "x", "startup_timeout": 0}}}, r"servers\['a'\]\.startup_timeout"),
        ({"servers": {"a": STDIO_ENTRY}, "max_connections": 0}, "max_connections"),
        ({"servers": {"a": STDIO_ENTRY}, "max_connections": True}, "max_connections"),
        ({"servers": {"a": STDIO_ENTRY}, "description": ""}, "description"),
    ]
    for arguments, named in cases:
        with pytest.raises(ValueError, match=named):
            make_mcp_router(**arguments)
