"""Strands' ``agent.take_snapshot()`` / ``agent.load_snapshot()`` / ``Snapshot``: what a switched import calls."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ray_harness import Agent, Snapshot
from ray_harness.testing import ScriptedModel, text
from ray_harness.types.exceptions import SnapshotException


def _talked() -> Agent:
    agent = Agent(ScriptedModel(text("first answer")), system_prompt="be brief")
    agent("hi")
    agent.state.set("user", {"name": "Ann"})
    return agent


def test_the_session_preset_round_trips_through_json_into_another_agent() -> None:
    source = _talked()
    snapshot = source.take_snapshot(preset="session", app_data={"ticket": 42})
    assert (snapshot.scope, snapshot.schema_version, snapshot.app_data) == ("agent", "1.0", {"ticket": 42})
    assert sorted(snapshot.data) == ["conversation_manager_state", "interrupt_state", "messages", "model_state",
                                     "state"]
    loaded = Snapshot.from_dict(json.loads(json.dumps(snapshot.to_dict())))
    # model_state is the model's get_state(): a ScriptedModel's place in its script travels too.
    target = Agent(ScriptedModel(text("first answer"), text("second answer")), system_prompt="other")
    target.load_snapshot(loaded)
    assert target.messages == source.messages and target.state.get() == {"user": {"name": "Ann"}}
    assert target.system_prompt == "other"  # not in the preset: left as it was
    assert str(target("and?")) == "second answer\n"
    assert len(source.messages) == 2  # copies: the source's history did not grow


def test_include_and_exclude_choose_the_fields() -> None:
    agent = _talked()
    snapshot = agent.take_snapshot(include=["system_prompt", "state"], exclude=["state"])
    assert snapshot.data == {"system_prompt": [{"text": "be brief"}]}
    other = Agent(ScriptedModel())
    other.load_snapshot(snapshot)
    assert other.system_prompt == [{"text": "be brief"}] and other.messages == []


@pytest.mark.parametrize(("kwargs", "match"), [
    ({}, "no snapshot fields"),
    ({"exclude": ["messages"]}, "no snapshot fields"),
    ({"include": ["history"]}, "invalid snapshot field 'history'"),
    ({"preset": "everything"}, "invalid snapshot preset 'everything'"),
])
def test_bad_field_choices_are_snapshot_exceptions(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(SnapshotException, match=match):
        _talked().take_snapshot(**kwargs)


@pytest.mark.parametrize(("data", "match"), [
    ({"scope": "agent", "schema_version": "2.0", "data": {}}, "schema_version '2.0'"),
    ({"scope": "room", "schema_version": "1.0", "data": {}}, "scope 'room'"),
    ({"scope": "agent", "schema_version": "1.0"}, "'data' dict"),
])
def test_from_dict_refuses_what_it_cannot_load(data: dict[str, Any], match: str) -> None:
    with pytest.raises(SnapshotException, match=match):
        Snapshot.from_dict(data)


def test_a_bad_snapshot_leaves_the_agent_unchanged() -> None:
    agent = _talked()
    before = (list(agent.messages), agent.state.get())
    bad_messages = Snapshot(scope="agent", schema_version="1.0",
                            data={"state": {"user": "Bob"}, "messages": [{"role": "robot", "content": []}]})
    with pytest.raises(ValueError, match="messages"):
        agent.load_snapshot(bad_messages)
    unknown = Snapshot(scope="agent", schema_version="1.0", data={"state": {}, "tools": []})
    with pytest.raises(SnapshotException, match="unknown fields"):
        agent.load_snapshot(unknown)
    with pytest.raises(SnapshotException, match="scope 'agent'"):
        agent.load_snapshot(Snapshot(scope="multiAgent", schema_version="1.0", data={}))
    assert (agent.messages, agent.state.get()) == before
