from __future__ import annotations

import asyncio
import json
import pickle
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.agent.as_tool import PARKED_TURNS_KEY, ParkedTurn, delegated_blocks
from ray_harness.hooks import BeforeToolCallEvent
from ray_harness.interrupts import Interrupt, InterruptState
from ray_harness.testing import ScriptedModel, step, text, tool_call, tool_calls
from ray_harness.types.exceptions import RayHarnessError
from tests.multiagent.conftest import make_agent
from tests.session._as_tool_process import build, confirm_wipe, echo_last_result, ops_tools


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


async def test_a_parent_with_an_agent_tool_pickles_and_its_copy_works_on_its_own() -> None:
    # Agents ship to Ray hosts by pickle: a lock or a weak set in the tool must not stop that.
    child = make_agent("helper", text("copied answer"))
    parent = make_agent("boss", tool_call("helper", {"input": "q"}), text("done"), tools=[child.as_tool()])
    copy = pickle.loads(pickle.dumps(parent))
    assert str(await copy.invoke_async("go")) == "done\n"
    copied_child = copy.tool_registry.get("helper").agent
    assert copied_child is not child and copied_child.model.remaining == 0
    assert child.model.remaining == 1  # the original is untouched
    results = [block["toolResult"] for message in copy.messages for block in message["content"]
               if "toolResult" in block]
    assert [r["content"] for r in results] == [[{"text": "copied answer\n"}]]


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


async def test_a_delegated_answer_is_the_tool_result_as_the_child_wrote_it() -> None:
    # As Strands: the child's blocks as they are, not str(result) (its blocks joined, with a final newline).
    answer = step({"text": "see"}, {"text": "also"})
    child = make_agent("expert", answer)
    parent = make_agent("front", tool_call("expert", {"input": "q"}), tools=[child.as_tool(delegate=True)])
    result = await parent.invoke_async("question")
    tool_result = parent.messages[2]["content"][0]["toolResult"]
    assert tool_result["content"] == [{"text": "see"}, {"text": "also"}]
    assert result.message["content"] == tool_result["content"]
    cited = SimpleNamespace(message={"content": [{"json": {"id": 7}}, {"citationsContent": {
        "content": [{"text": "a"}, {"text": "b"}], "citations": []}}, {"reasoningContent": {}}]})
    assert delegated_blocks(cited) == [{"json": {"id": 7}}, {"text": "a\nb"}]
    assert parent.tool_registry.get("expert").tool_spec["description"].endswith(
        " Calling this tool will return its response directly to the user as the final answer."
        " It should be the only tool called in the turn.")


async def test_cancelling_the_parent_cancels_the_child() -> None:
    child = make_agent("sleepy", text("zzz", delay=300))
    parent = make_agent("boss", tool_call("sleepy", {"input": "nap"}), tools=[child])
    task = asyncio.create_task(parent.invoke_async("go"))
    await asyncio.sleep(0.2)
    parent.cancel()
    result = await asyncio.wait_for(task, 120)  # the child's model would answer after 300 s
    assert result.stop_reason == "cancelled"


def test_bad_tool_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="must match"):
        Agent(ScriptedModel(), name="has space").as_tool()


# -- interrupted turns parked in the parent: serialization and fresh instances (no subprocess, no Ray) --------


def _answers(interrupts: list[Any], response: str = "yes") -> list[dict[str, Any]]:
    return [{"interruptResponse": {"interruptId": item.id, "response": response}} for item in interrupts]


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _outcome(parent: Agent, children: dict[str, Agent], result: Any) -> dict[str, Any]:
    return _json({"text": str(result), "stop_reason": result.stop_reason, "messages": parent.messages,
                  "children": {name: child.messages for name, child in children.items()},
                  "states": {name: child.state.get() for name, child in children.items()}})


@pytest.mark.parametrize("scenario", ["basic", "preserve", "delegate", "nested", "pair"])
async def test_fresh_instances_resume_from_the_json_of_the_parent(scenario: str, tmp_path: Path) -> None:
    same_parent, same_children = build(scenario, resume=False, log=tmp_path / "same.log")
    first = await same_parent.invoke_async("start")
    expected = _outcome(same_parent, same_children, await same_parent.invoke_async(_answers(first.interrupts)))

    old_parent, _ = build(scenario, resume=False, log=tmp_path / "fresh.log")
    paused = await old_parent.invoke_async("start")
    stored = _json({"messages": old_parent.messages, "interrupt_state": old_parent._interrupt_state.to_dict()})
    assert set(stored["interrupt_state"]["context"][PARKED_TURNS_KEY]) == {
        item.id.split(":")[2] for item in paused.interrupts}
    parent, children = build(scenario, resume=True, log=tmp_path / "fresh.log")
    parent.messages = stored["messages"]
    parent._interrupt_state = InterruptState.from_dict(stored["interrupt_state"])
    resumed = _outcome(parent, children, await parent.invoke_async(_answers(paused.interrupts)))

    assert resumed == expected
    assert sorted((tmp_path / "fresh.log").read_text().splitlines()) == sorted(
        (tmp_path / "same.log").read_text().splitlines())
    for agent in (parent, *children.values()):
        agent.model.assert_complete()  # type: ignore[attr-defined]
    assert not parent._interrupt_state.activated and parent._interrupt_state.context == {}


def test_parked_turn_round_trips_through_json() -> None:
    child = Agent(ScriptedModel(), messages=[{"role": "user", "content": [{"text": "q"}]}], state={"k": [1, 2]})
    child.interrupt_state.interrupts["i-1"] = Interrupt(id="i-1", name="ask", reason={"why": "x"})
    child.interrupt_state.context = {"tool_use_message": {"role": "assistant", "content": []}, "tool_results": []}
    child.interrupt_state.activate()
    baseline = Agent(ScriptedModel(), state={"k": []}).snapshot()
    turn = ParkedTurn.capture(child, [child.interrupt_state.interrupts["i-1"]], baseline)
    again = ParkedTurn.from_dict(_json(turn.to_dict()))
    assert again == turn
    assert again.snapshot.model_state is None  # only the conversation is parked
    fresh = Agent(ScriptedModel())
    again.load_into(fresh)
    assert fresh.messages == child.messages and fresh.state.get() == {"k": [1, 2]}
    assert fresh.interrupt_state.to_dict() == child.interrupt_state.to_dict()
    assert [(i.id, i.name, i.reason) for i in again.interrupts("v1:agent_as_tool:t:")] == [
        ("v1:agent_as_tool:t:i-1", "ask", {"why": "x"})]


@pytest.mark.parametrize(("change", "field"), [
    ({"version": 99}, "version"),
    ({"snapshot": {"agent_id": "a", "name": "n", "messages": "nope"}}, "snapshot.messages"),
    ({"interrupt_ids": None}, "'interrupt_ids'"),
    ({"baseline": {"messages": []}}, "baseline.agent_id"),
    ({"snapshot": {"agent_id": "a", "name": "n", "interrupt_state": {"interrupts": {"x": {"name": "n"}}}}},
     "interrupts.x"),
])
def test_a_bad_parked_turn_names_the_field(change: dict[str, Any], field: str) -> None:
    data = ParkedTurn(interrupt_ids=["i"], snapshot=Agent(ScriptedModel()).snapshot()).to_dict()
    with pytest.raises(RayHarnessError, match=re.escape(field)):
        ParkedTurn.from_dict({**data, **change})


async def test_the_child_is_free_while_the_parent_holds_its_turn(tmp_path: Path) -> None:
    parent, children = build("basic", resume=False, log=tmp_path / "log")
    ops = children["ops"]
    baseline = _json(ops.messages)
    first = await parent.invoke_async("start")
    assert first.stop_reason == "interrupt"
    assert ops.messages == baseline and not ops._interrupt_state.activated and ops.state.get() == {"role": "ops"}
    turn = ParkedTurn.from_dict(parent._interrupt_state.context[PARKED_TURNS_KEY]["p-1"])
    assert len(turn.snapshot.messages) == len(baseline) + 2
    assert turn.baseline is not None
    assert (turn.baseline.messages, turn.baseline.state) == (baseline, {"role": "ops"})
    assert turn.snapshot.state == {"role": "ops", "checked": "db"}


async def test_preserve_context_child_keeps_its_paused_turn_too(tmp_path: Path) -> None:
    parent, children = build("preserve", resume=False, log=tmp_path / "log")
    await parent.invoke_async("start")
    ops = children["ops"]
    assert ops._interrupt_state.activated and len(ops.messages) == 4  # hi/ready + prompt, tool use
    turn = ParkedTurn.from_dict(parent._interrupt_state.context[PARKED_TURNS_KEY]["p-1"])
    assert turn.baseline is None and turn.snapshot.messages == ops.messages


async def test_only_the_answered_child_runs_the_other_is_parked_again(tmp_path: Path) -> None:
    log = tmp_path / "log"
    parent, children = build("pair", resume=False, log=log)
    first = await parent.invoke_async("start")
    by_call = {item.id.split(":")[2]: item for item in first.interrupts}
    second = await parent.invoke_async(_answers([by_call["p-1"]]))
    assert second.stop_reason == "interrupt"
    assert [item.id for item in second.interrupts] == [by_call["p-2"].id]
    assert set(parent._interrupt_state.context[PARKED_TURNS_KEY]) == {"p-2"}
    assert len(children["ops2"].model.calls) == 1  # type: ignore[attr-defined]  # not run again
    assert sorted(log.read_text().splitlines()) == ["ops check db", "ops wipe db", "ops2 check cache"]
    third = await parent.invoke_async(_answers(second.interrupts))
    assert str(third) == "boss: ops: db healthy | wiped db (checked: db) | ops2: cache healthy | wiped cache " \
                         "(checked: cache)\n"
    assert len(parent.model.calls) == 2  # type: ignore[attr-defined]


async def test_a_child_with_two_interrupts_answered_one_at_a_time(tmp_path: Path) -> None:
    log = tmp_path / "log"
    ops = Agent(ScriptedModel(tool_calls(("wipe", {"target": "db"}, "w-1"), ("wipe", {"target": "cache"}, "w-2")),
                              echo_last_result("ops")), tools=ops_tools(log), hooks=[confirm_wipe], name="ops")
    parent = Agent(ScriptedModel(tool_call("ops", {"input": "wipe all"}, tool_use_id="p-1"), echo_last_result("boss")),
                   tools=[ops], name="boss")
    first = await parent.invoke_async("start")
    assert len(first.interrupts) == 2
    second = await parent.invoke_async(_answers(first.interrupts[:1]))
    assert [item.id for item in second.interrupts] == [first.interrupts[1].id]
    assert log.read_text() == f"ops wipe {first.interrupts[0].reason['target']}\n"
    third = await parent.invoke_async(_answers(second.interrupts, "no"))
    assert "wipe refused: no" in str(third)
    assert len(ops.model.calls) == 2 and ops.messages == []  # type: ignore[attr-defined]


async def test_unknown_interrupt_id_raises_naming_it_and_changes_nothing(tmp_path: Path) -> None:
    parent, _ = build("nested", resume=False, log=tmp_path / "log")
    first = await parent.invoke_async("start")
    before = _json({"messages": parent.messages, "state": parent._interrupt_state.to_dict()})
    bad_id = "v1:agent_as_tool:p-1:no-such-interrupt"
    with pytest.raises(KeyError, match=re.escape(bad_id)):
        await parent.invoke_async([*_answers(first.interrupts),
                                   {"interruptResponse": {"interruptId": bad_id, "response": "yes"}}])
    assert _json({"messages": parent.messages, "state": parent._interrupt_state.to_dict()}) == before
    done = await parent.invoke_async(_answers(first.interrupts))
    assert str(done) == "boss: manager: ops: db healthy | wiped db (checked: db)\n"


async def test_an_answer_without_a_parked_turn_is_refused_not_run_from_scratch(tmp_path: Path) -> None:
    parent, children = build("basic", resume=False, log=tmp_path / "log")
    first = await parent.invoke_async("start")
    del parent._interrupt_state.context[PARKED_TURNS_KEY]  # e.g. a session written before turns were parked
    parent.model = ScriptedModel(echo_last_result("boss"))
    done = await parent.invoke_async(_answers(first.interrupts))
    assert "did NOT run" in str(done)
    assert len(children["ops"].model.calls) == 1  # type: ignore[attr-defined]


async def test_a_child_busy_with_another_caller_is_left_alone() -> None:
    gate, started = asyncio.Event(), asyncio.Event()

    async def wait(call: Any) -> str:
        started.set()
        await gate.wait()
        return "child done"

    child = Agent(ScriptedModel([wait]), name="child")
    parent = Agent(ScriptedModel([tool_call("child", {"input": "hi"}, tool_use_id="c-1"), "parent done"]),
                   tools=[child.as_tool()], name="parent")
    direct = asyncio.create_task(child.invoke_async("direct"))
    await started.wait()  # the direct invocation holds the child
    result = await parent.invoke_async("go")
    assert result.text == "parent done"
    tool_result = parent.messages[2]["content"][0]["toolResult"]
    assert tool_result["status"] == "error" and "already running" in tool_result["content"][0]["text"]
    assert child.messages[0]["content"][0]["text"] == "direct"  # not reset under the running invocation
    gate.set()
    assert (await direct).text == "child done"


async def test_a_parent_closed_mid_child_leaves_the_child_idle_when_aclose_returns() -> None:
    """The parent's stream closed while its agent-as-tool child runs tools: the child's run is over (its tools
    ended, its history rolled back) when ``aclose()`` returns, so the parent's next call reaches an idle child."""
    from tests.closing import BOTH_ENDED, two_waiting_tools

    tools: list[str] = []
    child = two_waiting_tools(tools)
    child.name = "helper"
    parent = Agent(ScriptedModel(tool_call("helper", {"input": "q"}), tool_call("helper", {"input": "q2"}),
                                 text("done")), name="parent", tools=[child.as_tool()])
    stream = parent.stream_async("go")
    async for event in stream:
        if event.get("type") == "tool_stream" and tools:
            break
    await stream.aclose()
    assert sorted(tools) == BOTH_ENDED and child.messages == [] and parent.messages == []
    child.model._steps.append(text("fine"))  # type: ignore[attr-defined]
    result = await parent.invoke_async("again")
    assert str(result).strip() == "done"
    assert "Agent error" not in json.dumps(parent.messages) and "already processing" not in json.dumps(parent.messages)
