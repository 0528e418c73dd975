"""A node run's state as a ``SnapshotDelta`` (issue 20: a Swarm handoff does not ship the member's history).

Without Ray: the host's choice between a delta and the full snapshot (:func:`node_state`), ``Agent.restore`` of a
delta, its validation, its wire item, and the running digest a delta extends.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from pydantic import ValidationError

from ray_harness import Agent
from ray_harness.agent import AgentSnapshot, SnapshotDelta
from ray_harness.agent.conversation_manager.sliding_window import SlidingWindowConversationManager
from ray_harness.agent.snapshot import take_delta
from ray_harness.runtime._slots import MessagesDigest, RunBaseline, conversation_digest, node_state
from ray_harness.runtime._wire import ResultItem, SnapshotItem, node_state_fields
from ray_harness.testing import ScriptedModel


def _agent(replies: Any = ("one", "two", "three"), **kwargs: Any) -> Agent:
    return Agent(ScriptedModel(list(replies)), name="a", agent_id="a1", **kwargs)


def _pair() -> tuple[Agent, Agent]:
    """A slot and the caller's copy of it, in line after one run each way."""
    slot, copy = _agent(), _agent()
    slot("hello")
    copy.restore(slot.snapshot())
    return slot, copy


def test_a_run_that_only_appends_sends_a_delta_of_the_appended_messages() -> None:
    slot, copy = _pair()
    baseline = RunBaseline(slot.messages)
    slot("again")
    slot.state.set("seen", 2)
    state = node_state(slot, baseline)
    assert isinstance(state, SnapshotDelta)
    assert state.base_messages == 2 and state.snapshot.messages == slot.messages[2:]
    assert len(state.snapshot.messages) == 2
    copy.restore(state)
    assert copy.messages == slot.messages
    assert copy.state.get("seen") == 2
    assert copy.event_loop_metrics.cycle_count == slot.event_loop_metrics.cycle_count
    assert copy.snapshot() == slot.snapshot()  # everything but the history came whole


def test_a_trimmed_history_sends_the_full_snapshot() -> None:
    slot = _agent(conversation_manager=SlidingWindowConversationManager(window_size=2))
    copy = _agent(conversation_manager=SlidingWindowConversationManager(window_size=2))
    slot("hello")
    copy.restore(slot.snapshot())
    baseline = RunBaseline(slot.messages)
    slot("again")  # the window keeps 2 of 4: the first messages went
    assert len(slot.messages) == 2
    state = node_state(slot, baseline)
    assert isinstance(state, AgentSnapshot)
    copy.restore(state)
    assert copy.messages == slot.messages


def test_replaced_messages_or_no_baseline_send_the_full_snapshot() -> None:
    slot, _ = _pair()
    baseline = RunBaseline(slot.messages)
    slot("again")
    slot.messages = [dict(message) for message in slot.messages]  # a hook that replaced them: equal, not the same
    assert isinstance(node_state(slot, baseline), AgentSnapshot)
    assert isinstance(node_state(slot, None), AgentSnapshot)
    baseline = RunBaseline(slot.messages)
    slot.messages.insert(0, {"role": "user", "content": [{"text": "prepended"}]})
    assert isinstance(node_state(slot, baseline), AgentSnapshot)


def test_an_unchanged_history_is_an_empty_delta() -> None:
    slot, copy = _pair()
    baseline = RunBaseline(slot.messages)
    slot.state.set("k", "v")
    state = node_state(slot, baseline)
    assert isinstance(state, SnapshotDelta) and state.snapshot.messages == []
    copy.restore(state)
    assert copy.messages == slot.messages and copy.state.get("k") == "v"


def test_a_delta_of_another_base_is_refused_and_changes_nothing() -> None:
    slot, copy = _pair()
    baseline = RunBaseline(slot.messages)
    slot("again")
    slot.state.set("k", "after")
    delta = node_state(slot, baseline)
    copy.messages.append({"role": "user", "content": [{"text": "edited meanwhile"}]})
    before = copy.snapshot()
    with pytest.raises(ValueError, match=r"base_messages=2 .* 3 messages"):
        copy.restore(delta)
    assert copy.snapshot() == before
    other = Agent(ScriptedModel(["x"]), name="a", agent_id="other")
    other("hello")
    with pytest.raises(ValueError, match="agent_id"):
        other.restore(delta)


def test_take_delta_checks_its_base() -> None:
    agent, _ = _pair()
    assert take_delta(agent, 0).snapshot.messages == agent.messages
    with pytest.raises(ValueError, match="base_messages"):
        take_delta(agent, 3)


def test_delta_validation_names_the_field_and_round_trips() -> None:
    slot, copy = _pair()
    baseline = RunBaseline(slot.messages)
    slot("again")
    delta = node_state(slot, baseline)
    assert isinstance(delta, SnapshotDelta)
    again = SnapshotDelta.model_validate_json(delta.model_dump_json())
    assert again == delta
    with pytest.raises(ValidationError, match="base_messages"):
        SnapshotDelta(base_messages=-1, snapshot=delta.snapshot)
    bad = delta.model_dump()
    bad["snapshot"]["messages"] = [{"role": "robot", "content": []}]
    with pytest.raises(ValidationError, match=r"snapshot\.messages\.0"):
        SnapshotDelta.model_validate(bad)
    with pytest.raises(ValidationError, match="snapshot"):
        SnapshotDelta.model_validate({"base_messages": 1})
    with pytest.raises(TypeError, match="SnapshotDelta"):
        copy.restore({"base_messages": 2})  # type: ignore[arg-type]


def test_result_items_carry_a_snapshot_or_a_delta_and_return_either() -> None:
    slot, _ = _pair()
    baseline = RunBaseline(slot.messages)
    slot("again")
    result = slot("once more")
    delta = node_state(slot, baseline)
    item = ResultItem(result=result, **node_state_fields(delta))
    assert item.snapshot is None and item.node_state() == delta and item.agent_snapshot() is None
    full = ResultItem(result=result, **node_state_fields(slot.snapshot()))
    assert full.delta is None and full.node_state() == slot.snapshot()
    assert ResultItem(result=result).node_state() is None
    assert SnapshotItem(**node_state_fields(delta)).node_state() == delta
    with pytest.raises(ValidationError, match="delta"):
        ResultItem(result=result, snapshot=full.snapshot, delta=item.delta)
    with pytest.raises(ValidationError, match="snapshot"):
        SnapshotItem()
    with pytest.raises(TypeError, match="SnapshotDelta"):
        SnapshotItem(delta=pickle.dumps({"not": "a delta"})).node_state()


def test_a_running_digest_extended_by_deltas_equals_the_digest_of_the_whole() -> None:
    slot, copy = _pair()
    chain = MessagesDigest(copy.messages)
    assert conversation_digest(copy, chain) == conversation_digest(copy)
    baseline = RunBaseline(slot.messages)
    slot("again")
    delta = node_state(slot, baseline)
    assert isinstance(delta, SnapshotDelta)
    copy.restore(delta)
    chain.extend(delta.snapshot.messages)
    assert chain.count == len(copy.messages)
    assert conversation_digest(copy, chain) == conversation_digest(copy) == conversation_digest(slot)
    stale = MessagesDigest(copy.messages[:1])  # covers fewer messages than the agent has: not used
    assert conversation_digest(copy, stale) == conversation_digest(copy)
    # the digest is of the sequence: moving a message boundary changes it; covering it in pieces does not
    assert MessagesDigest(["ab", "c"]).hexdigest() != MessagesDigest(["a", "bc"]).hexdigest()
    pieces = MessagesDigest()
    for part in ([], [{"t": 1}], [], [{"t": 2}, "x"]):
        pieces.extend(part)
    assert pieces.count == 3 and pieces.hexdigest() == MessagesDigest([{"t": 1}, {"t": 2}, "x"]).hexdigest()

