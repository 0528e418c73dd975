"""ray_harness.vended_tools' shell, python_repl and file_editor, on LocalEnvironment temp dirs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent
from ray_harness.sandbox import LocalEnvironment
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls
from ray_harness.tools.executors import SequentialToolExecutor
from ray_harness.vended_tools import file_editor, make_file_editor, make_python_repl, make_shell, python_repl, shell
from tests.unit.test_vended_tools import run_tools as run_vended, tool_results


def run_tools(tools: list[Any], *calls: tuple[str, dict[str, Any]], **agent_args: Any) -> Agent:
    """One model turn calling ``calls`` one after the other (they touch the same files)."""
    return run_vended(tools, *calls, tool_executor=SequentialToolExecutor(), **agent_args)


# -- shell --------------------------------------------------------------------------------------------------------


def test_shell_runs_in_the_agents_sandbox_and_reports_the_exit_code(tmp_path: Path) -> None:
    agent = run_tools([shell], ("shell", {"command": "pwd; echo oops >&2; exit 3"}), ("shell", {"command": "true"}),
                      sandbox=LocalEnvironment(tmp_path))
    failed, ok = tool_results(agent)
    # A non-zero exit is a result the model reads, not an error (as in Strands).
    assert failed == ("success", {"output": f"{tmp_path}\n", "error": "oops\n", "exit_code": 3})
    assert ok == ("success", {"output": "", "error": "", "exit_code": 0})


def test_a_bound_sandbox_wins_over_the_agents(tmp_path: Path) -> None:
    (tmp_path / "bound").mkdir()
    bound = make_shell(sandbox=LocalEnvironment(tmp_path / "bound"), name="bound_shell")
    agent = run_tools([bound, shell], ("bound_shell", {"command": "pwd"}), ("shell", {"command": "pwd"}),
                      sandbox=LocalEnvironment(tmp_path))
    assert [result[1]["output"] for result in tool_results(agent)] == [f"{tmp_path / 'bound'}\n", f"{tmp_path}\n"]


def test_shell_timeout_and_bad_input(tmp_path: Path) -> None:
    agent = run_tools([shell], ("shell", {"command": "echo partial; sleep 30", "timeout": 1}),
                      ("shell", {"command": "true", "timeout": 0}), ("shell", {"timeout": 5}),
                      sandbox=LocalEnvironment(tmp_path))
    timed_out, zero, missing = tool_results(agent)
    status, message = timed_out
    first, partial = message.split("\n", 1)
    assert (status, first) == ("error", "Error: execution timed out after 1.0 seconds")
    assert json.loads(partial) == {"output": "partial\n", "error": "", "exit_code": 124}
    assert zero[0] == "error" and "input.timeout" in zero[1] and "greater than 0" in zero[1]
    assert missing[0] == "error" and "input.command" in missing[1]


async def test_agent_cancel_kills_a_running_shell_command(tmp_path: Path) -> None:
    model = ScriptedModel(tool_call("shell", {"command": "touch started; sleep 30 && touch finished"}), text("never"))
    agent = Agent(model, tools=[shell], sandbox=LocalEnvironment(tmp_path))

    invocation = asyncio.ensure_future(agent.invoke_async("wait"))
    while not (tmp_path / "started").exists():  # noqa: ASYNC110 - the command is running once it wrote this file
        await asyncio.sleep(0.01)
    agent.cancel()
    assert (await invocation).stop_reason == "cancelled"
    assert tool_results(agent) == [("error", "Error: cancelled: the agent was cancelled while it ran")]
    assert not (tmp_path / "finished").exists()  # killed, not waited for


# -- python_repl --------------------------------------------------------------------------------------------------


def test_python_repl_runs_code_in_a_fresh_interpreter(tmp_path: Path) -> None:
    agent = run_tools([python_repl], ("python_repl", {"code": "x = 41\nprint(x + 1)"}),
                      ("python_repl", {"code": "print(x)"}), ("python_repl", {"code": "1", "timeout": -1}),
                      sandbox=LocalEnvironment(tmp_path))
    ok, fresh, bad = tool_results(agent)
    assert ok == ("success", {"output": "42\n", "error": "", "exit_code": 0})
    assert fresh[1]["exit_code"] == 1 and "NameError: name 'x' is not defined" in fresh[1]["error"]
    assert bad[0] == "error" and "input.timeout" in bad[1]


def test_make_python_repl_checks_the_interpreter_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="language"):
        make_python_repl(language="python3; rm -rf /")
    sh = make_python_repl(sandbox=LocalEnvironment(tmp_path), name="sh_repl", language="sh")
    agent = run_tools([sh], ("sh_repl", {"code": "echo from sh"}))
    assert tool_results(agent) == [("success", {"output": "from sh\n", "error": "", "exit_code": 0})]


# -- file_editor --------------------------------------------------------------------------------------------------


def test_file_editor_creates_views_and_edits_with_strands_rules(tmp_path: Path) -> None:
    path = str(tmp_path / "notes.txt")
    agent = run_tools(
        [file_editor],
        ("file_editor", {"command": "create", "path": path, "file_text": "alpha\nbeta\n"}),
        ("file_editor", {"command": "create", "path": path, "file_text": "clobbered"}),
        ("file_editor", {"command": "str_replace", "path": path, "old_str": "beta", "new_str": "gamma"}),
        ("file_editor", {"command": "insert", "path": path, "insert_line": 0, "new_str": "# top"}),
        ("file_editor", {"command": "view", "path": path, "view_range": [2, -1]}),
        ("file_editor", {"command": "view", "path": "notes.txt"}),
        ("file_editor", {"command": "view", "path": f"{tmp_path}/../x"}),
        ("file_editor", {"command": "view", "path": path, "view_range": [1]}),
        ("file_editor", {"command": "view", "path": str(tmp_path / "missing.txt")}),
        sandbox=LocalEnvironment(tmp_path),
    )
    created, refused, replaced, inserted, viewed, relative, traversal, bad_range, missing = tool_results(agent)
    assert created[0] == replaced[0] == inserted[0] == "success"
    assert refused == ("error", f"Error: File already exists at: {path}. Cannot overwrite files using command "
                                "`create`.")
    assert viewed == ("success", "     2\talpha\n     3\tgamma")
    assert relative == ("error", "Error: `path` notes.txt is not absolute: it should start with `/`")
    assert traversal[0] == "error" and "path traversal is not allowed" in traversal[1]
    assert bad_range[0] == "error" and "input.view_range" in bad_range[1]
    assert missing == ("error", f"Error: {tmp_path / 'missing.txt'} does not exist")
    assert (tmp_path / "notes.txt").read_text() == "# top\nalpha\ngamma\n"


def test_file_editor_bound_to_a_sandbox(tmp_path: Path) -> None:
    editor = make_file_editor(sandbox=LocalEnvironment(tmp_path), name="editor")
    agent = run_tools([editor], ("editor", {"command": "create", "path": str(tmp_path / "d" / "f.txt"),
                                            "file_text": "x"}), ("editor", {"command": "view", "path": str(tmp_path)}))
    assert tool_results(agent)[1] == ("success", "d/")
    assert (tmp_path / "d" / "f.txt").read_text() == "x"


# -- shipping -----------------------------------------------------------------------------------------------------


def test_an_agent_with_sandbox_tools_pickles_and_the_copy_calls_them(tmp_path: Path) -> None:
    path = str(tmp_path / "shipped.txt")
    model = ScriptedModel(tool_calls(("file_editor", {"command": "create", "path": path, "file_text": "hi"}),
                                     ("shell", {"command": "cat shipped.txt"}),
                                     ("python_repl", {"code": "print(open('shipped.txt').read())"}),
                                     ("bound", {"command": "pwd"})), text("done"))
    bound = make_shell(sandbox=LocalEnvironment(tmp_path), name="bound", description="a bound shell")
    agent = Agent(model, tools=[file_editor, shell, python_repl, bound], sandbox=LocalEnvironment(tmp_path),
                  tool_executor=SequentialToolExecutor())
    copy = cloudpickle.loads(cloudpickle.dumps(agent))
    copy("go")
    created, cat, printed, pwd = tool_results(copy)
    assert created[0] == "success"
    assert (cat[1]["output"], printed[1]["output"], pwd[1]["output"]) == ("hi", "hi\n", f"{tmp_path}\n")
    assert copy.tool_registry.registry["bound"].tool_spec["description"] == "a bound shell"
