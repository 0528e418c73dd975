"""RemoteAgent.as_tool(): a sub-agent in its own actor, called as a tool (and through Agent(tools=[remote]))."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_call

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


def _answer_with_child_result(call: Any) -> Any:
    result = call.messages[-1]["content"][0]["toolResult"]
    return text(f"child said: {result['content'][0]['text'].strip()} ({result['status']})")


def test_remote_agent_as_a_tool_with_context_reset() -> None:
    from ray_harness.runtime import RemoteAgent

    child = RemoteAgent("tests.integration.agents:calculator", name=f"calc-tool-{uuid.uuid4().hex[:6]}")
    try:
        parent = Agent(ScriptedModel(tool_call("calculator", {"input": "what is 2+3?"}, tool_use_id="c1"),
                                     _answer_with_child_result), tools=[child])
        result = parent("use the calculator")
        assert str(result) == "child said: 5 (success)\n"
        assert child.messages == []  # the child's context was reset after the call
    finally:
        child.shutdown()


def test_remote_sub_agent_interrupts_surface_in_the_parent_and_resume() -> None:
    from ray_harness.runtime import RemoteAgent

    child = RemoteAgent("tests.integration.agents:approvals", name=f"approvals-tool-{uuid.uuid4().hex[:6]}")
    try:
        parent = Agent(ScriptedModel(tool_call("approvals", {"input": "move 10"}, tool_use_id="p1"),
                                     _answer_with_child_result), tools=[child.as_tool()])
        first = parent("pay")
        assert first.stop_reason == "interrupt"
        (pending,) = first.interrupts
        assert pending.id.startswith("v1:agent_as_tool:p1:")
        assert pending.reason == "transfer 10?"
        second = parent([{"interruptResponse": {"interruptId": pending.id, "response": "yes"}}])
        assert str(second) == "child said: done (success)\n"
        assert child.messages == []  # reset once the interrupted call finished
    finally:
        child.shutdown()
