"""MCPClient against a real MCP server over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import pickle
import socket
import threading
import time

import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools.mcp import MCPCallCancelled, MCPClient, MCPClientInitializationError
from tests.mcp.conftest import HttpServer, free_port, tool_results, wait_for_file


async def test_tools_are_listed_with_prefix_and_filter(http_server: HttpServer) -> None:
    with MCPClient(url=http_server.url, prefix="web", tool_filter=lambda name: name.startswith("e")) as client:
        tools = await client.load_tools()
        assert [t.tool_name for t in tools] == ["web_echo"]
        assert tools[0].tool_spec["inputSchema"]["json"]["properties"]["text"]["type"] == "string"


async def test_agent_call_sends_the_configured_headers(http_server: HttpServer) -> None:
    with MCPClient(url=http_server.url, headers={"X-Team": "harness"}) as client:
        model = ScriptedModel(tool_call("header", {"name": "X-Team"}), tool_call("add", {"a": 20, "b": 22}),
                              text("done"))
        agent = Agent(model, tools=[client])
        result = await agent.invoke_async("go")
        assert str(result) == "done\n"
        header, added = tool_results(agent)
        assert header["content"][0] == {"text": "harness"}
        assert added["status"] == "success"
        assert added["content"][-1] == {"json": {"total": 42}}


async def test_a_tool_that_raises_gives_an_error_result(http_server: HttpServer) -> None:
    with MCPClient(url=http_server.url) as client:
        agent = Agent(ScriptedModel(tool_call("fail", {"message": "no quota"}), text("sorry")), tools=[client])
        await agent.invoke_async("go")
        (tool_result,) = tool_results(agent)
        assert tool_result["status"] == "error"
        assert "no quota" in tool_result["content"][0]["text"]


async def test_cancel_ends_a_running_http_call_and_tells_the_server(http_server: HttpServer) -> None:
    with MCPClient(url=http_server.url) as client:
        agent = Agent(ScriptedModel(tool_call("slow", {"seconds": 60, "tag": "http"})), tools=[client])
        run = asyncio.create_task(agent.invoke_async("go"))
        await wait_for_file(http_server.marker_dir / "started-http", timeout=60)

        started = time.monotonic()
        agent.cancel()
        result = await asyncio.wait_for(run, 30)

        assert time.monotonic() - started < 30  # the call would sleep 60 s
        assert result.stop_reason == "cancelled"
        assert tool_results(agent)[0]["content"] == [{"text": "Tool execution cancelled"}]
        # The server was told: its handler saw the cancellation (notifications/cancelled).
        await wait_for_file(http_server.marker_dir / "cancelled-http")


async def test_a_server_that_dies_mid_call_gives_an_error_and_the_agent_keeps_working(
        own_http_server: HttpServer) -> None:
    with MCPClient(url=own_http_server.url) as client:
        model = ScriptedModel(tool_call("crash", {}), tool_call("echo", {"text": "anyone?"}), text("the server is gone"))
        agent = Agent(model, tools=[client])

        started = time.monotonic()
        result = await agent.invoke_async("go")

        assert time.monotonic() - started < 60  # two server starts included; no hang on the dead one
        assert str(result) == "the server is gone\n"
        crashed, retried = tool_results(agent)
        assert crashed["status"] == "error"
        assert crashed["content"][0]["text"].startswith("Error: MCP tool 'crash' failed:")
        # Nothing listens any more: the retry is an error result naming the URL, not a hang or a raise.
        assert retried["status"] == "error"
        assert own_http_server.url in retried["content"][0]["text"]


async def test_a_restarted_server_gets_a_new_session_instead_of_failing_every_call(
        legacy_http_server: HttpServer) -> None:
    own_http_server = legacy_http_server  # sessions are a pre-2026 protocol feature
    with MCPClient(url=own_http_server.url) as client:
        model = ScriptedModel(tool_call("echo", {"text": "before"}), text("ok"),
                              tool_call("echo", {"text": "after"}), text("ok"))
        agent = Agent(model, tools=[client])
        await agent.invoke_async("go")
        own_http_server.restart()  # e.g. a redeploy: the new process answers 404 to the old session id

        await agent.invoke_async("again")

        before, after = tool_results(agent)
        assert before["content"][0] == {"text": "echo: before"}
        # The server never ran the rejected call, so it is sent again on a new session (as the spec asks).
        assert after["status"] == "success", after
        assert after["content"][0] == {"text": "echo: after"}


async def test_a_result_over_one_mebibyte_arrives_whole(http_server: HttpServer) -> None:
    # A pre-2026 server replies as a server-sent event, which httpx2 caps at 1 MiB: the client negotiates the
    # 2026 protocol (plain JSON replies) when the server offers it, as the mcp package's own Client does.
    with MCPClient(url=http_server.url) as client:
        result = client.call_tool_sync("id", "big", {"size": 3 * 1024 * 1024})
    assert result["status"] == "success", str(result)[:300]
    assert len(result["content"][0]["text"]) == 3 * 1024 * 1024


async def test_a_server_speaking_only_the_pre_2026_protocol_still_works(legacy_http_server: HttpServer) -> None:
    with MCPClient(url=legacy_http_server.url, headers={"X-Team": "old"}) as client:
        agent = Agent(ScriptedModel(tool_call("header", {"name": "x-team"}), text("ok")), tools=[client])
        await agent.invoke_async("go")
    assert tool_results(agent)[0]["content"][0] == {"text": "old"}


async def test_start_failure_raises_before_the_model_is_called_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    model = ScriptedModel(text("never"))
    agent = Agent(model, tools=[MCPClient(url=url)])
    with pytest.raises(MCPClientInitializationError, match=f"could not connect to MCP server at URL {url}: "):
        await agent.invoke_async("hi")
    assert model.calls == []


async def test_a_legacy_sse_url_fails_with_a_hint_about_the_transport() -> None:
    url = f"http://127.0.0.1:{free_port()}/sse"
    with pytest.raises(MCPClientInitializationError, match="legacy SSE-only servers are not supported"):
        await MCPClient(url=url, startup_timeout=5).load_tools()


async def test_pickle_round_trip_keeps_the_configuration_and_reconnects(http_server: HttpServer) -> None:
    client = MCPClient(url=http_server.url, headers={"X-Team": "clone"}, prefix="p", startup_timeout=7)
    await client.load_tools()  # live session: must not travel
    try:
        clone = pickle.loads(pickle.dumps(client))
    finally:
        client.close()
    assert clone.config == client.config
    with clone:
        agent = Agent(ScriptedModel(tool_call("p_header", {"name": "x-team"}), text("ok")), tools=[clone])
        await agent.invoke_async("go")
        assert tool_results(agent)[0]["content"][0] == {"text": "clone"}


def test_cancel_while_an_http_server_does_not_answer_initialize_ends_the_invocation() -> None:
    with socket.socket() as silent:  # accepts the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        client = MCPClient(url=f"http://127.0.0.1:{silent.getsockname()[1]}/mcp", startup_timeout=120)
        model = ScriptedModel(text("never"))
        agent = Agent(model, tools=[client])

        def cancel_once_connected() -> None:
            connection, _ = silent.accept()
            agent.cancel()
            connection.close()

        canceller = threading.Thread(target=cancel_once_connected)
        canceller.start()
        try:
            result = agent("hi")
        finally:
            canceller.join()
            client.close()
        assert result.stop_reason == "cancelled"
        assert model.calls == []
        assert agent.messages == []


async def test_a_call_cancelled_while_its_server_starts_raises_cancelled_at_once() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        client = MCPClient(url=f"http://127.0.0.1:{silent.getsockname()[1]}/mcp", startup_timeout=120)
        cancel = threading.Event()
        cancel.set()
        try:
            # Before the fix the call waited out startup_timeout (120 s) and then failed to connect.
            with pytest.raises(MCPCallCancelled, match="while the MCP server was starting"):
                await client.call_tool_async("echo", {"text": "x"}, cancel_signal=cancel)
        finally:
            client.close()
