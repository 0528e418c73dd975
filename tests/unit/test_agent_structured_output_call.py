"""``agent.structured_output(Model, prompt)``: Strands' deprecated one-call form, with Strands' semantics.

One model call offered only the output model's tool, the history plus the prompt as its messages, nothing added
to the history, the invocation hooks around it, a ``DeprecationWarning`` pointing at the caller.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from ray_harness import Agent, tool
from ray_harness.hooks import AfterInvocationEvent, BeforeInvocationEvent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.exceptions import StructuredOutputException


class Person(BaseModel):
    name: str
    age: int


@tool
def lookup(name: str) -> str:
    """Look a person up.

    Args:
        name: Who.
    """
    return name


def test_the_history_is_read_and_left_as_it_was() -> None:
    model = ScriptedModel(text("Ann is 3."), tool_call("Person", {"name": "Ann", "age": 3}))
    agent = Agent(model, tools=[lookup], system_prompt="be brief")
    agent("tell me about Ann")
    history = [dict(message) for message in agent.messages]
    with pytest.warns(DeprecationWarning, match="structured_output_model=") as warned:
        person = agent.structured_output(Person, "extract the person")
    assert person == Person(name="Ann", age=3)
    assert warned[0].filename == __file__  # points at the caller, as Strands' does
    assert agent.messages == history  # neither the prompt nor the answer was added
    call = model.calls[-1]
    assert call.tool_names == ("Person",)  # the agent's tools are not offered
    assert call.system_prompt == "be brief"
    assert [message["content"][0].get("text") for message in call.messages] == [
        "tell me about Ann", "Ann is 3.", "extract the person"]


def test_invocation_hooks_fire_around_the_call_and_the_handler_hears_the_stream() -> None:
    seen: list[str] = []
    heard: list[str] = []
    agent = Agent(ScriptedModel(tool_call("Person", {"name": "Bo", "age": 40})),
                  callback_handler=lambda **event: heard.append(str(event.get("type"))))
    agent.add_hook(lambda event: seen.append("before"), BeforeInvocationEvent)
    agent.add_hook(lambda event: seen.append("after"), AfterInvocationEvent)

    async def ask() -> Any:
        with pytest.warns(DeprecationWarning, match="deprecated"):
            return await agent.structured_output_async(Person, [{"text": "Bo, 40"}])

    assert asyncio.run(ask()) == Person(name="Bo", age=40)
    assert seen == ["before", "after"]
    assert heard and not {"stop", "output"} & set(heard)  # stream events only, not the call's own bookkeeping
    assert agent.messages == []


def test_an_answer_that_does_not_fill_the_model_raises_after_the_after_hook() -> None:
    seen: list[str] = []
    agent = Agent(ScriptedModel(tool_call("Person", {"name": "Cy"})))
    agent.add_hook(lambda event: seen.append("after"), AfterInvocationEvent)
    with pytest.warns(DeprecationWarning, match="deprecated"), pytest.raises(StructuredOutputException, match="age"):
        agent.structured_output(Person, "Cy")
    assert seen == ["after"] and agent.messages == []


def test_refused_while_the_agent_waits_for_interrupt_responses() -> None:
    agent = Agent(ScriptedModel())
    agent._interrupt_state.activate()
    with pytest.raises(RuntimeError, match="during interrupt"):
        agent.structured_output(Person, "x")
