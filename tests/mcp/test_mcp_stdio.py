"""MCPClient against a real MCP server spawned over stdio."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls
from ray_harness.tools.mcp import MCPAgentTool, MCPClient, MCPClientInitializationError
from tests.mcp.conftest import STDIO_COMMAND, alive, tool_results, wait_for_file


async def test_tools_are_listed_with_prefix_filter_and_specs() -> None:
    with MCPClient(command=STDIO_COMMAND, prefix="calc", tool_filter=lambda name: name in {"add", "echo"}) as client:
        tools = await client.load_tools()
        assert sorted(t.tool_name for t in tools) == ["calc_add", "calc_echo"]
        add = next(t for t in tools if t.tool_name == "calc_add")
        assert isinstance(add, MCPAgentTool)
        assert add.tool_type == "mcp"
        assert add.mcp_tool.name == "add"
        spec = add.tool_spec
        assert spec["name"] == "calc_add"
        assert spec["description"] == "Add two integers."
        assert spec["inputSchema"]["json"]["required"] == ["a", "b"]
        assert spec["inputSchema"]["json"]["properties"]["a"]["type"] == "integer"
        assert await client.load_tools() == tools  # loaded once, same tool objects


def test_strands_sync_pattern_lists_the_tools_and_calls_one() -> None:
    # Strands' usual form: `with client: tools = client.list_tools_sync(); Agent(tools=tools)`.
    with MCPClient(command=STDIO_COMMAND, prefix="calc", tool_filter=lambda name: name in {"add", "crash"}) as client:
        tools = client.list_tools_sync()
        assert sorted(t.tool_name for t in tools) == ["calc_add", "calc_crash"]
        agent = Agent(ScriptedModel(tool_call("calc_add", {"a": 1, "b": 2}), text("3")), tools=tools)
        agent("1+2?")
        assert tool_results(agent)[0]["content"][-1] == {"json": {"total": 3}}

        assert client.call_tool_sync("id-1", "add", {"a": 2, "b": 2}) == {
            "toolUseId": "id-1", "status": "success", "content": [{"text": '{\n  "total": 4\n}'}, {"json": {"total": 4}}]}
        crashed = client.call_tool_sync("id-2", "crash")
        assert crashed["status"] == "error"
        assert crashed["content"][0]["text"].startswith("Error: MCP tool 'crash' failed:")


def test_a_name_providers_refuse_is_published_sanitized_and_called_by_its_own_name(
        shared_stdio: MCPClient) -> None:
    agent = Agent(ScriptedModel(tool_call("srv_clock_now", {}), text("done")), tools=[shared_stdio])

    agent("what time is it?")

    assert "srv_clock_now" in agent.tool_names
    assert agent.tool_registry.get("srv_clock_now").mcp_tool.name == "clock.now"
    (tool_result,) = tool_results(agent)
    assert tool_result["content"][0] == {"text": "tick"}


def test_agent_calls_a_tool_with_arguments_from_the_model(shared_stdio: MCPClient) -> None:
    model = ScriptedModel(tool_call("srv_add", {"a": 2, "b": 3}), text("5"))
    agent = Agent(model, tools=[shared_stdio])

    result = agent("2+3?")

    assert str(result) == "5\n"
    assert "srv_add" in model.calls[0].tool_names
    (tool_result,) = tool_results(agent)
    assert tool_result["status"] == "success"
    assert tool_result["content"] == [{"text": '{\n  "total": 5\n}'}, {"json": {"total": 5}}]


async def test_image_results_reach_the_model_as_image_blocks(shared_stdio: MCPClient) -> None:
    agent = Agent(ScriptedModel(tool_call("srv_picture", {}), text("a pixel")), tools=[shared_stdio])
    await agent.invoke_async("draw")
    (tool_result,) = tool_results(agent)
    (block,) = tool_result["content"]
    assert block["image"]["format"] == "png"
    assert block["image"]["source"]["bytes"].startswith(b"\x89PNG")


async def test_a_tool_that_raises_gives_an_error_result(shared_stdio: MCPClient) -> None:
    agent = Agent(ScriptedModel(tool_call("srv_fail", {"message": "disk on fire"}), text("sorry")),
                  tools=[shared_stdio])
    result = await agent.invoke_async("go")
    assert str(result) == "sorry\n"
    (tool_result,) = tool_results(agent)
    assert tool_result["status"] == "error"
    (block,) = tool_result["content"]
    assert "disk on fire" in block["text"]


async def test_server_side_argument_validation_errors_are_error_results(shared_stdio: MCPClient) -> None:
    agent = Agent(ScriptedModel(tool_call("srv_add", {"a": "not a number"}), text("ok")), tools=[shared_stdio])
    await agent.invoke_async("go")
    (tool_result,) = tool_results(agent)
    assert tool_result["status"] == "error"


async def test_calls_of_one_batch_run_concurrently_on_one_session(shared_stdio: MCPClient) -> None:
    group = f"batch-{time.monotonic_ns()}"
    batch = tool_calls(("srv_meet", {"group": group, "count": 2}), ("srv_meet", {"group": group, "count": 2}))
    agent = Agent(ScriptedModel(batch, text("both done")), tools=[shared_stdio])
    await agent.invoke_async("go")
    # Both calls were inside the server at the same time; one after the other, the first would wait alone.
    assert [r["content"][0] for r in tool_results(agent)] == [{"text": "met"}] * 2


def test_cancel_from_another_thread_ends_a_running_call_at_once(tmp_path: Path) -> None:
    client = MCPClient(command=STDIO_COMMAND, env={"MCP_TEST_MARKER_DIR": str(tmp_path)})
    agent = Agent(ScriptedModel(tool_call("slow", {"seconds": 60, "tag": "thread"})), tools=[client])

    def cancel_once_started() -> None:
        deadline = time.monotonic() + 20
        while not (tmp_path / "started-thread").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        agent.cancel()

    canceller = threading.Thread(target=cancel_once_started)
    canceller.start()
    try:
        result = agent("go")
        cancelled_at = time.monotonic()
        canceller.join()
        assert result.stop_reason == "cancelled"
        (tool_result,) = tool_results(agent)
        assert tool_result == {"toolUseId": tool_result["toolUseId"], "status": "error",
                               "content": [{"text": "Tool execution cancelled"}]}
        # The server was told: its handler saw the cancellation (notifications/cancelled).
        asyncio.run(wait_for_file(tmp_path / "cancelled-thread"))
        assert time.monotonic() - cancelled_at < 60  # the call itself would have slept on
    finally:
        client.close()


async def test_cancel_from_another_task_returns_quickly(tmp_path: Path) -> None:
    client = MCPClient(command=STDIO_COMMAND, env={"MCP_TEST_MARKER_DIR": str(tmp_path)})
    agent = Agent(ScriptedModel(tool_call("slow", {"seconds": 60, "tag": "task"})), tools=[client])
    try:
        run = asyncio.create_task(agent.invoke_async("go"))
        await wait_for_file(tmp_path / "started-task", timeout=60)
        started = time.monotonic()
        agent.cancel()
        result = await asyncio.wait_for(run, 30)
        assert time.monotonic() - started < 30  # the call would sleep 60 s
        assert result.stop_reason == "cancelled"
        assert tool_results(agent)[0]["content"] == [{"text": "Tool execution cancelled"}]
        await wait_for_file(tmp_path / "cancelled-task")
    finally:
        client.close()


async def test_a_server_that_dies_mid_call_gives_an_error_and_the_agent_keeps_working() -> None:
    with MCPClient(command=STDIO_COMMAND) as client:
        model = ScriptedModel(tool_call("crash", {}), tool_call("echo", {"text": "still here"}), text("recovered"))
        agent = Agent(model, tools=[client])

        started = time.monotonic()
        result = await agent.invoke_async("go")

        assert time.monotonic() - started < 60  # two server starts included; no hang on the dead one
        assert str(result) == "recovered\n"
        crashed, echoed = tool_results(agent)
        assert crashed["status"] == "error"
        crash_text = crashed["content"][0]["text"]
        assert crash_text.startswith("Error: MCP tool 'crash' failed: MCP server command ")
        # The request had reached the server, so it is not sent again, and the model learns it may have run.
        assert "closed the connection before answering" in crash_text
        assert "may or may not have run" in crash_text
        # The next call starts a fresh server.
        assert echoed["status"] == "success"
        assert echoed["content"][0] == {"text": "echo: still here"}


async def test_a_server_killed_while_idle_is_restarted_by_the_next_call() -> None:
    with MCPClient(command=STDIO_COMMAND) as client:
        first = (await client.call_tool_async("pid", {})).content[0]
        old_pid = int(first.text)  # type: ignore[union-attr]
        os.kill(old_pid, signal.SIGKILL)
        # The client notices the dead server without a call (its stdout closed) and retires the session.
        deadline = time.monotonic() + 30
        while client._runner is not None and client._runner.lost is None:
            assert time.monotonic() < deadline, "the client never noticed that its server died"
            await asyncio.sleep(0.02)

        # The call never reached the dead server, so it is sent to a new one instead of failing.
        agent = Agent(ScriptedModel(tool_call("pid", {}), text("ok")), tools=[client])
        await agent.invoke_async("which pid?")

        (result,) = tool_results(agent)
        assert result["status"] == "success"
        assert int(result["content"][0]["text"]) != old_pid


def test_cancel_while_a_tool_call_restarts_the_server_ends_the_call(tmp_path: Path) -> None:
    # The first start serves normally; every later start announces itself and hangs before initialize.
    served, restarting = tmp_path / "served", tmp_path / "restarting"
    script = (f"if [ -e {served} ]; then touch {restarting}; exec sleep 120; fi; "
              f"touch {served}; exec {shlex.join(STDIO_COMMAND)}")
    with MCPClient(command=["sh", "-c", script], startup_timeout=120) as client:
        model = ScriptedModel(tool_call("crash", {}), text("crashed"), tool_call("echo", {"text": "x"}), text("no"))
        agent = Agent(model, tools=[client])
        agent("crash the server")  # the session is lost; the next call starts the server again

        def cancel_once_restarting() -> None:
            deadline = time.monotonic() + 60
            while not restarting.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            agent.cancel()

        canceller = threading.Thread(target=cancel_once_restarting)
        canceller.start()
        result = agent("echo")  # before the fix: waited the whole startup_timeout (120 s), then failed
        canceller.join()

        assert restarting.exists()
        assert result.stop_reason == "cancelled"
        assert tool_results(agent)[-1]["content"] == [{"text": "Tool execution cancelled"}]


async def test_call_tool_async_raises_connection_error_when_the_server_dies_mid_call() -> None:
    with MCPClient(command=STDIO_COMMAND) as client, \
            pytest.raises(ConnectionError, match="closed the connection before answering"):
        await client.call_tool_async("crash", {})


def test_a_tool_filter_that_raises_names_the_filter_and_the_tool() -> None:
    def only_known(name: str) -> bool:
        return {"echo": True}[name]

    with MCPClient(command=STDIO_COMMAND, tool_filter=only_known) as client:
        agent = Agent(ScriptedModel(text("never")), tools=[client])
        with pytest.raises(MCPClientInitializationError) as caught:
            agent("hi")
    message = str(caught.value)
    assert "tool_filter 'test_a_tool_filter_that_raises_names_the_filter_and_the_tool.<locals>.only_known'" in message
    assert "raised on tool 'add'" in message  # echo passed; add, listed next, is not in the dict
    assert "KeyError: 'add'" in message
    assert isinstance(caught.value.__cause__, KeyError)
    assert agent.messages == []


def test_a_server_speaking_only_the_pre_2026_protocol_still_works() -> None:
    # The client probes server/discover first; an older server refuses it and gets the initialize handshake.
    legacy = [sys.executable, str(Path(__file__).with_name("legacy_stdio_server.py"))]
    with MCPClient(command=legacy) as client:
        agent = Agent(ScriptedModel(tool_call("echo", {"text": "hi"}), text("ok")), tools=[client])
        agent("go")
    assert tool_results(agent)[0]["content"] == [{"text": "legacy: hi"}]


def test_start_failure_raises_before_the_model_is_called_naming_the_command() -> None:
    missing = "/nonexistent/mcp-server-binary"
    model = ScriptedModel(text("never"))
    agent = Agent(model, tools=[MCPClient(command=[missing, "--flag"])])

    with pytest.raises(MCPClientInitializationError, match=f"could not start MCP server command '{missing} --flag'"):
        agent("hi")

    assert model.calls == []
    assert agent.messages == []


def test_a_server_that_never_answers_fails_after_startup_timeout() -> None:
    command = [sys.executable, "-c", "import time; time.sleep(120)"]
    agent = Agent(ScriptedModel(text("never")), tools=[MCPClient(command=command, startup_timeout=0.5)])
    started = time.monotonic()
    with pytest.raises(MCPClientInitializationError, match=r"no answer to initialize within 0\.5s") as caught:
        agent("hi")
    assert "time.sleep(120)" in str(caught.value)
    assert time.monotonic() - started < 60  # the startup timeout, not the server's 120 s


def test_nothing_connects_until_the_first_invocation(tmp_path: Path) -> None:
    started_file = tmp_path / "started"
    with MCPClient(command=STDIO_COMMAND, env={"MCP_TEST_STARTED_FILE": str(started_file)}) as client:
        agent = Agent(ScriptedModel(tool_call("echo", {"text": "x"}), text("done")), tools=[client])
        time.sleep(0.3)
        assert not started_file.exists()
        agent("go")
        assert started_file.exists()


def test_close_ends_the_server_and_is_idempotent() -> None:
    client = MCPClient(command=STDIO_COMMAND)
    agent = Agent(ScriptedModel(tool_call("pid", {}), text("done")), tools=[client])
    agent("which pid?")
    pid = int(tool_results(agent)[0]["content"][0]["text"])
    assert alive(pid)

    client.close()
    client.close()

    assert not alive(pid)


def test_the_same_client_serves_several_agents_and_event_loops(shared_stdio: MCPClient) -> None:
    for word in ("one", "two"):
        agent = Agent(ScriptedModel(tool_call("srv_echo", {"text": word}), text("ok")), tools=[shared_stdio])
        agent(word)  # each synchronous call runs its own event loop
        assert tool_results(agent)[0]["content"][0] == {"text": f"echo: {word}"}


async def test_agents_starting_together_share_one_session() -> None:
    with MCPClient(command=STDIO_COMMAND) as client:
        agents = [Agent(ScriptedModel(tool_call("pid", {}), text("ok")), tools=[client]) for _ in range(2)]
        await asyncio.gather(*(agent.invoke_async("pid?") for agent in agents))
        pids = {tool_results(agent)[0]["content"][0]["text"] for agent in agents}
        assert len(pids) == 1
