"""Durability across processes: resume an interrupt in a new interpreter; recover from kill -9 mid-tool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ray_harness import Agent
from ray_harness.session import FileSessionManager
from ray_harness.session.manager import CRASHED_TOOL_TEXT
from ray_harness.testing import ScriptedModel, text
from tests.session._process_agent import make_tools
from tests.session.conftest import repo_root, subprocess_env
from tests.session.helpers import assert_valid_history

SCRIPT = str(Path(__file__).with_name("_process_agent.py"))


def run(*args: str) -> dict:
    done = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120,
                          cwd=repo_root(), env=subprocess_env(), check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_interrupt_is_resumed_by_a_new_process(tmp_path: Path) -> None:
    log = tmp_path / "tools.log"
    paused = run("interrupt", str(tmp_path), str(log))
    assert paused["stop_reason"] == "interrupt"
    (pending,) = paused["interrupts"]
    assert pending["name"] == "approve-deploy" and pending["reason"] == {"target": "prod"}
    assert log.read_text() == "check prod\n"  # the approved-free tool already ran

    resumed = run("resume", str(tmp_path), str(log),
                  json.dumps({"interruptId": pending["id"], "response": "yes"}))
    assert resumed["stop_reason"] == "end_turn" and resumed["text"] == "shipped\n"
    assert resumed["model_calls"] == 1
    assert log.read_text() == "check prod\ndeploy prod\n"  # only the interrupted tool ran on resume
    messages = resumed["messages"]
    assert_valid_history(messages)
    results = {block["toolResult"]["toolUseId"]: block["toolResult"] for block in messages[2]["content"]}
    assert results["use-check"]["content"] == [{"text": "prod healthy"}]
    assert results["use-deploy"]["content"] == [{"text": "deployed prod"}]


def _pending(storage: Path) -> dict:
    path = storage / "session_proc" / "agents" / "agent_default" / "agent.json"
    try:
        return json.loads(path.read_text())["pending_tool_results"]  # type: ignore[no-any-return]
    except (FileNotFoundError, ValueError, KeyError):
        return {}


def test_kill_9_mid_tool_restores_a_valid_history(tmp_path: Path) -> None:
    log = tmp_path / "tools.log"
    process = subprocess.Popen([sys.executable, SCRIPT, "crash", str(tmp_path), str(log)], cwd=repo_root(),
                               env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # Kill once the slow tool runs and the finished one's result is in the session.
            if log.exists() and "slow started" in log.read_text() and "use-check" in _pending(tmp_path):
                break
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.05)
        else:
            raise AssertionError("the slow tool never started")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()

    model = ScriptedModel(text("recovered"))
    agent = Agent(model, tools=make_tools(log), session_manager=FileSessionManager("proc", storage_dir=tmp_path))
    assert_valid_history(agent.messages)
    results = {block["toolResult"]["toolUseId"]: block["toolResult"] for block in agent.messages[-1]["content"]}
    assert results["use-check"]["status"] == "success"
    assert results["use-check"]["content"] == [{"text": "db healthy"}]  # finished before the crash: kept
    assert results["use-slow"] == {"toolUseId": "use-slow", "status": "error", "content": [{"text": CRASHED_TOOL_TEXT}]}
    assert str(agent("what happened?")) == "recovered\n"
    assert_valid_history(list(model.calls[0].messages))
    again = Agent(ScriptedModel(), tools=make_tools(log), session_manager=FileSessionManager("proc", storage_dir=tmp_path))
    assert again.messages == agent.messages
