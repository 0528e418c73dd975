"""Corrupted or hand-edited session files: a SessionException naming the file, never a reset."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ray_harness import Agent
from ray_harness.session import FileSessionManager
from ray_harness.testing import ScriptedModel, text
from ray_harness.types.exceptions import SessionException


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    Agent(ScriptedModel(text("a1"), text("a2")), session_manager=FileSessionManager("s", storage_dir=tmp_path))("q1")
    return tmp_path / "session_s"


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:25])


def edit(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


MESSAGE_1 = "agents/agent_default/messages/message_1.json"
AGENT = "agents/agent_default/agent.json"


@pytest.mark.parametrize(
    ("relative", "damage", "expected"),
    [
        (MESSAGE_1, truncate, "not valid JSON"),
        (AGENT, truncate, "not valid JSON"),
        (MESSAGE_1, lambda p: edit(p, lambda d: d.update(message={"role": "robot", "content": []})), "role"),
        (MESSAGE_1, lambda p: edit(p, lambda d: d.update(message_id=7)), "message_id 7"),
        (AGENT, lambda p: edit(p, lambda d: d.update(state="not a dict")), "state"),
        (AGENT, lambda p: edit(p, lambda d: d.update(schema_version="99")), "schema_version '99'"),
        (AGENT, lambda p: edit(p, lambda d: d["interrupt_state"].update(interrupts={"x": 1})), "interrupts.x"),
        (AGENT, lambda p: p.write_text("[1, 2]"), "expected a JSON object"),
    ],
)
def test_damaged_file_raises_naming_it_and_is_left_alone(stored: Path, relative: str,
                                                          damage: Callable[[Path], None], expected: str) -> None:
    target = stored / relative
    damage(target)
    before = target.read_bytes()
    snapshot = {p: p.read_bytes() for p in stored.rglob("*") if p.is_file()}
    with pytest.raises(SessionException, match=expected) as raised:
        Agent(ScriptedModel(), session_manager=FileSessionManager("s", storage_dir=stored.parent))
    assert str(target) in str(raised.value)
    assert target.read_bytes() == before
    assert {p: p.read_bytes() for p in stored.rglob("*") if p.is_file()} == snapshot


def test_unknown_session_schema_version_fails_at_construction(stored: Path) -> None:
    edit(stored / "session.json", lambda d: d.update(schema_version="2"))
    with pytest.raises(SessionException, match=r"session\.json has schema_version '2'"):
        FileSessionManager("s", storage_dir=stored.parent)


def test_missing_message_file_is_reported(stored: Path) -> None:
    (stored / "agents/agent_default/messages/message_0.json").unlink()
    with pytest.raises(SessionException, match=r"message_0\.json missing"):
        Agent(ScriptedModel(), session_manager=FileSessionManager("s", storage_dir=stored.parent))


def test_leftover_temp_files_are_ignored(stored: Path) -> None:
    (stored / "agents/agent_default/messages/.message_2.json.abc.tmp").write_text("{half")
    restored = Agent(ScriptedModel(), session_manager=FileSessionManager("s", storage_dir=stored.parent))
    assert len(restored.messages) == 2


def test_removed_count_beyond_stored_messages_is_inconsistent(stored: Path) -> None:
    edit(stored / AGENT, lambda d: d["conversation_manager_state"].update(removed_message_count=5))
    with pytest.raises(SessionException, match="only 2 messages are stored") as raised:
        Agent(ScriptedModel(), session_manager=FileSessionManager("s", storage_dir=stored.parent))
    assert str(stored / AGENT) in str(raised.value)
