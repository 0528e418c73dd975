"""``tool_metrics`` of a tool call that paused on an interrupt: counted as Strands' tool telemetry counts it.

Strands records a tool run that ended without a result (the tool raised an interrupt) as a failed call, and the
resumed run as one more call; an interrupt raised before the tool ran (a hook, a middleware) is no call at all.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest

from ray_harness import Agent, ToolContext, tool
from ray_harness.agent import AgentResult
from ray_harness.hooks import BeforeToolCallEvent
from ray_harness.middleware import ExecuteToolStage
from ray_harness.telemetry.metrics import BaseSink, add_sink, remove_sink
from ray_harness.testing import ScriptedModel, text, tool_call


@tool(context=True)
def ask(question: str, tool_context: ToolContext) -> str:
    """Ask the human."""
    return f"human said {tool_context.interrupt('question', reason=question)}"


def _agent() -> Agent:
    return Agent(ScriptedModel(tool_call("ask", {"question": "color?"}, tool_use_id="q"), text("ok")), tools=[ask])


def _answer(result: AgentResult, response: str = "blue") -> list[Any]:
    (pending,) = result.interrupts
    return [{"interruptResponse": {"interruptId": pending.id, "response": response}}]


def _counts(agent: Agent, name: str = "ask") -> tuple[int, int, int]:
    metrics = agent.event_loop_metrics.tool_metrics[name]
    return metrics.call_count, metrics.success_count, metrics.error_count


async def _stream(agent: Agent, prompt: Any) -> AgentResult:
    result: AgentResult | None = None
    async for event in agent.stream_async(prompt):
        if "result" in event:
            result = event["result"]
    assert result is not None
    return result


def test_a_tool_that_pauses_is_a_failed_call_and_its_resumed_run_another() -> None:
    agent = _agent()

    first = agent("go")

    assert first.stop_reason == "interrupt"
    assert _counts(agent) == (1, 0, 1)
    assert agent.event_loop_metrics.tool_metrics["ask"].tool == {"toolUseId": "q", "name": "ask",
                                                                  "input": {"question": "color?"}}
    agent(_answer(first))
    assert _counts(agent) == (2, 1, 1)


async def test_the_streamed_form_counts_the_pause_too() -> None:
    agent = _agent()

    first = await _stream(agent, "go")

    assert first.stop_reason == "interrupt" and _counts(agent) == (1, 0, 1)
    await _stream(agent, _answer(first))
    assert _counts(agent) == (2, 1, 1)


def test_under_middleware_the_tools_own_pause_counts_and_a_middleware_pause_does_not() -> None:
    agent = _agent()

    async def approval(ctx: Any, next_fn: Any) -> AsyncGenerator[Any, None]:
        ctx.interrupt("approve")  # pauses before the tool runs (the first time)
        async for event in next_fn(ctx):
            yield event

    agent.add_middleware(ExecuteToolStage, approval)

    first = agent("go")
    assert "ask" not in agent.event_loop_metrics.tool_metrics  # the tool never ran
    second = agent(_answer(first, "yes"))  # the middleware lets it through: the tool pauses
    assert second.stop_reason == "interrupt" and _counts(agent) == (1, 0, 1)
    agent(_answer(second))
    assert _counts(agent) == (2, 1, 1)


def test_a_pause_in_a_before_tool_call_hook_is_not_a_call() -> None:
    @tool
    def plain() -> str:
        """Runs once approved."""
        return "ran"

    def gate(event: BeforeToolCallEvent) -> None:
        event.interrupt("approve")

    agent = Agent(ScriptedModel(tool_call("plain", {}, tool_use_id="p"), text("ok")), tools=[plain], hooks=[gate])
    first = agent("go")

    assert first.stop_reason == "interrupt" and "plain" not in agent.event_loop_metrics.tool_metrics
    agent(_answer(first, "yes"))
    assert _counts(agent, "plain") == (1, 1, 0)


@pytest.fixture
def sink_calls() -> Any:
    calls: list[tuple[str, str]] = []

    class Recorder(BaseSink):
        def tool_call(self, agent: str, tool: str, status: str, latency_s: float) -> None:
            calls.append((tool, status))

    sink = add_sink(Recorder())
    yield calls
    remove_sink(sink)


def test_metric_sinks_see_the_paused_call_as_an_error(sink_calls: list[tuple[str, str]]) -> None:
    agent = _agent()
    agent(_answer(agent("go")))

    assert sink_calls == [("ask", "error"), ("ask", "success")]
