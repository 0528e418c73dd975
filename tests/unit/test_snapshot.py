"""``Agent.snapshot()`` / ``Agent.restore()`` / ``AgentSnapshot``."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from pydantic import ValidationError

from ray_harness import Agent, tool
from ray_harness.agent import AgentSnapshot
from ray_harness.agent.conversation_manager import SlidingWindowConversationManager
from ray_harness.agent.snapshot import take_snapshot
from ray_harness.hooks.events import BeforeToolCallEvent
from ray_harness.testing import ScriptedModel, tool_call
from ray_harness.types.exceptions import ConcurrencyException


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def _script() -> list[Any]:
    return [tool_call("add", {"a": 1, "b": 2}, tool_use_id="t-1"), "three", "again"]


def _ran(**kwargs: Any) -> Agent:
    agent = Agent(ScriptedModel(_script()), tools=[add], state={"k": 1}, agent_id="a-1", name="adder", **kwargs)
    agent("what is 1 + 2?")
    agent.state.set("seen", [1, 2])
    return agent


def test_snapshot_holds_the_agents_state() -> None:
    agent = _ran()
    snapshot = agent.snapshot()
    assert isinstance(snapshot, AgentSnapshot)
    assert (snapshot.schema_version, snapshot.agent_id, snapshot.name) == (1, "a-1", "adder")
    assert snapshot.messages == agent.messages
    assert snapshot.state == {"k": 1, "seen": [1, 2]}
    assert snapshot.interrupt_state["activated"] is False
    assert snapshot.conversation_manager_state == agent.conversation_manager.get_state()
    assert snapshot.metrics.cycle_count == agent.event_loop_metrics.cycle_count == 2
    assert snapshot.metrics.accumulated_usage == agent.event_loop_metrics.accumulated_usage
    assert snapshot.metrics.tool_metrics["add"].call_count == 1
    assert snapshot.model_state is not None and snapshot.model_state["cursor"] == 2


def test_snapshot_is_frozen_and_a_copy() -> None:
    agent = _ran()
    snapshot = agent.snapshot()
    with pytest.raises(ValidationError):
        snapshot.agent_id = "other"  # type: ignore[misc]
    agent.messages[0]["content"][0]["text"] = "changed"
    agent.state.set("k", 2)
    assert snapshot.messages[0]["content"][0]["text"] == "what is 1 + 2?"
    assert snapshot.state["k"] == 1


def test_snapshot_copies_the_models_recorded_calls() -> None:
    agent = _ran()
    snapshot = agent.snapshot()
    assert agent.model.calls[0].messages[0]["content"][0]["text"] == "what is 1 + 2?"  # type: ignore[attr-defined]
    agent.model.calls[0].messages[0]["content"][0]["text"] = "changed"  # type: ignore[attr-defined]
    agent("and now?")
    assert snapshot.model_state is not None and snapshot.model_state["cursor"] == 2
    assert len(snapshot.model_state["calls"]) == 2
    assert snapshot.model_state["calls"][0]["messages"][0]["content"][0]["text"] == "what is 1 + 2?"


def test_an_uncopied_snapshot_pickles_the_same_state() -> None:
    # The runtime's journal takes the snapshot without copies and pickles it at once.
    agent = _ran()
    stored = pickle.loads(pickle.dumps(take_snapshot(agent, copy=False)))
    assert stored == agent.snapshot()
    fresh = Agent(ScriptedModel(_script()), tools=[add], agent_id="a-1", name="adder")
    fresh.restore(stored)
    assert fresh.snapshot() == agent.snapshot()
    assert str(fresh("again?")).strip() == "again"


def test_json_round_trip_restores_into_a_fresh_agent() -> None:
    agent = _ran()
    text = agent.snapshot().model_dump_json()
    parsed = AgentSnapshot.model_validate_json(text)
    assert parsed == agent.snapshot()
    fresh = Agent(ScriptedModel(_script()), tools=[add], agent_id="a-1", name="adder")
    fresh.restore(parsed)
    assert fresh.messages == agent.messages
    assert fresh.state.get() == agent.state.get()
    assert fresh.event_loop_metrics.cycle_count == 2
    assert fresh.event_loop_metrics.tool_metrics["add"].call_count == 1
    # The model's cursor came back: the next call answers with the third step, as on the original.
    assert fresh("again?").text == "again"
    assert len(fresh.model.calls) == 3  # type: ignore[attr-defined]


def test_bytes_in_messages_round_trip_as_base64() -> None:
    image = {"image": {"format": "png", "source": {"bytes": b"\x89PNG\x00\xff"}}}
    agent = Agent(ScriptedModel(["ok"]), messages=[{"role": "user", "content": [image]}])
    text = agent.snapshot().model_dump_json()
    assert isinstance(json.loads(text)["messages"][0]["content"][0]["image"]["source"]["bytes"], str)
    parsed = AgentSnapshot.model_validate_json(text)
    assert parsed.messages[0]["content"][0]["image"]["source"]["bytes"] == b"\x89PNG\x00\xff"


def test_restore_replaces_exactly_the_state_not_the_configuration() -> None:
    agent = _ran()
    snapshot = agent.snapshot()
    other = Agent(ScriptedModel(["x"]), agent_id="a-1", name="other", system_prompt="be brief",
                  messages=[{"role": "user", "content": [{"text": "old"}]}])
    other.restore(snapshot)
    assert other.messages == agent.messages
    assert (other.name, other.system_prompt, other.tool_names) == ("other", "be brief", [])


def test_restore_of_another_agent_id_names_both() -> None:
    snapshot = _ran().snapshot()
    other = Agent(ScriptedModel(["x"]), agent_id="b-2")
    with pytest.raises(ValueError, match=r"'a-1'.*'b-2'"):
        other.restore(snapshot)
    assert other.messages == []


def test_newer_schema_version_parses_but_does_not_restore() -> None:
    data = json.loads(_ran().snapshot().model_dump_json())
    data["schema_version"] = 2
    newer = AgentSnapshot.model_validate(data)
    agent = Agent(ScriptedModel(["x"]), agent_id="a-1")
    with pytest.raises(ValueError, match="schema_version"):
        agent.restore(newer)
    assert agent.messages == []


@pytest.mark.parametrize(("change", "field"), [
    ({"messages": [{"role": "robot", "content": []}]}, "messages"),
    ({"messages": [{"role": "user"}]}, "messages"),
    ({"state": []}, "state"),
    ({"state": {"k": object()}}, "state"),
    ({"interrupt_state": {"interrupts": {"i": {"name": "x"}}}}, "interrupt_state"),
    ({"metrics": {"cycle_count": "many"}}, "metrics"),
    ({"agent_id": None}, "agent_id"),
    ({"schema_version": 0}, "schema_version"),
    ({"surprise": 1}, "surprise"),
])
def test_invalid_input_names_the_field(change: dict[str, Any], field: str) -> None:
    data = {**_ran().snapshot().model_dump(), **change}
    with pytest.raises(ValidationError) as info:
        AgentSnapshot.model_validate(data)
    assert info.value.errors()[0]["loc"][0] == field


def test_failed_restore_leaves_the_agent_unchanged() -> None:
    agent = _ran()
    snapshot = agent.snapshot()
    # A conversation manager of another kind rejects the state: nothing of the snapshot may land.
    target = Agent(ScriptedModel(_script()), agent_id="a-1", conversation_manager=_Refusing())
    target("first")
    before = target.snapshot()
    with pytest.raises(ValueError, match="refused"):
        target.restore(snapshot)
    assert target.snapshot() == before


def test_failed_model_state_rolls_back_the_conversation_manager() -> None:
    agent = _ran()
    bad = agent.snapshot().model_copy(update={"model_state": {"cursor": -1}})
    target = Agent(ScriptedModel(_script()), agent_id="a-1",
                   conversation_manager=SlidingWindowConversationManager(window_size=10))
    target.conversation_manager.removed_message_count = 7
    before = target.snapshot()
    with pytest.raises(ValueError, match="cursor"):
        target.restore(bad)
    assert target.snapshot() == before
    assert target.conversation_manager.removed_message_count == 7


def test_interrupt_state_round_trips_and_resumes() -> None:
    def approve(event: BeforeToolCallEvent) -> None:
        if event.interrupt("approve", reason="add?") != "yes":
            event.cancel_tool = "no"

    agent = Agent(ScriptedModel(_script()), tools=[add], hooks=[approve], agent_id="a-1")
    paused = agent("1 + 2?")
    assert paused.stop_reason == "interrupt"
    text = agent.snapshot().model_dump_json()
    fresh = Agent(ScriptedModel(_script()), tools=[add], hooks=[approve], agent_id="a-1")
    fresh.restore(AgentSnapshot.model_validate_json(text))
    assert fresh.interrupt_state.activated
    answer = [{"interruptResponse": {"interruptId": paused.interrupts[0].id, "response": "yes"}}]
    result = fresh(answer)
    assert result.text == "three"
    assert fresh.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "3"}]


def test_restore_while_running_is_refused() -> None:
    seen: list[Exception] = []

    @tool
    def restore_me(agent: Any = None) -> str:
        """Restores its own agent mid-run."""
        try:
            holder["agent"].restore(holder["agent"].snapshot())
        except ConcurrencyException as error:
            seen.append(error)
        return "done"

    holder: dict[str, Agent] = {}
    holder["agent"] = Agent(ScriptedModel([tool_call("restore_me", {}), "ok"]), tools=[restore_me])
    holder["agent"]("go")
    assert len(seen) == 1


def test_a_model_without_get_state_has_no_model_state() -> None:
    class Plain(ScriptedModel):
        get_state = None  # type: ignore[assignment]
        set_state = None  # type: ignore[assignment]

    agent = Agent(Plain(["hi"]))
    agent("x")
    snapshot = agent.snapshot()
    assert snapshot.model_state is None
    Agent(Plain(["hi"])).restore(snapshot)  # nothing to set, nothing fails


class _Refusing(SlidingWindowConversationManager):
    def restore_from_session(self, state: dict[str, Any]) -> list[Any] | None:
        if state.get("__name__") != type(self).__name__:
            raise ValueError("refused: state of another conversation manager")
        return super().restore_from_session(state)

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "__name__": type(self).__name__}
