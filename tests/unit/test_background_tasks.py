"""Background tool execution (Strands' ``Agent(background_tasks=...)``): routing, delivery, limits, cancel, pickling.

No test asserts timing: a background tool blocks on an event the test (or a cancel) sets, and the test waits for
a state with ``TaskManager.wait_until_settled`` or an event the tool sets.
"""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
import threading
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent, tool
from ray_harness.agent._sync import run_sync
from ray_harness.background_tasks import BackgroundTasksConfig
from ray_harness.background_tasks._manager import TaskManager
from ray_harness.hooks import AfterToolCallEvent, BeforeToolCallEvent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.testing.model import ModelCall, Step
from ray_harness.tools.base import ToolContext

MANAGE = "strands_manage_background_task"
FLAG = "_background_execution"
WAIT = 30.0  # a bound on waiting for a thread that should wake at once: a hang fails instead of blocking


def _manager(agent: Agent) -> TaskManager:
    manager: TaskManager = agent._background_tasks.manager
    return manager


def _settle(agent: Agent) -> None:
    run_sync(_manager(agent).wait_until_settled(threading.Event()))


def _runner_alive(agent: Agent) -> bool:
    """Whether the agent's runner thread is alive (other agents' runners may still be ending)."""
    return _manager(agent).thread is not None


def _delivered(agent: Agent) -> list[dict[str, Any]]:
    """The task records delivered into the history (the JSON of each synthetic ``get`` result)."""
    uses = {block["toolUse"]["toolUseId"] for message in agent.messages for block in message["content"]
            if "toolUse" in block and block["toolUse"]["name"] == MANAGE
            and block["toolUse"]["toolUseId"] == block["toolUse"]["input"].get("task_id")}  # the synthetic gets
    return [block["toolResult"]["content"][0]["json"] for message in agent.messages for block in message["content"]
            if "toolResult" in block and block["toolResult"]["toolUseId"] in uses]


def _task_id(call: ModelCall) -> str:
    found = re.findall(r"Task ID: ([0-9a-f-]{36})", json.dumps(call.messages))
    return str(found[-1])


class Gate:
    """A tool that records its inputs and blocks until released (or until its call is cancelled)."""

    def __init__(self, name: str = "slow") -> None:
        self.inputs: list[dict[str, Any]] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.cancelled = threading.Event()

        @tool(name=name, context=True)
        def slow(x: int, tool_context: ToolContext) -> str:
            """A slow operation.

            Args:
                x: A number.
            """
            self.inputs.append({"x": x})
            self.started.set()
            while not self.release.is_set():
                if tool_context.cancel_signal.wait(0.01):
                    self.cancelled.set()
                    return "stopped"
            return f"slow {x}"

        self.tool = slow


_RELEASE = threading.Event()  # module-level: the tool below pickles by reference


@tool(context=True)
def parked(tool_context: ToolContext) -> str:
    """Wait until released or cancelled."""
    while not _RELEASE.is_set():
        if tool_context.cancel_signal.wait(0.01):
            return "stopped"
    return "released"


@tool
def quick(x: int) -> str:
    """A quick operation.

    Args:
        x: A number.
    """
    return f"quick {x}"


@tool
def broken(x: int) -> str:
    """A failing operation.

    Args:
        x: A number.
    """
    raise ValueError(f"no {x}")


def test_the_model_flag_sends_a_call_to_the_background_and_the_result_comes_back_before_the_invocation_ends() -> None:
    seen: list[str] = []
    model = ScriptedModel(tool_call("quick", {"x": 1, FLAG: True}, tool_use_id="t1"), text("dispatched"),
                          text("got it"))
    agent = Agent(model, tools=[quick], background_tasks=True)
    agent.add_hook(lambda event: seen.append(event.result["content"][0]["text"]), AfterToolCallEvent)

    result = agent("go")

    assert result.stop_reason == "end_turn" and result.message["content"] == [{"text": "got it"}]
    ack = agent.messages[2]["content"][0]["toolResult"]
    assert ack["status"] == "success" and ack["content"][0]["text"].startswith("Background task dispatched.")
    assert agent.messages[1]["content"][0]["toolUse"]["input"] == {"x": 1, FLAG: True}  # the history keeps it
    assert [message["role"] for message in agent.messages] == ["user", "assistant", "user", "assistant",
                                                               "assistant", "user", "assistant"]
    get = agent.messages[4]["content"][0]["toolUse"]
    assert get["name"] == MANAGE and get["input"] == {"mode": "get", "task_id": get["toolUseId"]}
    delivered = agent.messages[5]["content"][0]["toolResult"]
    record = delivered["content"][0]["json"]
    assert record["status"] == "completed" and record["tool_use_id"] == "t1" and record["tool_name"] == "quick"
    assert delivered["content"][1:] == [{"text": "quick 1"}]
    assert seen == ["quick 1"]  # AfterToolCallEvent for the real run only, not for the acknowledgement
    assert _manager(agent).snapshots() == []  # delivered tasks are forgotten
    spec = next(spec for spec in model.calls[0].tool_specs if spec["name"] == "quick")
    assert spec["inputSchema"]["json"]["properties"][FLAG]["type"] == "boolean"
    manage = next(spec for spec in model.calls[0].tool_specs if spec["name"] == MANAGE)
    assert FLAG not in manage["inputSchema"]["json"]["properties"]
    runner = _manager(agent)._thread
    assert runner is not None
    runner.join(WAIT)  # with nothing queued or running, the runner thread ends by itself
    assert not runner.is_alive()


def test_without_the_flag_an_agentic_tool_runs_in_the_foreground_and_never_sees_the_flag() -> None:
    gate = Gate()
    gate.release.set()
    model = ScriptedModel(tool_call("slow", {"x": 2, FLAG: False}), text("done"))
    agent = Agent(model, tools=[gate.tool], background_tasks=True)
    agent("go")
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "slow 2"}]
    assert gate.inputs == [{"x": 2}]
    assert _manager(agent).snapshots() == []


def test_always_tools_go_to_the_background_and_never_tools_stay_in_the_foreground() -> None:
    model = ScriptedModel(tool_call("quick", {"x": 1}), tool_call("broken", {"x": 2, FLAG: True}),
                          text("done"), text("noted"))
    agent = Agent(model, tools=[quick, broken], background_tasks={"always": ["quick"], "never": [broken]})
    agent("go")
    specs = {spec["name"]: spec for spec in model.calls[0].tool_specs}
    assert FLAG not in specs["quick"]["inputSchema"]["json"]["properties"]
    assert FLAG not in specs["broken"]["inputSchema"]["json"]["properties"]
    assert agent.messages[2]["content"][0]["toolResult"]["content"][0]["text"].startswith("Background task")
    assert agent.messages[4]["content"][0]["toolResult"]["content"] == [{"text": "Error: no 2"}]  # foreground
    assert [record["status"] for record in _delivered(agent)] == ["completed"]


def test_a_failed_background_tool_is_delivered_with_its_error() -> None:
    model = ScriptedModel(tool_call("broken", {"x": 3, FLAG: True}), text("dispatched"), text("noted"))
    agent = Agent(model, tools=[broken], background_tasks=True)
    agent("go")
    [record] = _delivered(agent)
    assert record["status"] == "failed" and record["error"] == {"type": "tool_error", "message": "no 3"}


def test_without_waiting_results_join_the_history_before_the_next_model_call() -> None:
    gate = Gate()
    model = ScriptedModel(tool_call("slow", {"x": 1, FLAG: True}), text("started"), text("it finished"))
    agent = Agent(model, tools=[gate.tool], background_tasks={"wait_for_completion": False})
    try:
        assert agent("go").message["content"] == [{"text": "started"}]
        [task] = _manager(agent).snapshots()
        assert task["status"] in ("queued", "working")
        gate.release.set()
        _settle(agent)
        assert agent("anything new?").message["content"] == [{"text": "it finished"}]
    finally:
        gate.release.set()
        agent.shutdown()
    last_call = model.calls[-1].messages
    assert [message["role"] for message in last_call[-3:]] == ["user", "assistant", "user"]
    assert last_call[-3]["content"] == [{"text": "anything new?"}]
    assert last_call[-1]["content"][0]["toolResult"]["content"][1] == {"text": "slow 1"}
    assert _manager(agent).snapshots() == []


def test_the_manage_tool_lists_gets_and_cancels_tasks() -> None:
    gate = Gate()

    def cancel(call: ModelCall) -> Step:
        return tool_call(MANAGE, {"mode": "cancel", "task_id": _task_id(call)})

    def get(call: ModelCall) -> Step:
        return tool_call(MANAGE, {"mode": "get", "task_id": _task_id(call)})

    model = ScriptedModel(tool_call("slow", {"x": 1, FLAG: True}), tool_call(MANAGE, {"mode": "list"}), get,
                          cancel, tool_call(MANAGE, {"mode": "get"}), text("cancelled it"))
    agent = Agent(model, tools=[gate.tool], background_tasks=True)
    try:
        result = agent("go")
    finally:
        gate.release.set()
    results = [block["toolResult"] for message in agent.messages for block in message["content"]
               if "toolResult" in block]
    listing = results[1]["content"][0]["json"]["tasks"]
    assert [(task["tool_name"], task["status"] in ("queued", "working")) for task in listing] == [("slow", True)]
    assert results[2]["content"][0]["json"]["tool_name"] == "slow"
    assert results[3]["content"][0]["json"]["status"] == "cancelled"
    # The cancelled task is finished: its result joins the history before the next model call.
    assert results[4]["content"][0]["json"]["status"] == "cancelled"
    assert [record["status"] for record in _delivered(agent)] == ["cancelled"]
    assert results[5]["status"] == "error" and "Task ID is required for mode 'get'" in results[5]["content"][0]["text"]
    assert result.message["content"] == [{"text": "cancelled it"}]
    model.assert_complete()
    agent.shutdown()


def test_max_concurrency_queues_the_other_tasks() -> None:
    first, second = Gate(), Gate("slow2")
    model = ScriptedModel(tool_call("slow", {"x": 1}), tool_call("slow2", {"x": 2}), text("both started"))
    agent = Agent(model, tools=[first.tool, second.tool],
                  background_tasks={"always": ["slow", "slow2"], "max_concurrency": 1, "wait_for_completion": False})
    try:
        agent("go")
        assert first.started.wait(WAIT)
        statuses = {task["tool_name"]: task["status"] for task in _manager(agent).snapshots()}
        assert statuses == {"slow": "working", "slow2": "queued"}
        first.release.set()
        assert second.started.wait(WAIT)
        second.release.set()
        _settle(agent)
        assert [task["status"] for task in _manager(agent).snapshots()] == ["completed", "completed"]
    finally:
        first.release.set()
        second.release.set()
        agent.shutdown()


def test_a_task_that_runs_past_the_timeout_fails_and_is_signalled() -> None:
    gate = Gate()
    model = ScriptedModel(tool_call("slow", {"x": 1, FLAG: True}), text("waiting"), text("it timed out"))
    agent = Agent(model, tools=[gate.tool], background_tasks={"timeout": 0.05})
    try:
        agent("go")
    finally:
        gate.release.set()
    [record] = _delivered(agent)
    assert record["status"] == "failed" and record["error"] == {"type": "timeout", "message": "Timed out after 0.05s"}
    if gate.started.is_set():  # on a loaded host the time may run out before the tool started
        assert gate.cancelled.wait(WAIT)  # the running tool saw its cancel signal
    agent.shutdown()


def test_agent_cancel_on_an_idle_agent_cancels_its_background_tasks() -> None:
    gate = Gate()
    model = ScriptedModel(tool_call("slow", {"x": 1, FLAG: True}), text("started"), text("it was cancelled"))
    agent = Agent(model, tools=[gate.tool], background_tasks={"wait_for_completion": False})
    try:
        agent("go")
        assert gate.started.wait(WAIT)
        agent.cancel()
        assert gate.cancelled.wait(WAIT)  # the running tool saw its cancel signal
        [task] = _manager(agent).snapshots()
        assert task["status"] == "cancelled"
        agent("and?")
    finally:
        gate.release.set()
        agent.shutdown()
    assert [record["status"] for record in _delivered(agent)] == ["cancelled"]
    assert not _runner_alive(agent)


def test_a_cancelled_invocation_cancels_the_tasks_it_waits_for() -> None:
    gate = Gate()
    agent: Agent

    def cancel_then_answer(call: ModelCall) -> Step:
        agent.cancel()
        return text("never seen")

    model = ScriptedModel(tool_call("slow", {"x": 1, FLAG: True}), cancel_then_answer)
    agent = Agent(model, tools=[gate.tool], background_tasks=True)
    try:
        assert agent("go").stop_reason == "cancelled"
        assert [task["status"] for task in _manager(agent).snapshots()] == ["cancelled"]
    finally:
        gate.release.set()
        agent.shutdown()


def test_shutdown_cancels_running_tasks_and_ends_the_runner_thread() -> None:
    gate = Gate()
    model = ScriptedModel(tool_call("slow", {"x": 1, FLAG: True}), text("started"))
    agent = Agent(model, tools=[gate.tool], background_tasks={"wait_for_completion": False})
    try:
        agent("go")
        assert gate.started.wait(WAIT)
        agent.shutdown()
        assert gate.cancelled.is_set()
        assert [task["status"] for task in _manager(agent).snapshots()] == ["cancelled"]
        assert not _runner_alive(agent)
    finally:
        gate.release.set()


def test_an_agent_pickles_without_its_running_tasks() -> None:
    _RELEASE.clear()
    model = ScriptedModel(tool_call("parked", {FLAG: True}), text("started"))
    agent = Agent(model, tools=[parked, quick], background_tasks={"wait_for_completion": False})
    try:
        agent("go")
        copy = pickle.loads(cloudpickle.dumps(agent))  # as runtime="ray" ships agents to hosts
        [task] = _manager(copy).snapshots()
        assert task["status"] == "failed"
        assert task["error"] == {"type": "execution_error",
                                 "message": "Background task cannot resume after restoring persisted state"}
        assert _manager(copy).thread is None
        assert _manager(agent).snapshots()[0]["status"] in ("queued", "working")  # the original still runs it
        copy.model = ScriptedModel(text("it could not finish"), tool_call("quick", {"x": 5, FLAG: True}),
                                   text("again"), text("more"), text("more"))
        copy("status?")
        assert [record["status"] for record in _delivered(copy)] == ["failed"]
        copy("start another")  # the copy runs new tasks on a runner of its own
        _settle(copy)
        statuses = [record["status"] for record in _delivered(copy) + _manager(copy).snapshots()]
        assert statuses == ["failed", "completed"]
    finally:
        _RELEASE.set()
        agent.shutdown()
    copy.shutdown()


def test_direct_tool_calls_run_in_the_foreground() -> None:
    agent = Agent(ScriptedModel(), tools=[quick], background_tasks={"always": ["quick"]})
    assert agent.tool.quick(x=4)["content"] == [{"text": "quick 4"}]
    assert _manager(agent).snapshots() == []


def test_before_tool_call_hooks_see_the_background_call_at_dispatch() -> None:
    order: list[str] = []
    model = ScriptedModel(tool_call("quick", {"x": 1, FLAG: True}), text("dispatched"), text("done"))
    agent = Agent(model, tools=[quick], background_tasks=True)
    agent.add_hook(lambda event: order.append(f"before {event.tool_use['input']}"), BeforeToolCallEvent)
    agent.add_hook(lambda event: order.append(f"after {event.result['content'][0]['text']}"), AfterToolCallEvent)
    agent("go")
    assert order == [f"before {{'x': 1, '{FLAG}': True}}", "after quick 1"]


@pytest.mark.parametrize(("config", "match"), [
    ("yes", "background_tasks must be True"),
    ({"max_concurrency": 0}, "max_concurrency"),
    ({"max_concurrency": True}, "max_concurrency"),
    ({"timeout": -1}, "timeout"),
    ({"timeout": float("nan")}, "timeout"),
    ({"wait_for_completion": "no"}, "wait_for_completion"),
    ({"always": "quick"}, r"background_tasks\['always'\]"),
    ({"never": [3]}, r"background_tasks\['never'\]\[0\]"),
    ({"bogus": 1}, "unknown key.*bogus"),
    ({"always": ["quick"], "never": [quick]}, "Tool 'quick' cannot be configured as both 'always' and 'never'"),
])
def test_a_bad_config_is_named(config: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        Agent(ScriptedModel(), tools=[quick], background_tasks=config)


def test_a_tool_that_declares_the_flag_or_cannot_honour_its_mode_is_refused() -> None:
    @tool(inputSchema={"type": "object", "properties": {FLAG: {"type": "boolean"}}})
    def flagged(**kwargs: Any) -> str:
        """Takes the reserved flag."""
        return "no"

    with pytest.raises(TypeError, match="Tool 'flagged' declares reserved parameter '_background_execution'"):
        Agent(ScriptedModel(), tools=[flagged], background_tasks=True)
    child = Agent(ScriptedModel(), name="child")
    with pytest.raises(TypeError, match="Tool 'child' cannot run in the background"):
        Agent(ScriptedModel(), tools=[child.as_tool(delegate=True)], background_tasks={"always": ["child"]})


def test_false_or_none_adds_nothing_and_the_config_type_is_a_dict() -> None:
    config: BackgroundTasksConfig = {"max_concurrency": 2}
    assert Agent(ScriptedModel(), background_tasks=False)._background_tasks is None
    assert Agent(ScriptedModel(), background_tasks=config)._background_tasks is not None
    assert MANAGE not in Agent(ScriptedModel(), tools=[quick]).tool_names


def test_an_agent_without_background_tasks_does_not_import_the_package() -> None:
    code = ("import sys; from ray_harness import Agent; from ray_harness.testing import ScriptedModel, text; "
            "Agent(ScriptedModel(text('hi')))('hello'); "
            "print(any(name.startswith('ray_harness.background_tasks') for name in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


async def test_a_streamed_invocation_shows_the_acknowledgement_as_the_tool_result() -> None:
    model = ScriptedModel(tool_call("quick", {"x": 1, FLAG: True}, tool_use_id="t1"), text("dispatched"),
                          text("done"))
    agent = Agent(model, tools=[quick], background_tasks=True)
    events = [event async for event in agent.stream_async("go")]
    results = [event["tool_result"] for event in events if event.get("type") == "tool_result"]
    assert [result["toolUseId"] for result in results] == ["t1"]
    assert results[0]["content"][0]["text"].startswith("Background task dispatched.")
    assert events[-1]["result"].message["content"] == [{"text": "done"}]
    assert [record["status"] for record in _delivered(agent)] == ["completed"]
    await agent.shutdown_async()
    assert not _runner_alive(agent)


def test_the_config_is_exported_where_strands_exports_it() -> None:
    import ray_harness
    import ray_harness.background_tasks as package

    assert package.__all__ == ["BackgroundTasksConfig"]
    assert ray_harness.BackgroundTasksConfig is BackgroundTasksConfig


def test_a_graph_node_on_the_local_runtime_runs_background_tasks_after_its_round_trip() -> None:
    from ray_harness import GraphBuilder

    model = ScriptedModel(tool_call("quick", {"x": 7, FLAG: True}), text("dispatched"), text("7 came back"))
    builder = GraphBuilder()
    builder.add_node(Agent(model, tools=[quick], name="worker", background_tasks=True), "worker")
    result = builder.build(runtime="local")("go")  # the local runtime pickles the agent, as Ray does
    node = result.results["worker"].result
    assert "7 came back" in str(node)


def test_a_flag_that_is_not_a_boolean_is_an_error_result() -> None:
    model = ScriptedModel(tool_call("quick", {"x": 1, FLAG: "yes"}), text("oops"))
    agent = Agent(model, tools=[quick], background_tasks=True)
    agent("go")
    result = agent.messages[2]["content"][0]["toolResult"]
    assert result["status"] == "error" and result["content"] == [{"text": f"'{FLAG}' must be a boolean"}]
    assert _manager(agent).snapshots() == []
