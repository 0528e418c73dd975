"""An agent holding the vended ``subagent`` tool, as a Graph node on ``runtime="ray"``: it ships to a host with the
tool, and the child the model configured runs there."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ray_harness import Agent, GraphBuilder, Status
from ray_harness.testing import ModelCall, ScriptedModel, text, tool_call
from ray_harness.vended_tools import subagent
from tests.integration.multiagent_agents import where

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


def answer_with_the_tool_result(call: ModelCall) -> Any:
    """Say what the last tool returned (module level: the host imports it with the test module)."""
    result = call.messages[-1]["content"][0]["toolResult"]["content"][0]["text"]
    return text(f"got {result.strip()}")


async def test_an_agent_node_holding_subagent_delegates_on_its_ray_host() -> None:
    # One script for parent and child: the default builder gives the child the parent's model and tools.
    model = ScriptedModel(tool_call("subagent", {"task": "say where you run", "instructions": "report the pid"}),
                          tool_call("where", {}), answer_with_the_tool_result, answer_with_the_tool_result)
    builder = GraphBuilder()
    builder.add_node(Agent(model, tools=[subagent, where], name="lead"), "lead")
    graph = builder.build(runtime="ray")
    result = await graph.invoke_async("go")
    assert result.status == Status.COMPLETED
    answer = str(result.results["lead"].result).strip()
    assert answer.startswith("got got ")  # the lead heard the child, which heard its own tool
    assert int(answer.removeprefix("got got ")) != os.getpid()  # the child ran on the host, not here
