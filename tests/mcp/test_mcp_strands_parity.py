"""What a Strands ``MCPClient`` user calls, against a real MCP server: read timeouts, tool-list changes,
prompts and resources, ``start()``/``stop()``."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import AnyUrl

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools.mcp import MCPAgentTool, MCPClient, MCPClientInitializationError
from tests.mcp.conftest import STDIO_COMMAND, HttpServer, alive, tool_results, wait_for_file


async def _names(client: MCPClient) -> set[str]:
    return {tool.tool_name for tool in await client.load_tools()}


async def _until_names(client: MCPClient, test: Any, timeout: float = 30.0) -> set[str]:
    """load_tools() until its names pass ``test`` (the client learns of changes in the background)."""
    deadline = time.monotonic() + timeout
    while not test(names := await _names(client)):
        assert time.monotonic() < deadline, f"the tool list never changed: {sorted(names)}"
        await asyncio.sleep(0.05)
    return names


# -- read timeouts ------------------------------------------------------------------------------------------


def test_call_tool_sync_read_timeout_ends_a_hung_call_and_the_session_stays_usable(tmp_path: Path) -> None:
    with MCPClient(command=STDIO_COMMAND, env={"MCP_TEST_MARKER_DIR": str(tmp_path)}) as client:
        server_pid = client.call_tool_sync("p1", "pid")["content"][0]["text"]

        hung = client.call_tool_sync("t1", "slow", {"seconds": 600, "tag": "hung"},
                                     read_timeout_seconds=timedelta(seconds=1))

        assert hung["toolUseId"] == "t1"
        assert hung["status"] == "error"
        assert hung["content"][0]["text"] == ("Error: MCP tool 'slow' failed: no answer from MCP tool 'slow' within "
                                              "1s (the server was told to cancel the call)")
        asyncio.run(wait_for_file(tmp_path / "cancelled-hung"))  # notifications/cancelled reached the server
        # The same session (the same server process) answers the next call.
        assert client.call_tool_sync("p2", "pid")["content"][0]["text"] == server_pid


async def test_call_tool_async_read_timeout_raises_timeout_error() -> None:
    with MCPClient(command=STDIO_COMMAND) as client:
        with pytest.raises(TimeoutError, match=r"no answer from MCP tool 'slow' within 0\.5s"):
            await client.call_tool_async("slow", {"seconds": 600}, read_timeout_seconds=0.5)
        result = await client.call_tool_async("echo", {"text": "still here"}, read_timeout_seconds=30)
        assert result.content[0].text == "echo: still here"  # type: ignore[union-attr]


def test_agent_tool_timeout_gives_an_error_result_and_a_valid_history(tmp_path: Path) -> None:
    with MCPClient(command=STDIO_COMMAND, env={"MCP_TEST_MARKER_DIR": str(tmp_path)}) as client:
        tools = client.list_tools_sync()
        slow = next(tool for tool in tools if tool.tool_name == "slow")
        assert isinstance(slow, MCPAgentTool)
        slow.timeout = timedelta(seconds=1)  # as Strands users set it
        agent = Agent(ScriptedModel(tool_call("slow", {"seconds": 600, "tag": "agent"}), text("gave up")),
                      tools=tools)

        result = agent("wait forever")

        assert str(result) == "gave up\n"
        (tool_result,) = tool_results(agent)
        assert tool_result["status"] == "error"
        assert "within 1s" in tool_result["content"][0]["text"]
        assert [message["role"] for message in agent.messages] == ["user", "assistant", "user", "assistant"]
        asyncio.run(wait_for_file(tmp_path / "cancelled-agent"))


async def test_mcp_agent_tool_takes_strands_arguments() -> None:
    with MCPClient(command=STDIO_COMMAND) as client:
        (echo,) = [tool for tool in await client.load_tools() if tool.tool_name == "echo"]
        assert isinstance(echo, MCPAgentTool)
        assert echo.timeout is None
        assert echo.mcp_client is client

        renamed = MCPAgentTool(echo.mcp_tool, client, name_override="say", timeout=timedelta(seconds=5))

        assert (renamed.tool_name, renamed.tool_spec["name"], renamed.timeout) == ("say", "say", timedelta(seconds=5))
        with pytest.raises(TypeError, match="in that order"):
            MCPAgentTool(client, echo.mcp_tool)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout must be positive"):
            MCPAgentTool(echo.mcp_tool, client, timeout=0)


# -- tool-list changes --------------------------------------------------------------------------------------


async def test_a_tools_list_changed_notification_refreshes_load_tools_over_stdio() -> None:
    with MCPClient(command=STDIO_COMMAND, prefix="srv") as client:
        before = {tool.tool_name: tool for tool in await client.load_tools()}

        await client.call_tool_async("grow", {"name": "newbie"})
        names = await _until_names(client, lambda names: "srv_newbie" in names)

        assert names == set(before) | {"srv_newbie"}
        after = {tool.tool_name: tool for tool in await client.load_tools()}
        assert all(after[name] is tool for name, tool in before.items())  # unchanged tools stay the same objects
        result = await client.call_tool_async("newbie", {})
        assert result.content[0].text == "hello from newbie"  # type: ignore[union-attr]


async def test_a_tools_list_changed_notification_refreshes_load_tools_from_a_legacy_http_server(
        legacy_http_server: HttpServer) -> None:
    with MCPClient(url=legacy_http_server.url) as client:
        assert "legacy_extra" not in await _names(client)
        await client.call_tool_async("grow", {"name": "legacy_extra"})
        await _until_names(client, lambda names: "legacy_extra" in names)


@pytest.mark.parametrize("transport", ["stdio", "http", "legacy-http"])
def test_on_tools_changed_is_called_with_the_previous_names_and_the_refreshed_tools(
        transport: str, http_server: HttpServer, legacy_http_server: HttpServer) -> None:
    calls: queue.Queue[tuple[list[str], list[Any]]] = queue.Queue()

    def changed(previous_names: list[str], refreshed_tools: list[Any]) -> None:
        calls.put((previous_names, refreshed_tools))

    added = f"added_{transport.replace('-', '_')}"
    target: dict[str, Any] = {"stdio": {"command": STDIO_COMMAND}, "http": {"url": http_server.url},
                              "legacy-http": {"url": legacy_http_server.url}}[transport]
    with MCPClient(**target, prefix="p", on_tools_changed=changed) as client:
        before = client.list_tools_sync()

        client.call_tool_sync("g", "grow", {"name": added})

        previous_names, refreshed = calls.get(timeout=30)
        assert previous_names == [tool.tool_name for tool in before]
        assert [tool.tool_name for tool in refreshed] == [*previous_names, f"p_{added}"]
        assert asyncio.run(client.load_tools()) == refreshed  # the cache was refreshed too
        assert all(isinstance(tool, MCPAgentTool) for tool in refreshed)


def test_list_tools_sync_asks_the_server_each_time() -> None:
    with MCPClient(command=STDIO_COMMAND) as client:
        assert "fresh" not in {tool.tool_name for tool in client.list_tools_sync()}
        client.call_tool_sync("g", "grow", {"name": "fresh"})
        assert "fresh" in {tool.tool_name for tool in client.list_tools_sync()}  # no notification needed


async def test_a_restarted_stdio_server_is_listed_again() -> None:
    with MCPClient(command=STDIO_COMMAND) as client:
        await client.call_tool_async("grow", {"name": "ephemeral"})
        assert "ephemeral" in {tool.tool_name for tool in client.list_tools_sync()}
        pid = int((await client.call_tool_async("pid", {})).content[0].text)  # type: ignore[union-attr]

        os.kill(pid, signal.SIGKILL)
        names = await _until_names(client, lambda names: "ephemeral" not in names)

        assert "echo" in names  # listed from a new server process
        new_pid = int((await client.call_tool_async("pid", {})).content[0].text)  # type: ignore[union-attr]
        assert new_pid != pid and not alive(pid)


async def test_a_restarted_http_server_is_listed_again(own_http_server: HttpServer) -> None:
    with MCPClient(url=own_http_server.url) as client:
        await client.call_tool_async("grow", {"name": "ephemeral"})
        await _until_names(client, lambda names: "ephemeral" in names)

        own_http_server.restart()

        names = await _until_names(client, lambda names: "ephemeral" not in names)
        assert "echo" in names


# -- prompts and resources ----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_prompts_and_resources_return_the_mcp_types(transport: str, http_server: HttpServer) -> None:
    client = MCPClient(command=STDIO_COMMAND) if transport == "stdio" else MCPClient(url=http_server.url)
    with client:
        prompts = client.list_prompts_sync()
        assert isinstance(prompts, mcp_types.ListPromptsResult)
        assert [prompt.name for prompt in prompts.prompts] == ["greet"]
        assert prompts.next_cursor is None

        prompt = client.get_prompt_sync("greet", {"name": "Ann"})
        assert isinstance(prompt, mcp_types.GetPromptResult)
        assert prompt.messages[0].content.text == "Say hello to Ann."  # type: ignore[union-attr]

        resources = client.list_resources_sync()
        assert isinstance(resources, mcp_types.ListResourcesResult)
        assert [str(resource.uri) for resource in resources.resources] == ["text://readme"]

        for uri in ("text://readme", AnyUrl("text://readme")):
            read = client.read_resource_sync(uri)
            assert isinstance(read, mcp_types.ReadResourceResult)
            assert read.contents[0].text == "read me"  # type: ignore[union-attr]

        templates = client.list_resource_templates_sync()
        assert isinstance(templates, mcp_types.ListResourceTemplatesResult)
        assert [template.uri_template for template in templates.resource_templates] == ["greeting://{name}"]
        assert client.read_resource_sync("greeting://bob").contents[0].text == "hello bob"  # type: ignore[union-attr]

        with pytest.raises(MCPError):
            client.get_prompt_sync("no-such-prompt", {})


# -- start() / stop() ---------------------------------------------------------------------------------------


def test_start_connects_now_and_stop_ends_the_server(tmp_path: Path) -> None:
    started = tmp_path / "started"
    client = MCPClient(command=STDIO_COMMAND, env={"MCP_TEST_STARTED_FILE": str(started)})
    assert not started.exists()

    assert client.start() is client

    pid = int(started.read_text())  # the server runs before any call
    assert alive(pid)
    assert client.start() is client  # already connected: nothing happens
    assert client.call_tool_sync("p", "pid")["content"][0]["text"] == str(pid)
    client.stop(None, None, None)  # Strands' signature
    assert not alive(pid)
    client.stop()  # idempotent, arguments optional


def test_start_failure_raises_initialization_error() -> None:
    client = MCPClient(command=["/nonexistent/mcp-server"], startup_timeout=5)
    with pytest.raises(MCPClientInitializationError, match="/nonexistent/mcp-server"):
        client.start()


def test_an_agent_whose_mcp_server_fails_to_start_raises_a_tool_provider_exception() -> None:
    # Strands code catches this as ToolProviderException (its MCP client's load_tools wraps the start failure).
    from ray_harness.types.exceptions import ToolProviderException

    agent = Agent(ScriptedModel([text("never")]), tools=[MCPClient(command=["/nonexistent/mcp-server"],
                                                                    startup_timeout=5)])
    with pytest.raises(ToolProviderException, match="/nonexistent/mcp-server"):
        agent("hi")
