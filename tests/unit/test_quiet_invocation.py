"""``invoke_async`` with nobody hearing the events: plain coroutines, and the same invocation as a streamed one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.hooks import AfterInvocationEvent, BeforeInvocationEvent
from ray_harness.testing import RecordingHooks, ScriptedModel, text, tool_call
from ray_harness.types.exceptions import ConcurrencyException
from tests.asyncgens import generators_started

LOOP_LAYERS = {"_stream", "run_invocation", "_run_invocation", "_cycles", "_lifecycle"}
USAGE = {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _agent(*steps: Any, **kwargs: Any) -> Agent:
    return Agent(ScriptedModel(*steps), tools=[add], retry_strategy=None, **kwargs)


def test_a_quiet_invocation_starts_none_of_the_loops_generator_layers() -> None:
    agent = _agent(tool_call("add", {"a": 1, "b": 2}, usage=USAGE), text("3", usage=USAGE))
    started = generators_started(agent, "add")
    assert LOOP_LAYERS.isdisjoint(started), started
    assert agent.messages[-1]["content"] == [{"text": "3"}]


def test_a_quiet_graph_runs_its_agent_nodes_without_the_loops_generator_layers() -> None:
    from ray_harness.multiagent import GraphBuilder

    builder = GraphBuilder()
    builder.add_node(_agent(text("draft", usage=USAGE), name="draft"), "draft")
    builder.add_node(_agent(text("final", usage=USAGE), name="final"), "final")
    builder.add_edge("draft", "final")
    graph = builder.build(runtime="local")
    started = generators_started(graph, "go")
    # The Graph has a "_stream" of its own; an agent's "_stream" would start "run_invocation" too.
    assert (LOOP_LAYERS - {"_stream"}).isdisjoint(started), started
    assert [node.node_id for node in graph.state.execution_order] == ["draft", "final"]
    assert graph.nodes["final"].executor.messages[-1]["content"] == [{"text": "final"}]


def test_a_callback_handler_still_hears_every_event_of_invoke_async() -> None:
    heard: list[str] = []
    agent = _agent(text("hi"), callback_handler=lambda **event: heard.append(event["type"]))
    result = asyncio.run(agent.invoke_async("q"))
    assert str(result) == "hi\n"
    assert "text_delta" in heard and heard[-1] == "result"


def _run(streamed: bool) -> tuple[list[str], list[Any], dict[str, Any], Any]:
    recorder = RecordingHooks()
    agent = _agent(tool_call("add", {"a": 1, "b": 2}, tool_use_id="t1", usage=USAGE), text("3", usage=USAGE),
                   hooks=[recorder])

    async def streamed_result() -> Any:
        result = None
        async for event in agent.stream_async("add"):
            result = event.get("result", result)
        return result

    result = asyncio.run(streamed_result() if streamed else agent.invoke_async("add"))
    summary = result.metrics.get_summary()
    kept = {key: summary[key] for key in ("total_cycles", "accumulated_usage")}
    kept["cycles"] = [cycle["usage"] for cycle in summary["agent_invocations"][-1]["cycles"]]  # ids are process-wide
    kept["traces"] = [(trace["name"], [child["name"] for child in trace["children"]]) for trace in summary["traces"]]
    return recorder.names(), agent.messages, kept, (result.stop_reason, result.message)


def test_quiet_and_streamed_invocations_end_alike() -> None:
    assert _run(streamed=False) == _run(streamed=True)


def test_a_failed_quiet_invocation_rolls_back_and_frees_the_agent() -> None:
    agent = _agent(RuntimeError("provider down"), text("later"))
    after: list[bool] = []
    agent.add_hook(lambda event: after.append(event.result is None), AfterInvocationEvent)
    with pytest.raises(RuntimeError, match="provider down"):
        asyncio.run(agent.invoke_async("first"))
    assert agent.messages == [] and after == [True]
    assert str(asyncio.run(agent.invoke_async("second"))) == "later\n"  # the lock was released


def test_a_second_quiet_invocation_while_one_runs_is_refused() -> None:
    async def main() -> None:
        release = asyncio.Event()

        async def slow(call: Any) -> Any:
            await release.wait()
            return text("done")

        agent = _agent(slow)
        first = asyncio.create_task(agent.invoke_async("one"))
        await asyncio.sleep(0)
        with pytest.raises(ConcurrencyException):
            await agent.invoke_async("two")
        release.set()
        assert str(await first) == "done\n"

    asyncio.run(main())


def test_a_quiet_invocation_is_cancelled_while_the_model_answers() -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def never(call: Any) -> Any:
            started.set()
            await asyncio.sleep(3600)

        agent = _agent(never)
        running = asyncio.create_task(agent.invoke_async("q"))
        await started.wait()
        agent.cancel()
        result = await running
        assert result.stop_reason == "cancelled"
        assert agent.messages[-1]["content"] == [{"text": "Cancelled by user"}]

    asyncio.run(main())


def test_hooks_veto_and_resume_a_quiet_invocation() -> None:
    agent = _agent(text("first"), text("second"))

    def veto_x(event: BeforeInvocationEvent) -> None:
        if event.messages[0]["content"][0]["text"] == "x":
            event.cancel = "no"

    agent.add_hook(veto_x, BeforeInvocationEvent)
    assert str(asyncio.run(agent.invoke_async("x"))) == "no\n" and agent.messages == []
    resumed: list[str] = []

    def resume_once(event: AfterInvocationEvent) -> None:
        if not resumed:
            resumed.append("again")
            event.resume = "again"

    agent.add_hook(resume_once, AfterInvocationEvent)
    assert str(asyncio.run(agent.invoke_async("y"))) == "second\n"
    assert [message["role"] for message in agent.messages] == ["user", "assistant", "user", "assistant"]
