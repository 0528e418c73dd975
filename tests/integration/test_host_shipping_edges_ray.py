"""What crosses two processes on ``runtime="ray"``, and what an actor raises that its caller cannot unpickle.

A Graph's agent node goes driver → orchestration host → node host: an agent's plugin ``@tool`` method (its
function shipped by value) must keep its input model over both hops. And an exception that pickles but does not
unpickle (pydantic's ``PydanticUserError`` is one) must reach the caller as its type and message, not as Ray's
"Failed to deserialize exception".
"""

from __future__ import annotations

from typing import Literal

import pytest

from ray_harness import Agent, GraphBuilder, Status
from ray_harness.hooks import BeforeInvocationEvent
from ray_harness.plugins import Plugin
from ray_harness.runtime import RemoteAgent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools import tool

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


class Dial(Plugin):
    name = "dial"

    @tool
    def turn(self, way: Literal["left", "right"]) -> str:
        """Turn the dial.

        Args:
            way: Which way.
        """
        return f"turned {way}"


class NeedsCode(Exception):
    """Pickles (``args`` only) but does not unpickle: ``code`` is a required keyword, as in PydanticUserError."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def test_a_plugin_tool_method_with_string_annotations_runs_on_a_graph_node_host() -> None:
    model = ScriptedModel(tool_call("turn", {"way": "left"}), text("done"))
    builder = GraphBuilder()
    builder.add_node(Agent(model, name="a", plugins=[Dial()], retry_strategy=None), "a")
    graph = builder.build(runtime="ray")
    try:
        result = graph("turn it")
        assert result.status == Status.COMPLETED
        messages = graph.nodes["a"].executor.messages
        assert messages[2]["content"][0]["toolResult"]["content"][0]["text"] == "turned left"
    finally:
        graph.shutdown()


def explode(event: BeforeInvocationEvent) -> None:
    raise NeedsCode("the hook broke", code="x")


def test_an_exception_the_caller_cannot_unpickle_arrives_as_its_type_and_message() -> None:
    agent = Agent(ScriptedModel(text("unused")), retry_strategy=None)
    agent.add_hook(explode)
    remote = RemoteAgent(agent)
    try:
        with pytest.raises(RuntimeError, match="NeedsCode: the hook broke") as caught:
            remote("go")
        assert "Failed to deserialize" not in str(caught.value)
    finally:
        remote.shutdown()
