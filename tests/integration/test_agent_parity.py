"""The same agent behaviour in-process and in a Ray actor: one suite, run against Agent and RemoteAgent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.runtime._spec import load_factory
from tests.integration import agents

pytestmark = pytest.mark.ray

Make = Callable[[str], Any]


@pytest.fixture(params=["local", "remote"])
def make(request: pytest.FixtureRequest) -> Iterator[Make]:
    """Build an agent from a factory in ``tests.integration.agents``: in-process, or in its own actor."""
    created: list[Any] = []

    def build(factory: str) -> Any:
        path = f"tests.integration.agents:{factory}"
        if request.param == "local":
            agent: Agent = load_factory(path)()
            return agent
        request.getfixturevalue("ray_session")
        from ray_harness.runtime import RemoteAgent

        remote = RemoteAgent(path)
        created.append(remote)
        return remote

    yield build
    for remote in created:
        remote.shutdown()


def test_tool_round_trip(make: Make) -> None:
    agent = make("calculator")
    result = agent("2+3?")
    assert (result.stop_reason, str(result)) == ("end_turn", "5\n")
    tool_result = agent.messages[2]["content"][0]["toolResult"]
    assert tool_result["status"] == "success"
    assert tool_result["content"][0]["text"] == "5"
    assert result.metrics.accumulated_usage["totalTokens"] > 0


async def test_hooks_run_inside_the_agent(make: Make) -> None:
    agent = make("hooked")
    await agent.invoke_async("1+1?")
    assert agent.state.get("seen") == ["before_invocation", "before_model", "after_tool", "before_model"]


def test_intervention_denies_a_tool(make: Make) -> None:
    agent = make("guarded")
    result = agent("1+2?")
    assert str(result) == "denied\n"
    denied = agent.messages[2]["content"][0]["toolResult"]
    assert (denied["status"], denied["content"][0]["text"]) == ("error", "DENIED: adding is not allowed")


def test_interrupt_then_resume(make: Make) -> None:
    agent = make("approvals")
    first = agent("send 10")
    assert first.stop_reason == "interrupt"
    (pending,) = first.interrupts
    assert (pending.name, pending.reason) == ("approval", "transfer 10?")
    second = agent([{"interruptResponse": {"interruptId": pending.id, "response": "yes"}}])
    assert (second.stop_reason, str(second)) == ("end_turn", "done\n")
    assert agent.messages[2]["content"][0]["toolResult"]["content"][0]["text"] == "transferred 10"


def test_interrupt_response_with_unknown_id_is_a_key_error(make: Make) -> None:
    agent = make("approvals")
    agent("send 10")
    with pytest.raises(KeyError, match="no interrupt found"):
        agent([{"interruptResponse": {"interruptId": "nope", "response": "yes"}}])


def test_turn_limit(make: Make) -> None:
    agent = make("looping")
    result = agent("loop", limits={"turns": 2})
    assert result.stop_reason == "limit_turns"
    assert len(agent.messages) == 5  # prompt + two (toolUse, toolResult) turns


def test_bad_limits_fail_before_the_model(make: Make) -> None:
    agent = make("calculator")
    with pytest.raises(TypeError, match="positive int"):
        agent("2+3?", limits={"turns": 0})
    assert agent.messages == []


def test_checkpoint_then_resume(make: Make) -> None:
    agent = make("checkpointing")
    first = agent("4+4?")
    assert (first.stop_reason, first.checkpoint.position) == ("checkpoint", "after_model")
    second = agent({"checkpointResume": {"checkpoint": first.checkpoint.to_dict()}})
    assert (second.stop_reason, second.checkpoint.position) == ("checkpoint", "after_tools")
    third = agent({"checkpointResume": {"checkpoint": second.checkpoint.to_dict()}})
    assert (third.stop_reason, str(third)) == ("end_turn", "8\n")


async def test_structured_output(make: Make) -> None:
    agent = make("structured")
    result = await agent.invoke_async("answer?", structured_output_model=agents.Answer)
    assert result.structured_output == agents.Answer(value=42)


def test_intervention_throw_keeps_the_error_type(make: Make) -> None:
    agent = make("broken_policy")
    with pytest.raises(RuntimeError, match="policy store is down") as caught:
        agent("hi")
    assert type(caught.value) is RuntimeError
    assert agent.messages == []  # the failed invocation rolled back


def test_bad_prompt_is_a_value_error(make: Make) -> None:
    agent = make("calculator")
    with pytest.raises(ValueError, match="unsupported prompt of type int") as caught:
        agent(42)
    assert type(caught.value) is ValueError


async def test_stream_events_in_order(make: Make) -> None:
    agent = make("streaming")
    kinds = []
    text = ""
    async for event in agent.stream_async("2+2?"):
        if event["type"] == "model_event":
            continue  # raw provider chunks stay in the actor by default
        kinds.append(event["type"])
        if event["type"] == "text_delta":
            text += event["data"]
    assert text == "four"
    assert kinds[-1] == "result"
    assert kinds.index("tool_start") < kinds.index("tool_result") < kinds.index("text_delta")
    assert kinds.count("text_delta") == 4

