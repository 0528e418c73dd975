from __future__ import annotations

import asyncio

import pytest

from ray_harness import Agent, tool
from ray_harness.hooks import BeforeToolCallEvent
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls
from tests.multiagent.conftest import make_agent


async def test_agent_in_tools_is_wrapped_and_context_is_reset() -> None:
    child = make_agent("helper", text("first answer"), text("second answer"), description="Helps")
    parent = make_agent("boss", tool_call("helper", {"input": "q1"}), tool_call("helper", {"input": "q2"}),
                        text("all done"), tools=[child])
    spec = parent.tool_registry.get("helper").tool_spec
    assert spec["description"] == "Helps"
    assert spec["inputSchema"]["json"]["required"] == ["input"]
    result = await parent.invoke_async("go")
    assert str(result) == "all done\n"
    assert child.messages == []  # restored after each call
    second_call = child.model.calls[1]
    assert [m["content"][0]["text"] for m in second_call.messages] == ["q2"]
    tool_results = [block["toolResult"] for message in parent.messages for block in message["content"]
                    if "toolResult" in block]
    assert [r["content"] for r in tool_results] == [[{"text": "first answer\n"}], [{"text": "second answer\n"}]]


async def test_preserve_context_keeps_the_child_history() -> None:
    child = make_agent("memo", text("one"), text("two"))
    parent = make_agent("boss", tool_call("memo", {"input": "a"}), tool_call("memo", {"input": "b"}), text("ok"),
                        tools=[child.as_tool(preserve_context=True)])
    await parent.invoke_async("go")
    assert len(child.messages) == 4


async def test_busy_child_gives_an_error_result_not_a_crash() -> None:
    child = make_agent("worker", text("slow answer", delay=0.2))
    parent = make_agent("boss", tool_calls(("worker", {"input": "a"}, "w1"), ("worker", {"input": "b"}, "w2")),
                        text("done"), tools=[child])
    result = await parent.invoke_async("go")
    assert result.stop_reason == "end_turn"
    results = {block["toolResult"]["toolUseId"]: block["toolResult"] for block in parent.messages[2]["content"]}
    statuses = sorted(r["status"] for r in results.values())
    assert statuses == ["error", "success"]
    error = next(r for r in results.values() if r["status"] == "error")
    assert error["content"] == [{"text": "Agent 'worker' is already processing a request"}]


@tool
def rm_rf() -> str:
    """Delete everything."""
    return "deleted"


async def test_child_interrupt_surfaces_in_parent_and_resumes_through_it() -> None:
    child = make_agent("ops", tool_call("rm_rf", {}, tool_use_id="c-1"), text("ops finished"), tools=[rm_rf])

    def confirm(event: BeforeToolCallEvent) -> None:
        if event.interrupt("confirm", reason="really?") != "yes":
            event.cancel_tool = "refused"

    child.add_hook(confirm)
    parent = make_agent("boss", tool_call("ops", {"input": "clean up"}, tool_use_id="p-1"), text("boss done"),
                        tools=[child])
    first = await parent.invoke_async("go")
    assert first.stop_reason == "interrupt"
    (item,) = first.interrupts
    assert item.id.startswith("v1:agent_as_tool:p-1:v1:before_tool_call:c-1:")
    assert item.name == "confirm" and item.reason == "really?"
    second = await parent.invoke_async([{"interruptResponse": {"interruptId": item.id, "response": "yes"}}])
    assert second.stop_reason == "end_turn" and str(second) == "boss done\n"
    assert parent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "ops finished\n"}]
    assert child.messages == []


async def test_delegate_ends_the_parent_turn_with_the_child_answer() -> None:
    child = make_agent("expert", text("the expert answer"))
    parent = make_agent("front", tool_call("expert", {"input": "q"}), tools=[child.as_tool(delegate=True)])
    result = await parent.invoke_async("question")
    assert result.stop_reason == "end_turn"
    assert str(result) == "the expert answer\n"
    assert "final answer" in parent.tool_registry.get("expert").tool_spec["description"]
    assert len(parent.model.calls) == 1


async def test_cancelling_the_parent_cancels_the_child() -> None:
    child = make_agent("sleepy", text("zzz", delay=5))
    parent = make_agent("boss", tool_call("sleepy", {"input": "nap"}), tools=[child])
    task = asyncio.create_task(parent.invoke_async("go"))
    await asyncio.sleep(0.2)
    parent.cancel()
    result = await asyncio.wait_for(task, 3)
    assert result.stop_reason == "cancelled"


def test_bad_tool_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="must match"):
        Agent(ScriptedModel(), name="has space").as_tool()
