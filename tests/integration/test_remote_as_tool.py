"""RemoteAgent.as_tool(): a sub-agent in its own actor, called as a tool (and through Agent(tools=[remote]))."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_call

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


def _answer_with_child_result(call: Any) -> Any:
    result = call.messages[-1]["content"][0]["toolResult"]
    return text(f"child said: {result['content'][0]['text'].strip()} ({result['status']})")


def test_remote_agent_as_a_tool_with_context_reset() -> None:
    from ray_harness.runtime import RemoteAgent

    child = RemoteAgent("tests.integration.agents:calculator", name=f"calc-tool-{uuid.uuid4().hex[:6]}")
    try:
        parent = Agent(ScriptedModel(tool_call("calculator", {"input": "what is 2+3?"}, tool_use_id="c1"),
                                     _answer_with_child_result), tools=[child])
        # The model picks tools by their descriptions: the remote agent's own, as for an in-process agent.
        assert parent.tool_registry.get("calculator").tool_spec["description"] == "Adds numbers exactly"
        assert child.as_tool(name="calc").get_display_properties() == {"Name": "calc", "Type": "agent",
                                                                        "Agent": "calculator"}
        result = parent("use the calculator")
        assert str(result) == "child said: 5 (success)\n"
        assert child.messages == []  # the child's context was reset after the call
    finally:
        child.shutdown()


def test_remote_sub_agent_interrupts_surface_in_the_parent_and_resume() -> None:
    from ray_harness.runtime import RemoteAgent

    child = RemoteAgent("tests.integration.agents:approvals", name=f"approvals-tool-{uuid.uuid4().hex[:6]}")
    try:
        parent = Agent(ScriptedModel(tool_call("approvals", {"input": "move 10"}, tool_use_id="p1"),
                                     _answer_with_child_result), tools=[child.as_tool()])
        first = parent("pay")
        assert first.stop_reason == "interrupt"
        (pending,) = first.interrupts
        assert pending.id.startswith("v1:agent_as_tool:p1:")
        assert pending.reason == "transfer 10?"
        second = parent([{"interruptResponse": {"interruptId": pending.id, "response": "yes"}}])
        assert str(second) == "child said: done (success)\n"
        assert child.messages == []  # reset once the interrupted call finished
    finally:
        child.shutdown()


# -- a new driver process resumes a remote sub-agent's interrupt ------------------------------------------------

DRIVER = Path(__file__).with_name("_remote_as_tool_driver.py")


def _drive(*args: str) -> dict[str, Any]:
    import ray

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    done = subprocess.run([sys.executable, str(DRIVER), *args], cwd=root, env=env, timeout=120,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _same_driver(tmp_path: Path, preserve: bool) -> dict[str, Any]:
    from ray_harness.runtime import RemoteAgent
    from tests.integration._remote_as_tool_driver import factory, parent

    log = tmp_path / "same.log"
    remote = RemoteAgent(factory(str(log)), name=f"ops-same-{uuid.uuid4().hex[:6]}")
    try:
        boss = parent(str(tmp_path / "same-sessions"), remote, preserve, "all")
        first = boss("start")
        result = boss([{"interruptResponse": {"interruptId": item.id, "response": "yes"}} for item in first.interrupts])
        return {"text": str(result), "messages": boss.messages, "child_messages": remote.messages,
                "log": log.read_text()}
    finally:
        remote.shutdown()


@pytest.mark.parametrize(("lifetime", "reach", "preserve"), [
    ("detached", "attach", "1"),  # the detached actor still holds the turn; the parent's copy matches it
    ("detached", "attach", "0"),  # the actor went back to its baseline; the turn comes from the parent
    ("owned", "new", "0"),  # the first driver's actor died with it; a new actor from the same code resumes
])
def test_a_new_driver_resumes_the_remote_sub_agent(tmp_path: Path, lifetime: str, reach: str, preserve: str) -> None:
    from ray_harness.runtime import RemoteAgent

    expected = _same_driver(tmp_path, preserve == "1")
    storage, log = str(tmp_path / "sessions"), tmp_path / "tools.log"
    first_actor = f"ops-{uuid.uuid4().hex[:6]}"
    paused = _drive("interrupt", storage, str(log), first_actor, lifetime, preserve)
    try:
        assert paused["stop_reason"] == "interrupt"
        (pending,) = paused["interrupts"]
        assert pending["id"].startswith("v1:agent_as_tool:p-1:") and pending["reason"] == {"target": "db"}
        assert log.read_text() == "ops check db\n"
        second_actor = first_actor if reach == "attach" else f"ops-{uuid.uuid4().hex[:6]}"
        resumed = _drive("resume", storage, str(log), second_actor, reach, preserve,
                         json.dumps([{"interruptId": pending["id"], "response": "yes"}]))
    finally:
        if lifetime == "detached":
            with contextlib.suppress(ValueError):
                RemoteAgent.kill(first_actor)
    assert resumed["stop_reason"] == "end_turn"
    assert resumed["text"] == expected["text"] == "boss: ops: db healthy | wiped db (checked: db)\n"
    assert resumed["messages"] == expected["messages"]
    assert resumed["child_messages"] == expected["child_messages"]
    assert len(resumed["child_messages"]) == (4 if preserve == "1" else 0)
    assert log.read_text() == expected["log"] == "ops check db\nops wipe db\n"  # each tool once
