"""ray_harness.vended_tools: sleep, stop, handoff_to_user and notebook, in an Agent driven by a ScriptedModel."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent
from ray_harness.hooks import BeforeToolCallEvent
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls
from ray_harness.tools.base import ToolContext
from ray_harness.vended_tools import (
    HANDOFF_INTERRUPT_NAME,
    handoff_to_user,
    make_handoff_to_user,
    make_notebook,
    make_sleep,
    make_stop,
    notebook,
    sleep,
    stop,
)
from ray_harness.vended_tools.sleep import SleepCancelledError


def tool_results(agent: Agent) -> list[Any]:
    """Each tool result's status and its one content block's text or JSON, in history order."""
    return [(block["toolResult"]["status"], *block["toolResult"]["content"][0].values())
            for message in agent.messages for block in message["content"] if "toolResult" in block]


def run_tools(tools: list[Any], *calls: tuple[str, dict[str, Any]], **agent_args: Any) -> Agent:
    agent = Agent(ScriptedModel(tool_calls(*calls), text("done")), tools=tools, **agent_args)
    agent("go")
    return agent


# -- sleep --------------------------------------------------------------------------------------------------------


def test_sleep_sleeps_and_rejects_bad_durations_naming_the_field() -> None:
    agent = run_tools([sleep], ("sleep", {"duration": 0}), ("sleep", {"duration": 0.01}), ("sleep", {"duration": 61}),
                      ("sleep", {"duration": -1}), ("sleep", {"duration": "5"}), ("sleep", {"duration": True}), ("sleep", {}))
    ok, short, too_long, negative, string, boolean, missing = tool_results(agent)
    assert ok == ("success", "Slept for 0 seconds") and short == ("success", "Slept for 0.01 seconds")
    for result, reason in ((too_long, "less than or equal to 60"), (negative, "greater than or equal to 0"),
                           (string, "valid number"), (boolean, "valid number"), (missing, "required")):
        assert result[0] == "error" and "input.duration" in result[1] and reason in result[1], result


def test_make_sleep_checks_its_cap() -> None:
    assert make_sleep(max_duration=5).tool_spec["inputSchema"]["json"]["properties"]["duration"]["maximum"] == 5
    for bad in (0, -1, float("inf"), float("nan"), True, "5"):
        with pytest.raises(ValueError, match="max_duration"):
            make_sleep(max_duration=bad)  # type: ignore[arg-type]


class _WatchedSignal(threading.Event):
    """A cancel signal that tells the test once the tool is waiting on it (its second look: the watcher's poll)."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0
        self.waited_on = asyncio.Event()

    def is_set(self) -> bool:
        self.looks += 1
        if self.looks >= 2:
            self.waited_on.set()
        return super().is_set()


def _use(name: str, tool_input: dict[str, Any]) -> Any:
    return {"toolUseId": f"t-{name}", "name": name, "input": tool_input}


async def _result(tool: Any, use: Any, context: ToolContext) -> Any:
    events = [event async for event in tool.stream(use, context)]
    return events[-1]["tool_result"]


async def test_a_cancel_ends_a_running_sleep() -> None:
    signal = _WatchedSignal()
    use = _use("sleep", {"duration": 60})
    running = asyncio.ensure_future(_result(sleep, use, ToolContext(tool_use=use, agent=None, cancel_signal=signal)))
    await signal.waited_on.wait()  # the sleep is parked, waiting on the signal
    assert not running.done()
    signal.set()
    with pytest.raises(SleepCancelledError, match="sleep cancelled"):  # the loop makes it an error result
        await running  # a sleep that ignored the cancel would return "Slept for 60 seconds" here


async def test_a_cancel_before_a_sleep_skips_it() -> None:
    signal = threading.Event()
    signal.set()
    use = _use("sleep", {"duration": 60})
    with pytest.raises(SleepCancelledError, match="sleep cancelled"):
        await _result(sleep, use, ToolContext(tool_use=use, agent=None, cancel_signal=signal))


async def test_agent_cancel_interrupts_the_sleep_tool() -> None:
    agent = Agent(ScriptedModel(tool_call("sleep", {"duration": 30}), text("never")), tools=[sleep])
    sleeping = asyncio.Event()
    agent.add_hook(lambda event: sleeping.set(), BeforeToolCallEvent)

    async def cancel_when_sleeping() -> None:
        await sleeping.wait()
        agent.cancel()

    _, result = await asyncio.gather(cancel_when_sleeping(), agent.invoke_async("wait"))
    assert result.stop_reason == "cancelled"
    assert tool_results(agent) == [("error", "Error: sleep cancelled")]


# -- stop ---------------------------------------------------------------------------------------------------------


def test_stop_ends_the_loop_with_its_message_after_the_batch() -> None:
    # One scripted step: a second model call would raise ScriptError.
    model = ScriptedModel(tool_calls(("stop", {"message": "All done."}), ("sleep", {"duration": 0})))
    agent = Agent(model, tools=[stop, sleep])
    result = agent("work")
    assert result.stop_reason == "cancelled"
    assert tool_results(agent) == [("success", "All done."), ("success", "Slept for 0 seconds")]  # the sibling ran
    assert agent.messages[-1] == {"role": "assistant", "content": [{"text": "All done."}]}
    assert len(model.calls) == 1


def test_stop_without_a_message_and_its_length_cap() -> None:
    agent = Agent(ScriptedModel(tool_call("stop", {})), tools=[stop])
    assert agent("work").stop_reason == "cancelled"
    assert tool_results(agent) == [("success", "Agent loop stopped.")]
    capped = run_tools([make_stop(max_message_length=3)], ("stop", {"message": "four"}))
    ((status, message),) = tool_results(capped)
    assert status == "error" and "`message` is 4 characters long; the maximum is 3" in message
    with pytest.raises(ValueError, match="max_message_length"):
        make_stop(max_message_length=0)


# -- handoff_to_user ----------------------------------------------------------------------------------------------


def test_handoff_asks_through_an_interrupt_and_returns_the_answer() -> None:
    model = ScriptedModel(tool_call("ask", {"message": "Deploy to prod?"}), text("Deploying."))
    agent = Agent(model, tools=[make_handoff_to_user(name="ask")])
    first = agent("deploy")
    assert first.stop_reason == "interrupt"
    (asked,) = first.interrupts
    assert (asked.name, asked.reason) == (HANDOFF_INTERRUPT_NAME, "Deploy to prod?")  # the name survives a rename
    second = agent([{"interruptResponse": {"interruptId": asked.id, "response": "yes, go"}}])
    assert second.stop_reason == "end_turn"
    assert tool_results(agent) == [("success", "yes, go")]


def test_handoff_refuses_a_blank_message() -> None:
    agent = run_tools([handoff_to_user], ("handoff_to_user", {"message": "  "}), ("handoff_to_user", {}))
    blank, missing = tool_results(agent)
    assert blank == ("error", "Error: `message` must not be empty")
    assert missing[0] == "error" and "input.message" in missing[1]


# -- notebook -----------------------------------------------------------------------------------------------------


def test_notebook_modes_keep_the_notebooks_in_agent_state() -> None:
    agent = run_tools(
        [notebook],
        ("notebook", {"mode": "list"}),
        ("notebook", {"mode": "create", "name": "plan", "new_str": "step one\nstep three"}),
        ("notebook", {"mode": "write", "name": "plan", "insert_line": "one", "new_str": "step two"}),
        ("notebook", {"mode": "write", "name": "plan", "old_str": "three", "new_str": "3"}),
        ("notebook", {"mode": "write", "name": "plan", "new_str": "step four"}),
        ("notebook", {"mode": "write", "name": "plan", "insert_line": 0, "new_str": "# Plan"}),
        ("notebook", {"mode": "read", "name": "plan", "read_range": [2, -2]}),
        ("notebook", {"mode": "list"}),
        ("notebook", {"mode": "clear", "name": "plan"}),
        ("notebook", {"mode": "read", "name": "plan"}),
    )
    texts = [text for _, text in tool_results(agent)]
    assert texts == [
        "Available notebooks:\n- default: Empty",
        "Created notebook 'plan' with specified content",
        "Inserted text at line 2 in notebook 'plan'",
        "Replaced text in notebook 'plan'",
        "Appended text to notebook 'plan'",
        "Inserted text at line 1 in notebook 'plan'",
        "2: step one\n3: step two\n4: step 3",
        "Available notebooks:\n- default: Empty\n- plan: 5 lines",
        "Cleared notebook 'plan'",
        "Notebook 'plan' is empty",
    ]
    assert agent.state.get("notebooks") == {"default": "", "plan": ""}


def test_notebook_errors_name_what_is_wrong() -> None:
    agent = run_tools(
        [make_notebook(max_notebook_size_bytes=8)],
        ("notebook", {"mode": "write", "name": "missing", "new_str": "x"}),
        ("notebook", {"mode": "write", "new_str": "x", "old_str": "a", "insert_line": 1}),
        ("notebook", {"mode": "write"}),
        ("notebook", {"mode": "create", "new_str": "123456789"}),
        ("notebook", {"mode": "read", "read_range": [1]}),
        ("notebook", {"mode": "erase"}),
    )
    missing, ambiguous, nothing, too_big, bad_range, bad_mode = (text for _, text in tool_results(agent))
    assert missing == "Error: Notebook 'missing' not found"
    assert "either `old_str` (replace) or `insert_line` (insert), not both" in ambiguous
    assert "write needs `new_str`" in nothing
    assert too_big == "Error: Notebook 'default' content (9 bytes) would exceed the maximum of 8 bytes"
    assert "input.read_range" in bad_range and "input.mode" in bad_mode
    assert agent.state.get("notebooks") is None  # nothing was stored by a failed call


def test_notebook_refuses_malformed_state() -> None:
    agent = run_tools([notebook], ("notebook", {"mode": "list"}), state={"notebooks": ["not", "a", "dict"]})
    assert tool_results(agent) == [("error", "Error: agent.state['notebooks'] is malformed: expected a dict of "
                                             "notebook names to texts")]


# -- shipping -----------------------------------------------------------------------------------------------------


def test_an_agent_with_the_tools_pickles_and_the_copy_calls_them() -> None:
    tools = [sleep, stop, handoff_to_user, notebook, make_sleep(max_duration=2, name="nap")]
    model = ScriptedModel(tool_calls(("notebook", {"mode": "create", "new_str": "shipped"}), ("nap", {"duration": 3}),
                                     ("nap", {"duration": 0})), tool_call("stop", {"message": "bye"}))
    agent = Agent(model, tools=tools)
    copy = cloudpickle.loads(cloudpickle.dumps(agent))
    assert copy("go").stop_reason == "cancelled"
    created, capped, napped, stopped = tool_results(copy)
    assert created == ("success", "Created notebook 'default' with specified content")
    assert capped[0] == "error" and "less than or equal to 2" in capped[1]  # the factory's cap shipped too
    assert (napped, stopped) == (("success", "Slept for 0 seconds"), ("success", "bye"))
    assert copy.state.get("notebooks") == {"default": "shipped"}
    assert agent.messages == []  # the original never ran


# -- Strands' surface ---------------------------------------------------------------------------------------------

NOT_PROVIDED: set[str] = set()


def test_strands_names_factories_and_tool_specs_are_ours() -> None:
    import inspect

    import strands.vended_tools as strands_tools

    import ray_harness.vended_tools as ours

    assert set(strands_tools.__all__) - NOT_PROVIDED == set(ours.__all__)
    for name in ours.__all__:
        theirs, mine = getattr(strands_tools, name), getattr(ours, name)
        if name.startswith("make_"):  # the same keyword-only parameters with the same defaults
            shape = [(p.name, p.kind, p.default) for p in inspect.signature(mine).parameters.values()]
            assert shape == [(p.name, p.kind, p.default) for p in inspect.signature(theirs).parameters.values()], name
        elif name != "HANDOFF_INTERRUPT_NAME":  # the model sees the same tool: name, description, inputs
            spec, their_spec = mine.tool_spec, theirs.tool_spec
            assert (spec["name"], spec["description"]) == (their_spec["name"], their_spec["description"])
            schema, their_schema = spec["inputSchema"]["json"], their_spec["inputSchema"]["json"]
            assert sorted(schema["required"]) == sorted(their_schema.get("required", [])), name
            assert {key: value.get("type") for key, value in schema["properties"].items()} == \
                {key: value.get("type") for key, value in their_schema["properties"].items()}, name
    assert ours.HANDOFF_INTERRUPT_NAME == strands_tools.HANDOFF_INTERRUPT_NAME
