from __future__ import annotations

import dataclasses

import pytest

from ray_harness import Agent, tool
from ray_harness.checkpoint import Checkpoint
from ray_harness.hooks import BeforeToolCallEvent
from ray_harness.steering import SteerGuide, SteeringContext, SteeringHandler, SteerInterrupt, SteerProceed
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.exceptions import CheckpointException

RUNS: list[int] = []


@tool
def buy(amount: int) -> str:
    """Buy something."""
    RUNS.append(amount)
    return f"bought {amount}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


def test_checkpoint_is_frozen_and_versioned() -> None:
    checkpoint = Checkpoint(position="after_model", cycle_index=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        checkpoint.position = "after_tools"  # type: ignore[misc]
    assert issubclass(dataclasses.FrozenInstanceError, AttributeError)
    assert checkpoint.to_dict() == {"position": "after_model", "cycle_index": 2, "schema_version": "1.0"}
    assert Checkpoint.from_dict(checkpoint.to_dict()) == checkpoint


@pytest.mark.parametrize(
    ("data", "field"),
    [({"position": "after_model", "schema_version": "9.9"}, "schema_version"),
     ({"schema_version": "1.0"}, "position"),
     ({"position": "somewhere", "schema_version": "1.0"}, "position"),
     ({"position": "after_model", "cycle_index": -1, "schema_version": "1.0"}, "cycle_index"),
     ("not a dict", "dict")],
)
def test_bad_checkpoints_name_the_field(data: object, field: str) -> None:
    with pytest.raises(CheckpointException, match=field):
        Checkpoint.from_dict(data)


@pytest.mark.parametrize("prompt", [{"checkpointResume": {"checkpoint": None}}, {"checkpointResume": None}])
def test_a_resume_with_no_checkpoint_in_it_is_a_checkpoint_error(prompt: object) -> None:
    agent = Agent(ScriptedModel(text("never")), checkpointing=True)
    with pytest.raises(CheckpointException, match="checkpoint must be a dict, got NoneType"):
        agent(prompt)
    assert agent.messages == []


def test_unknown_keys_warn() -> None:
    with pytest.warns(UserWarning, match="unknown checkpoint keys"):
        Checkpoint.from_dict({"position": "after_tools", "schema_version": "1.0", "extra": 1})


def test_checkpointing_pauses_after_model_and_after_tools_and_resumes_elsewhere() -> None:
    model = ScriptedModel(tool_call("buy", {"amount": 5}), text("all bought"))
    agent = Agent(model, tools=[buy], checkpointing=True)
    first = agent("buy")
    assert first.stop_reason == "checkpoint" and first.checkpoint is not None
    assert first.checkpoint.position == "after_model" and RUNS == []

    second = agent({"checkpointResume": {"checkpoint": first.checkpoint.to_dict()}})
    assert second.stop_reason == "checkpoint" and second.checkpoint.position == "after_tools"  # type: ignore[union-attr]
    assert RUNS == [5]

    # Resume on "another machine": a new agent with the same history.
    other = Agent(ScriptedModel(text("all bought")), messages=agent.messages, tools=[buy], checkpointing=True)
    third = other([{"checkpointResume": {"checkpoint": second.checkpoint.to_dict()}}])  # type: ignore[union-attr]
    assert third.stop_reason == "end_turn" and str(third) == "all bought\n"
    assert RUNS == [5]


def test_bad_checkpoint_resume_is_rejected() -> None:
    agent = Agent(ScriptedModel(), checkpointing=True)
    with pytest.raises(CheckpointException, match="schema_version"):
        agent({"checkpointResume": {"checkpoint": {"position": "after_model", "schema_version": "0"}}})


def test_checkpoint_resume_needs_checkpointing_and_fails_before_the_model_is_called() -> None:
    model = ScriptedModel(text("never"))
    agent = Agent(model)
    with pytest.raises(ValueError, match="checkpointing"):
        agent({"checkpointResume": {"checkpoint": Checkpoint(position="after_model", cycle_index=0).to_dict()}})
    assert model.calls == [] and agent.messages == []


def test_interrupt_beats_checkpoint() -> None:
    def ask(event: BeforeToolCallEvent) -> None:
        event.interrupt("ok?")

    model = ScriptedModel(tool_call("buy", {"amount": 1}))
    agent = Agent(model, tools=[buy], checkpointing=True, hooks=[ask])
    first = agent("x")
    assert first.stop_reason == "checkpoint"
    second = agent({"checkpointResume": {"checkpoint": first.checkpoint.to_dict()}})  # type: ignore[union-attr]
    assert second.stop_reason == "interrupt"


class SpendingGuard(SteeringHandler):
    name = "spending"

    def steer_before_tool(self, event: BeforeToolCallEvent) -> object:
        total = self.steering_context.data.get("spent", 0) + event.tool_use["input"]["amount"]
        self.steering_context.data["spent"] = total
        if total > 1000:
            return SteerInterrupt(reason=f"total ${total} exceeds $1000")
        if total > 500:
            return SteerGuide(message=f"total ${total} is close to the limit; confirm with the user")
        return SteerProceed()


def test_steering_proceed_guide_and_interrupt() -> None:
    guard = SpendingGuard()
    steps = [tool_call("buy", {"amount": 400}, tool_use_id="a"), tool_call("buy", {"amount": 200}, tool_use_id="b"),
             tool_call("buy", {"amount": 500}, tool_use_id="c"), text("done")]
    agent = Agent(ScriptedModel(*steps), tools=[buy], hooks=[guard])
    result = agent("shop")
    assert result.stop_reason == "interrupt"
    assert RUNS == [400]
    guided = agent.messages[4]["content"][0]["toolResult"]["content"][0]["text"]
    assert guided.startswith("total $600 is close")
    (pending,) = result.interrupts
    assert pending.reason == "total $1100 exceeds $1000"
    assert guard.steering_context.to_dict() == {"data": {"spent": 1100}}
    final = agent([{"interruptResponse": {"interruptId": pending.id, "response": "approve"}}])
    assert final.stop_reason == "end_turn" and RUNS == [400, 500]


def test_steer_after_model_guides_a_retry() -> None:
    class Critic(SteeringHandler):
        def steer_after_model(self, event):  # type: ignore[no-untyped-def,override]
            message = event.stop_response.message
            if "maybe" in message["content"][0]["text"]:
                return SteerGuide(message="Give a definite answer.")
            return SteerProceed()

    model = ScriptedModel(text("maybe later"), text("yes"))
    agent = Agent(model, hooks=[Critic()])
    assert str(agent("decide")) == "yes\n"
    assert model.calls[1].messages[-1]["content"][-1] == {"text": "Give a definite answer."}


def test_a_handler_with_strands_keyword_signature_is_refused_at_registration_with_the_form_to_use() -> None:
    class Ported(SteeringHandler):
        async def steer_before_tool(self, *, agent, tool_use, **kwargs):  # type: ignore[no-untyped-def,override]
            return SteerProceed()

    with pytest.raises(TypeError, match=r"def steer_before_tool\(self, event\)"):
        Agent(ScriptedModel(), tools=[buy], hooks=[Ported()])

    class Fine(SteeringHandler):
        async def steer_after_model(self, event, *, extra=None):  # type: ignore[no-untyped-def,override]
            return None

    Agent(ScriptedModel(), hooks=[Fine()])


def test_steering_context_must_be_json() -> None:
    assert SteeringContext.from_dict({"data": {"a": 1}}).data == {"a": 1}
    context = SteeringContext(data={"bad": object()})
    with pytest.raises(TypeError):
        context.to_dict()
