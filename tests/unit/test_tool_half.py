"""The tool half of a cycle in its quiet form (plain coroutines): the same hooks, results, metrics and cancels."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.hooks import AfterToolCallEvent, BeforeToolCallEvent
from ray_harness.middleware import ExecuteToolStage
from ray_harness.testing import RecordingHooks, ScriptedModel, text, tool_call, tool_calls
from ray_harness.tools import ConcurrentToolExecutor, SequentialToolExecutor, ToolExecutor
from tests.asyncgens import generators_started

TOOL_HALF = {"_cycle", "run_tools", "execute", "execute_tool", "_call_selected"}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
async def add_async(a: int, b: int) -> int:
    """Add two numbers on the loop."""
    return a + b


@tool
def boom() -> str:
    """Always fails."""
    raise RuntimeError("boom")


def test_a_quiet_sync_tool_round_trip_runs_the_tool_half_without_generator_layers() -> None:
    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}), text("3")), tools=[add])
    started = generators_started(agent, "add")
    assert TOOL_HALF.isdisjoint(started), started
    assert started.count("stream") == 2, started  # the scripted model's two calls; the tool has none
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "3"}]
    assert agent.event_loop_metrics.tool_metrics["add"].success_count == 1


def test_a_streaming_tool_on_a_quiet_invocation_still_runs_as_a_generator() -> None:
    closed: list[bool] = []

    @tool
    async def count(n: int) -> AsyncGenerator[str, None]:
        """Count up to n."""
        try:
            for i in range(n):
                yield f"at {i}"
        finally:
            closed.append(True)

    agent = Agent(ScriptedModel(tool_call("count", {"n": 3}), text("ok")), tools=[count])
    started = generators_started(agent, "count")
    assert "count" in started and "_raw_call" in started
    assert closed == [True]
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "at 2"}]  # the last yield


def test_tool_middleware_keeps_the_generator_form_on_a_quiet_invocation() -> None:
    seen: list[str] = []

    async def passthrough(ctx: Any, next_fn: Any) -> Any:
        async for event in next_fn(ctx):
            seen.append(type(event).__name__)
            yield event

    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}), text("3")), tools=[add])
    agent.add_middleware(ExecuteToolStage, passthrough)
    started = generators_started(agent, "add")
    assert {"run_tools", "execute_tool", "_call_selected"} <= set(started)
    assert seen == ["ToolResultEvent"]


class _OwnExecutor(ToolExecutor):
    """A custom executor: the loop must keep calling it (the generator form)."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.inner = SequentialToolExecutor()

    def execute(self, tool_uses: Any, run_one: Any, cancel_signal: Any, skip: Any) -> Any:
        self.batches.append([use["toolUseId"] for use in tool_uses])
        return self.inner.execute(tool_uses, run_one, cancel_signal, skip)


def test_a_custom_executor_still_runs_the_quiet_batch() -> None:
    executor = _OwnExecutor()
    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}, tool_use_id="t1"), text("3")), tools=[add],
                  tool_executor=executor)
    agent("add")
    assert executor.batches == [["t1"]]


def _scenario(executor: ToolExecutor, streamed: bool) -> tuple[Any, ...]:
    """A batch with a retried call, a hook-cancelled call, a raising tool and an unknown one."""
    model = ScriptedModel(tool_calls(("add", {"a": 1, "b": 2}, "t1"), ("add_async", {"a": 2, "b": 2}, "t2"),
                                     ("boom", {}, "t3"), ("nope", {}, "t4"), ("add", {"a": 5, "b": 5}, "t5")),
                          text("done"))
    recorder = RecordingHooks()
    agent = Agent(model, tools=[add, add_async, boom], hooks=[recorder], tool_executor=executor)
    retried: list[str] = []

    def retry_first(event: AfterToolCallEvent) -> None:
        if event.tool_use["toolUseId"] == "t1" and not retried:
            retried.append("t1")
            event.retry = True

    def cancel_t5(event: BeforeToolCallEvent) -> None:
        if event.tool_use["toolUseId"] == "t5":
            event.cancel_tool = "not this one"

    agent.add_hook(retry_first, AfterToolCallEvent)
    agent.add_hook(cancel_t5, BeforeToolCallEvent)
    if streamed:
        async def drain() -> Any:
            final = None
            async for event in agent.stream_async("go"):
                final = event.get("result", final)
            return final

        result = asyncio.run(drain())
    else:
        result = agent("go")
    metrics = {name: (m.call_count, m.success_count, m.error_count)
               for name, m in agent.event_loop_metrics.tool_metrics.items()}
    return result.stop_reason, recorder.names(), agent.messages, metrics


@pytest.mark.parametrize("executor", [SequentialToolExecutor, ConcurrentToolExecutor])
def test_quiet_and_streamed_tool_halves_hear_the_same_hooks_and_keep_the_same_results(
        executor: type[ToolExecutor]) -> None:
    quiet, streamed = _scenario(executor(), False), _scenario(executor(), True)
    if executor is ConcurrentToolExecutor:  # concurrent tools finish in any order: compare the hooks as a multiset
        assert sorted(quiet[1]) == sorted(streamed[1])
        assert (quiet[0], quiet[2], quiet[3]) == (streamed[0], streamed[2], streamed[3])
    else:
        assert quiet == streamed
    results = {block["toolResult"]["toolUseId"]: block["toolResult"] for block in quiet[2][2]["content"]}
    assert [results[key]["status"] for key in ("t1", "t2", "t3", "t4", "t5")] == \
        ["success", "success", "error", "error", "error"]
    assert results["t5"]["content"] == [{"text": "not this one"}]
    # As Strands: each attempt that ran counts (t1 ran twice, both successes); the hook-cancelled t5 never ran.
    assert quiet[3]["add"] == (2, 2, 0)
    assert quiet[3]["nope"] == (1, 0, 1) and quiet[3]["boom"] == (1, 0, 1)  # an unknown tool counts as an error


def test_a_concurrent_batch_of_several_tools_still_runs_them_at_once_when_quiet() -> None:
    ready: dict[str, asyncio.Event] = {}

    @tool
    async def meet(me: str, other: str) -> str:
        """Wait for the other tool: only tools running at once both return."""
        ready.setdefault(me, asyncio.Event()).set()
        await ready.setdefault(other, asyncio.Event()).wait()
        return me

    agent = Agent(ScriptedModel(tool_calls(("meet", {"me": "a", "other": "b"}, "ta"),
                                           ("meet", {"me": "b", "other": "a"}, "tb")), text("met")), tools=[meet])

    async def main() -> Any:
        return await asyncio.wait_for(agent.invoke_async("meet"), 60)  # a guard against a hang, not a timing

    assert str(asyncio.run(main())).strip() == "met"
    assert [b["toolResult"]["content"] for b in agent.messages[2]["content"]] == [[{"text": "a"}], [{"text": "b"}]]


def test_a_cancel_while_a_sync_tool_runs_on_its_thread_stops_a_quiet_sequential_batch() -> None:
    ran: list[str] = []
    holder: list[Agent] = []

    @tool
    def first() -> str:
        """Cancels its own invocation while it runs (on a tool thread)."""
        ran.append("first")
        holder[0].cancel()
        return "finished anyway"

    @tool
    def second() -> str:
        """Must not run after the cancel."""
        ran.append("second")
        return "ran"

    agent = Agent(ScriptedModel(tool_calls(("first", {}, "t1"), ("second", {}, "t2")), text("never")),
                  tools=[first, second], tool_executor=SequentialToolExecutor())
    holder.append(agent)
    result = agent("go")
    assert ran == ["first"]
    assert result.stop_reason == "cancelled"
    results = [block["toolResult"] for block in agent.messages[2]["content"]]
    assert [r["content"] for r in results] == [[{"text": "finished anyway"}], [{"text": "Tool execution cancelled"}]]


def test_tool_middleware_added_by_a_hook_during_a_quiet_batch_wraps_that_call() -> None:
    wrapped: list[str] = []

    async def note(ctx: Any, next_fn: Any) -> Any:
        wrapped.append(ctx.tool_use["toolUseId"])
        async for event in next_fn(ctx):
            yield event

    def add_middleware(event: BeforeToolCallEvent) -> None:
        if not event.agent._middleware.has(ExecuteToolStage):
            event.agent.add_middleware(ExecuteToolStage, note)

    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}, tool_use_id="t1"), text("3")), tools=[add])
    agent.add_hook(add_middleware, BeforeToolCallEvent)
    agent("add")
    assert wrapped == ["t1"]
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "3"}]


def test_an_int_result_is_the_text_json_gives_it() -> None:
    import enum
    import json

    from ray_harness.tools.decorator import to_tool_result

    class Level(enum.IntEnum):
        HIGH = 3

    for value in (7, -3, 10**30, True, Level.HIGH):
        assert to_tool_result("t", value)["content"] == [{"text": json.dumps(value)}]


def test_tool_metrics_count_the_tools_own_outcome_before_after_tool_call_replaces_it() -> None:
    """As Strands' tool telemetry: a hook turning a failure into a success does not make the tool's count a success."""
    def forgive(event: AfterToolCallEvent) -> None:
        event.result = {"toolUseId": event.tool_use["toolUseId"], "status": "success", "content": [{"text": "ok"}]}

    agent = Agent(ScriptedModel(tool_call("boom", {}, tool_use_id="t1"), text("done")), tools=[boom])
    agent.add_hook(forgive, AfterToolCallEvent)
    agent("go")
    metrics = agent.event_loop_metrics.tool_metrics["boom"]
    assert (metrics.call_count, metrics.success_count, metrics.error_count) == (1, 0, 1)
    assert agent.messages[2]["content"][0]["toolResult"]["status"] == "success"  # what the model got: the hook's
