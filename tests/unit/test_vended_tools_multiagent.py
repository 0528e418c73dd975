"""ray_harness.vended_tools subagent and swarm: children built from the model's arguments, in ScriptedModel agents."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent
from ray_harness.multiagent import AgentSpec, Choice, Fixed, Option, Preset
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools import tool
from ray_harness.tools.base import ToolContext, until_set
from ray_harness.vended_tools import (
    HANDOFF_INTERRUPT_NAME,
    handoff_to_user,
    make_subagent,
    make_swarm,
    subagent,
    swarm,
)
from ray_harness.vended_tools.subagent import DEPTH_STATE_KEY, fork_messages


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


def tool_results(agent: Agent) -> list[tuple[str, str]]:
    return [(block["toolResult"]["status"], block["toolResult"]["content"][0].get("text", ""))
            for message in agent.messages for block in message["content"] if "toolResult" in block]


class Builder:
    """A builder that records the specs and gives each child its own scripted model (picklable: a plain class)."""

    def __init__(self, scripts: dict[str, list[Any]], tools: list[Any] | None = None) -> None:
        self.scripts = scripts
        self.tools = tools or []
        self.specs: list[AgentSpec] = []
        self.models: dict[str, ScriptedModel] = {}

    def __call__(self, spec: AgentSpec) -> Agent:
        self.specs.append(spec)
        name = str(spec.name)
        if name not in self.models:  # a child rebuilt to resume continues its script
            self.models[name] = ScriptedModel(*self.scripts[name])
        model = self.models[name]
        return Agent(model, tools=list(self.tools), system_prompt=spec.instructions, name=str(spec.name))


# -- subagent ----------------------------------------------------------------------------------------------------


def test_subagent_runs_a_child_of_the_parents_model_and_answers_with_its_text() -> None:
    model = ScriptedModel(tool_call("subagent", {"task": "find x", "instructions": "you find"}),
                          tool_call("lookup", {"key": "x"}), text("x is 1"), text("done"))
    parent = Agent(model, tools=[subagent, lookup])
    assert str(parent("go")).strip() == "done"
    assert tool_results(parent) == [("success", "x is 1\n")]
    child_call = model.calls[1]
    assert child_call.system_prompt == "you find" and child_call.last_text == "find x"
    assert set(child_call.tool_names) == {"subagent", "lookup"}  # every parent tool, by default


def test_subagent_hands_the_builder_the_resolved_spec() -> None:
    builder = Builder({"helper": [text("ok")]})
    tool_ = make_subagent(name="helper", builder=builder, presets={"reader": Preset(instructions="read",
                                                                                      tools=["lookup"])},
                          tools=Choice([Option("lookup")], multiple=True), model=Choice(["m-1"]))
    parent = Agent(ScriptedModel(tool_call("helper", {"task": "t", "agent_type": "reader", "model": "m-1"}),
                                 text("done")), tools=[tool_])
    parent("go")
    assert builder.specs == [AgentSpec(name="helper", agent_type="reader", instructions="read", tools=["lookup"],
                                       model="m-1")]
    assert tool_results(parent) == [("success", "ok\n")]


def test_subagent_streams_the_childs_events_as_tool_stream_events() -> None:
    builder = Builder({"subagent": [text("child says hi")]})
    parent = Agent(ScriptedModel(tool_call("subagent", {"task": "t"}), text("done")),
                   tools=[make_subagent(builder=builder)])

    async def collect() -> list[dict[str, Any]]:
        return [event async for event in parent.stream_async("go") if event.get("type") == "tool_stream"]

    streamed = asyncio.run(collect())
    data = [event["tool_stream_event"]["data"] for event in streamed]
    assert any(item.get("type") == "message" and item["message"]["role"] == "assistant" for item in data)


def test_subagent_errors_reach_the_model_as_error_results() -> None:
    builder = Builder({})
    parent = Agent(ScriptedModel(tool_call("subagent", {"task": " "}), tool_call("subagent", {"task": "t",
                                                                                            "agent_type": "boss"}),
                                 text("done")), tools=[make_subagent(builder=builder)])
    parent("go")
    assert tool_results(parent) == [
        ("error", "Missing required parameter 'task': describe the task to delegate."),
        ("error", "Subagent error: Unknown agent_type 'boss'; valid values: ['generalist']."),
    ]


def test_delegation_stops_at_max_depth() -> None:
    model = ScriptedModel(tool_call("subagent", {"task": "level 1"}), tool_call("subagent", {"task": "level 2"}),
                          text("did it myself"), text("done"))
    parent = Agent(model, tools=[make_subagent(max_depth=1)])
    parent("go")
    (outer,) = tool_results(parent)
    assert outer == ("success", "did it myself\n")
    assert "Delegation depth limit reached (1 levels)" in model.calls[2].messages[-1]["content"][0]["toolResult"][
        "content"][0]["text"]
    assert DEPTH_STATE_KEY not in parent.state.get()


def test_context_all_forks_the_parents_conversation() -> None:
    builder = Builder({"subagent": [text("ok")]})
    parent = Agent(ScriptedModel(text("earlier answer"), tool_call("subagent", {"task": "t", "context": "all"},
                                                                   text="delegating"), text("done")),
                   tools=[make_subagent(builder=builder, context=Choice(["none", "all", "no_tools"]))])
    parent("first question")
    parent("second question")
    sent = builder.models["subagent"].calls[0].messages
    assert [message["role"] for message in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[3]["content"] == [{"text": "delegating"}]  # the open call is left out
    assert sent[2]["content"] == [{"text": "second question"}] and sent[4]["content"][0]["text"].endswith("\n\nt")


def test_context_all_adds_the_task_to_a_last_user_turn() -> None:
    builder = Builder({"subagent": [text("ok")]})
    parent = Agent(ScriptedModel(tool_call("subagent", {"task": "t"}), text("done")),
                   tools=[make_subagent(builder=builder, context=Fixed("all"))])
    parent("question")
    (sent,) = builder.models["subagent"].calls[0].messages
    assert sent["content"][0] == {"text": "question"} and sent["content"][1]["text"].startswith("The conversation so far")


def test_context_no_tools_renders_the_text_turns() -> None:
    builder = Builder({"subagent": [text("ok")]})
    parent = Agent(ScriptedModel(tool_call("subagent", {"task": "t"}), text("done")),
                   tools=[make_subagent(builder=builder, context=Fixed("no_tools"))])
    parent("line one\nline two")
    prompt = builder.models["subagent"].calls[0].last_text
    assert prompt.startswith("<parent_context>\nuser: line one\n  line two\n</parent_context>") and prompt.endswith("t")


def test_fork_keeps_the_last_messages_from_a_user_turn() -> None:
    messages: list[Any] = [
        {"role": "user", "content": [{"text": "q1"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "1", "name": "x", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "1", "status": "success", "content": []}}]},
        {"role": "assistant", "content": [{"text": "a1"}]},
    ]
    assert [m["content"][0] for m in fork_messages(messages, 2)] == [m["content"][0] for m in messages]
    assert fork_messages(messages, None)[0] is not messages[0]  # copies


def test_a_childs_interrupt_pauses_the_parent_and_the_answer_resumes_the_child() -> None:
    builder = Builder({"subagent": [tool_call("handoff_to_user", {"message": "which one?"}), text("took the red")]},
                      tools=[handoff_to_user])
    parent = Agent(ScriptedModel(tool_call("subagent", {"task": "pick"}), text("done")),
                   tools=[make_subagent(builder=builder)])
    first = parent("go")
    assert first.stop_reason == "interrupt"
    (asked,) = first.interrupts
    assert (asked.name, asked.reason) == (HANDOFF_INTERRUPT_NAME, "which one?")
    second = parent([{"interruptResponse": {"interruptId": asked.id, "response": "red"}}])
    assert str(second).strip() == "done"
    assert tool_results(parent) == [("success", "took the red\n")]
    child_messages = builder.models["subagent"].calls[-1].messages
    assert child_messages[-1]["content"][0]["toolResult"]["content"][0]["text"] == "red"
    assert len(builder.specs) == 2  # rebuilt from the same input to resume: nothing waits in the tool


async def test_the_parents_cancel_reaches_the_child() -> None:
    started = asyncio.Event()

    @tool(context=True)
    async def wait(tool_context: ToolContext) -> str:
        """Wait until cancelled."""
        started.set()
        await until_set(tool_context.cancel_signal)
        return "cancelled"

    builder = Builder({"subagent": [tool_call("wait", {})]}, tools=[wait])
    parent = Agent(ScriptedModel(tool_call("subagent", {"task": "t"})), tools=[make_subagent(builder=builder)])
    run = asyncio.create_task(parent.invoke_async("go"))
    await started.wait()
    parent.cancel()
    result = await run
    assert result.stop_reason == "cancelled"
    assert tool_results(parent) == [("error", "Subagent was cancelled.")]
    assert len(builder.models["subagent"].calls) == 1  # the child stopped: no model call after its tool


def test_an_agent_holding_the_tools_pickles_and_its_copy_delegates() -> None:
    builder = Builder({"subagent": [text("from the copy")]})
    agent = Agent(ScriptedModel(tool_call("subagent", {"task": "t"}), text("done")),
                  tools=[make_subagent(builder=builder), swarm])
    copy = pickle.loads(cloudpickle.dumps(agent))
    copy("go")
    assert tool_results(copy) == [("success", "from the copy\n")]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_depth": 0}, "max_depth must be a positive integer"),
    ({"name": ""}, "name must be a non-empty string"),
    ({"context": "all"}, "context must be Fixed \\| Choice"),
    ({"tools": Choice(["a"])}, "tools=Choice\\(...\\) must be multiple=True"),
    ({"default_preset": "boss"}, "default_preset 'boss'"),
])
def test_make_subagent_names_a_bad_argument(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_subagent(**kwargs)


# -- swarm -------------------------------------------------------------------------------------------------------


def swarm_call(agents: list[dict[str, Any]], **extra: Any) -> Any:
    return tool_call("swarm", {"task": "plan a trip", "agents": agents, **extra})


def test_swarm_runs_the_team_the_model_described() -> None:
    builder = Builder({"scout": [tool_call("handoff_to_agent", {"agent_name": "writer", "message": "write it"}),
                                 text("handed over")],
                       "writer": [text("the plan")]}, tools=[lookup])
    parent = Agent(ScriptedModel(swarm_call([{"name": "scout", "instructions": "scout"},
                                             {"name": "writer", "instructions": "write"}]), text("done")),
                   tools=[make_swarm(builder=builder)])
    parent("go")
    ((status, output),) = tool_results(parent)
    assert status == "success" and "writer: the plan" in output
    assert [(spec.name, spec.instructions) for spec in builder.specs] == [("scout", "scout"), ("writer", "write")]
    assert builder.models["writer"].calls[0].tool_names == ("lookup", "handoff_to_agent")


def test_swarm_members_get_no_swarm_tool() -> None:
    model = ScriptedModel(swarm_call([{"name": "solo", "instructions": "work"}]), text("solo done"), text("done"))
    parent = Agent(model, tools=[swarm, make_swarm(name="team"), lookup])
    parent("go")
    assert tool_results(parent) == [("success", "solo: solo done")]
    assert set(model.calls[1].tool_names) == {"lookup", "handoff_to_agent"}


@pytest.mark.parametrize(("call", "message"), [
    (swarm_call([{"name": "a", "instructions": "x"}], entry_point="z"),
     "Error: entry_point 'z' does not match any agent name"),
    (swarm_call([{"name": "a", "instructions": "x"}, {"name": "b", "instructions": "y"}]),
     "Error: Between 1 and 1 agents required, got 2"),
    (swarm_call("a"), "Error: agents must be a list, got str"),  # type: ignore[arg-type]
])
def test_swarm_input_errors_reach_the_model(call: Any, message: str) -> None:
    parent = Agent(ScriptedModel(call, text("done")), tools=[make_swarm(max_agents=1)])
    parent("go")
    assert tool_results(parent) == [("error", message)]


def test_a_swarm_that_does_not_complete_is_an_error_with_its_partial_output() -> None:
    builder = Builder({"a": [tool_call("handoff_to_agent", {"agent_name": "b", "message": "go"}), text("a out")],
                       "b": [text("never")]})
    parent = Agent(ScriptedModel(swarm_call([{"name": "a", "instructions": "x"}, {"name": "b", "instructions": "y"}]),
                                 text("done")), tools=[make_swarm(builder=builder, max_handoffs=1, max_iterations=1)])
    parent("go")
    ((status, output),) = tool_results(parent)
    assert status == "error" and output.startswith("Error: Swarm stopped before completing (status=failed")


def test_a_members_interrupt_pauses_the_parent_and_the_answer_resumes_the_swarm() -> None:
    builder = Builder({"solo": [tool_call("handoff_to_user", {"message": "budget?"}), text("within 100")]},
                      tools=[handoff_to_user])
    parent = Agent(ScriptedModel(swarm_call([{"name": "solo", "instructions": "x"}]), text("done")),
                   tools=[make_swarm(builder=builder)])
    first = parent("go")
    assert first.stop_reason == "interrupt"
    (asked,) = first.interrupts
    assert asked.reason == {"name": HANDOFF_INTERRUPT_NAME, "reason": "budget?"}
    second = parent([{"interruptResponse": {"interruptId": asked.id, "response": "100"}}])
    assert str(second).strip() == "done"
    assert tool_results(parent) == [("success", "solo: within 100")]
    assert len(builder.specs) == 1  # the same swarm resumed


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_agents": 0}, "max_agents must be a positive integer"),
    ({"max_handoffs": 0}, "max_handoffs must be a positive integer"),
    ({"node_timeout": -1.0}, "node_timeout must be a positive number"),
    ({"repetitive_handoff_detection_window": -1}, "repetitive_handoff_detection_window must be a non-negative"),
    ({"instructions": Fixed(None), "model": "m"}, "model must be Inherit \\| Choice \\| Fixed"),
])
def test_make_swarm_names_a_bad_argument(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_swarm(**kwargs)
