"""The vended tools, alone and inside an Agent driven by a ScriptedModel."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from ray_harness import Agent, tool
from ray_harness.sandbox import DockerSandbox, LocalEnvironment, Sandbox
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools.base import ToolContext, ToolStreamEvent


async def run_tool(sandbox: Sandbox, name: str, tool_input: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    (selected,) = [t for t in sandbox.get_tools() if t.tool_name == name]
    use = {"toolUseId": f"t-{uuid.uuid4().hex[:6]}", "name": name, "input": tool_input}
    events = [event async for event in selected.stream(use, ToolContext(tool_use=use, agent=None))]  # type: ignore[arg-type]
    return events[-1]["tool_result"], events[:-1]


def result_text(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"])


def tool_results(agent: Agent) -> list[dict[str, Any]]:
    return [block["toolResult"] for message in agent.messages for block in message["content"]
            if "toolResult" in block]


def test_agent_with_sandbox_gets_the_tools_and_runs_sandbox_shell(tmp_path: Path) -> None:
    model = ScriptedModel(
        tool_call("sandbox_shell", {"command": "echo hello > greeting.txt && cat greeting.txt && pwd"}),
        text("done"),
    )
    agent = Agent(model, sandbox=LocalEnvironment(working_dir=tmp_path))
    assert {"sandbox_shell", "sandbox_file_editor"} <= set(agent.tool_names)
    result = agent("make a greeting")
    assert str(result) == "done\n"
    (shell_result,) = tool_results(agent)
    assert shell_result["status"] == "success"
    assert result_text(shell_result) == f"hello\n{tmp_path}\n\n[exit code: 0]"
    assert (tmp_path / "greeting.txt").read_text() == "hello\n"
    model.assert_complete()


def test_default_sandbox_exists_but_vends_no_tools() -> None:
    agent = Agent(ScriptedModel(text("hi")))
    assert isinstance(agent.sandbox, LocalEnvironment)
    assert "sandbox_shell" not in agent.tool_names and "sandbox_file_editor" not in agent.tool_names


def test_a_user_tool_of_the_same_name_wins(tmp_path: Path) -> None:
    @tool(name="sandbox_shell")
    def my_shell(command: str) -> str:
        """Pretend shell."""
        return f"pretend: {command}"

    agent = Agent(ScriptedModel(tool_call("sandbox_shell", {"command": "ls"}), text("ok")),
                  tools=[my_shell], sandbox=LocalEnvironment(working_dir=tmp_path))
    agent("go")
    assert result_text(tool_results(agent)[0]) == "pretend: ls"
    assert "sandbox_file_editor" in agent.tool_names


async def test_agent_drives_a_docker_sandbox(docker_container: str) -> None:
    async with DockerSandbox(docker_container) as sandbox:
        agent = Agent(ScriptedModel(tool_call("sandbox_shell", {"command": "cat /etc/passwd | head -1; exit 2"}),
                                    text("seen")), sandbox=sandbox)
        await agent.invoke_async("look")
    (shell_result,) = tool_results(agent)
    assert shell_result["status"] == "error"
    assert result_text(shell_result) == "root:x:0:0:root:/root:/bin/sh\n\n[exit code: 2]"


async def test_shell_tool_streams_and_reports_timeouts(tmp_path: Path) -> None:
    sandbox = LocalEnvironment(working_dir=tmp_path)
    result, streamed = await run_tool(sandbox, "sandbox_shell", {"command": "echo a; echo b >&2"})
    assert [event["tool_stream_event"]["data"] for event in streamed] == [
        {"stream_type": "stdout", "data": "a\n"}, {"stream_type": "stderr", "data": "b\n"}]
    assert all(isinstance(event, ToolStreamEvent) for event in streamed)
    assert result_text(result) == "a\n\n[stderr]\nb\n\n[exit code: 0]"
    result, _ = await run_tool(sandbox, "sandbox_shell", {"command": "echo partial; sleep 30", "timeout": 0.5})
    assert result["status"] == "error"
    assert result_text(result) == "partial\n\n[command timed out after 0.5 seconds and was killed]"
    result, _ = await run_tool(sandbox, "sandbox_shell", {"timeout": 1})
    assert result["status"] == "error" and "input.command" in result_text(result)


async def test_cancel_kills_a_command_that_prints_nothing(tmp_path: Path) -> None:
    # The cancel is awaited with the command's output, not only checked between chunks: `sleep` prints nothing.
    model = ScriptedModel(tool_call("sandbox_shell", {"command": "touch started; sleep 30 && touch finished"}),
                          text("never"))
    agent = Agent(model, sandbox=LocalEnvironment(working_dir=tmp_path))

    async def cancel_once_running() -> None:
        while not (tmp_path / "started").exists():  # noqa: ASYNC110 - a file the command writes
            await asyncio.sleep(0.01)
        agent.cancel()

    _, result = await asyncio.gather(cancel_once_running(), agent.invoke_async("wait"))
    assert result.stop_reason == "cancelled"
    (shell_result,) = tool_results(agent)
    assert result_text(shell_result) == "Error: command cancelled"
    assert not (tmp_path / "finished").exists()  # killed, not waited for: it would have run 30 s then touched it


async def test_file_editor_commands(tmp_path: Path) -> None:
    sandbox = LocalEnvironment(working_dir=tmp_path)
    created, _ = await run_tool(sandbox, "sandbox_file_editor",
                                {"command": "create", "path": "notes/a.txt", "file_text": "one\ntwo\nthree\n"})
    assert created["status"] == "success"
    viewed, _ = await run_tool(sandbox, "sandbox_file_editor",
                               {"command": "view", "path": "notes/a.txt", "view_range": [2, -1]})
    assert result_text(viewed) == "     2\ttwo\n     3\tthree"
    replaced, _ = await run_tool(sandbox, "sandbox_file_editor",
                                 {"command": "str_replace", "path": "notes/a.txt", "old_str": "two", "new_str": "2"})
    assert replaced["status"] == "success"
    inserted, _ = await run_tool(sandbox, "sandbox_file_editor",
                                 {"command": "insert", "path": "notes/a.txt", "insert_line": 0, "new_str": "zero"})
    assert inserted["status"] == "success"
    assert (tmp_path / "notes/a.txt").read_text() == "zero\none\n2\nthree\n"
    listing, _ = await run_tool(sandbox, "sandbox_file_editor", {"command": "view", "path": "."})
    assert result_text(listing) == "notes/"


async def test_file_editor_errors_are_tool_errors(tmp_path: Path) -> None:
    sandbox = LocalEnvironment(working_dir=tmp_path)
    (tmp_path / "dup.txt").write_text("x x")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    cases = [
        ({"command": "view", "path": "missing.txt"}, "missing.txt does not exist"),
        ({"command": "view", "path": "image.png"}, "image.png is not UTF-8 text (a binary file?)"),
        ({"command": "str_replace", "path": "dup.txt", "old_str": "x", "new_str": "y"}, "occurs 2 times"),
        ({"command": "str_replace", "path": "dup.txt", "old_str": "z", "new_str": "y"}, "does not occur"),
        ({"command": "insert", "path": "dup.txt", "insert_line": 9, "new_str": "y"}, "past the file"),
        ({"command": "create", "path": "new.txt"}, "needs `file_text`"),
        ({"command": "delete", "path": "dup.txt"}, "input.command"),
    ]
    for tool_input, message in cases:
        result, _ = await run_tool(sandbox, "sandbox_file_editor", tool_input)
        assert result["status"] == "error", tool_input
        assert message in result_text(result), (tool_input, result_text(result))
    assert (tmp_path / "dup.txt").read_text() == "x x"


def test_tool_descriptions_say_where_commands_run(docker_container: str) -> None:
    shell = {t.tool_name: t for t in DockerSandbox(docker_container).get_tools()}["sandbox_shell"]
    assert f"Docker container {docker_container}" in shell.tool_spec["description"]
    local_shell = LocalEnvironment().get_tools()[0]
    assert "no isolation" in local_shell.tool_spec["description"]
