"""Agent-as-tool interrupts resumed by a new process: a new parent and new sub-agents built from the same code.

Each scenario runs twice: in this process (interrupt, then resume on the same objects) and across two
subprocesses sharing a FileSessionManager directory. Both must end with the same parent history, the
same sub-agent histories and states, the same tool runs and the same number of model calls.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.session._as_tool_process import build, snapshot
from tests.session.conftest import repo_root, subprocess_env
from tests.session.helpers import assert_valid_history

SCRIPT = str(Path(__file__).with_name("_as_tool_process.py"))


def run(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120,
                          cwd=repo_root(), env=subprocess_env(), check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def answers(interrupts: list[dict[str, Any]], response: str = "yes") -> list[dict[str, Any]]:
    return [{"interruptId": item["id"], "response": response} for item in interrupts]


def same_process(scenario: str, log: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    parent, children = build(scenario, resume=False, log=log)
    first = snapshot(parent, children, parent("start"))
    first = json.loads(json.dumps(first))
    second = parent([{"interruptResponse": answer} for answer in answers(first["interrupts"])])
    return first, json.loads(json.dumps(snapshot(parent, children, second)))


@pytest.mark.parametrize("scenario", ["basic", "preserve", "delegate", "nested", "pair"])
def test_new_process_resume_matches_the_same_process_path(scenario: str, tmp_path: Path) -> None:
    expected_first, expected = same_process(scenario, tmp_path / "same.log")
    log = tmp_path / "tools.log"
    storage = str(tmp_path / "sessions")

    paused = run("interrupt", scenario, storage, str(log))
    assert paused["stop_reason"] == "interrupt"
    assert sorted(paused["interrupts"], key=str) == sorted(expected_first["interrupts"], key=str)
    assert all(item["id"].startswith("v1:agent_as_tool:p-") for item in paused["interrupts"])
    checks = [line for line in lines(tmp_path / "same.log") if " check " in line]
    assert sorted(lines(log)) == sorted(checks)  # the unguarded tools ran; nothing waiting for an answer did
    resumed = run("resume", scenario, storage, str(log), json.dumps(answers(paused["interrupts"])))

    assert resumed["stop_reason"] == expected["stop_reason"] == "end_turn"
    assert resumed["text"] == expected["text"]
    assert resumed["messages"] == expected["messages"]
    assert resumed["children"] == expected["children"]
    assert resumed["child_states"] == expected["child_states"]
    assert sorted(lines(log)) == sorted(lines(tmp_path / "same.log"))  # every tool ran once (the pair's concurrently)
    calls = {name: paused["model_calls"][name] + resumed["model_calls"][name] for name in expected["model_calls"]}
    assert calls == expected["model_calls"]  # no model call repeated across the process boundary
    assert_valid_history(resumed["messages"])


def test_scenario_outcomes(tmp_path: Path) -> None:
    """What the shared scenarios produce (so the comparison above compares something meaningful)."""
    _, basic = same_process("basic", tmp_path / "basic.log")
    assert basic["text"] == "boss: ops: db healthy | wiped db (checked: db)\n"
    assert basic["children"]["ops"] == [{"role": "user", "content": [{"text": "hi"}]},
                                        {"role": "assistant", "content": [{"text": "ready"}]}]  # restored
    assert basic["child_states"]["ops"] == {"role": "ops"}
    _, preserve = same_process("preserve", tmp_path / "preserve.log")
    assert len(preserve["children"]["ops"]) == 2 + 4  # hi/ready + prompt, tool use, results, answer
    assert preserve["child_states"]["ops"] == {"role": "ops", "checked": "db"}
    _, delegate = same_process("delegate", tmp_path / "delegate.log")
    assert delegate["text"] == "ops: db healthy | wiped db (checked: db)\n"
    assert delegate["model_calls"]["boss"] == 1
    _, nested = same_process("nested", tmp_path / "nested.log")
    assert nested["text"] == "boss: manager: ops: db healthy | wiped db (checked: db)\n"
    assert nested["children"] == {"ops": [], "manager": []}
    _, pair = same_process("pair", tmp_path / "pair.log")
    assert pair["text"] == ("boss: ops: db healthy | wiped db (checked: db) | "
                            "ops2: cache healthy | wiped cache (checked: cache)\n")


def test_unknown_interrupt_id_names_it_and_loses_nothing(tmp_path: Path) -> None:
    log = tmp_path / "tools.log"
    storage = tmp_path / "sessions"
    paused = run("interrupt", "nested", str(storage), str(log))
    agent_file = storage / "session_astool" / "agents" / "agent_default" / "agent.json"
    stored = agent_file.read_bytes()
    bad = [*answers(paused["interrupts"]), {"interruptId": "v1:agent_as_tool:p-1:nope", "response": "yes"}]

    refused = run("resume", "nested", str(storage), str(log), json.dumps(bad))
    assert "v1:agent_as_tool:p-1:nope" in refused["error"]
    assert agent_file.read_bytes() == stored  # nothing written: the good answer was not half-applied either
    assert log.read_text() == "ops check db\n"

    resumed = run("resume", "nested", str(storage), str(log), json.dumps(answers(paused["interrupts"])))
    assert resumed["text"] == "boss: manager: ops: db healthy | wiped db (checked: db)\n"
    assert log.read_text() == "ops check db\nops wipe db\n"


@pytest.mark.services
def test_nested_resume_from_an_s3_session(moto_endpoint: str, tmp_path: Path) -> None:
    """The same parked turns through S3SessionManager (a real moto server), with fresh agent instances."""
    import boto3

    from ray_harness.session import S3SessionManager

    boto = boto3.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
    bucket = f"astool-{uuid.uuid4().hex[:12]}"
    boto.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=bucket)

    def sessions() -> S3SessionManager:
        return S3SessionManager("astool", bucket, endpoint_url=moto_endpoint, boto_session=boto)

    _, expected = same_process("nested", tmp_path / "same.log")
    log = tmp_path / "tools.log"
    parent, _ = build("nested", resume=False, log=log, sessions=sessions())
    paused = parent("start")
    del parent
    parent, children = build("nested", resume=True, log=log, sessions=sessions())
    result = parent([{"interruptResponse": answer} for answer in answers([i.to_dict() for i in paused.interrupts])])
    resumed = json.loads(json.dumps(snapshot(parent, children, result)))
    assert (resumed["text"], resumed["messages"], resumed["children"]) == (
        expected["text"], expected["messages"], expected["children"])
    assert lines(log) == ["ops check db", "ops wipe db"]
