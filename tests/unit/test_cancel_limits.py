from __future__ import annotations

import asyncio
import threading
import time

import pytest

from ray_harness import Agent, ToolContext, tool
from ray_harness.models import ModelPrices
from ray_harness.testing import ScriptedModel, step, text, tool_call, tool_calls
from ray_harness.tools import SequentialToolExecutor
from tests.closing import BOTH_ENDED, two_waiting_tools


@tool
async def nap(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "rested"


async def _cancel_later(agent: Agent, delay: float, **kwargs: object) -> None:
    await asyncio.sleep(delay)
    agent.cancel(**kwargs)  # type: ignore[arg-type]


async def test_cancel_while_waiting_for_the_model_is_immediate() -> None:
    agent = Agent(ScriptedModel(text("never", delay=120)))
    started = time.perf_counter()
    _, result = await asyncio.gather(_cancel_later(agent, 0.05), agent.invoke_async("x"))
    assert time.perf_counter() - started < 60  # not the model's 120 s: the wait was cut
    assert result.stop_reason == "cancelled"
    assert agent.messages[-1] == {"role": "assistant", "content": [{"text": "Cancelled by user"}]}


async def test_cancel_during_streaming_stops_at_next_chunk() -> None:
    agent = Agent(ScriptedModel(step({"text": "abcdefghij" * 10}, chunk_delay=0.01), chunk_size=1))
    seen = 0
    result = None
    async for event in agent.stream_async("x"):
        if event["type"] == "text_delta":
            seen += 1
            if seen == 3:
                agent.cancel()
        if event["type"] == "result":
            result = event["result"]
    assert result is not None and result.stop_reason == "cancelled"
    assert seen == 3


async def test_a_stream_cut_by_cancel_records_its_estimated_usage_and_cost() -> None:
    prices = ModelPrices(input_per_million=1_000_000.0, output_per_million=2_000_000.0)  # 1 and 2 USD per token
    model = ScriptedModel(step({"text": "abcdefghij" * 10}, chunk_delay=0.01,
                               usage={"inputTokens": 500, "outputTokens": 500, "totalTokens": 1000}),
                          chunk_size=1, prices=prices)
    agent = Agent(model)
    seen = 0
    async for event in agent.stream_async("y" * 400):  # 400 characters: an estimated 100 input tokens
        if event["type"] == "text_delta":
            seen += 1
            if seen == 12:  # 12 characters streamed: an estimated 3 output tokens
                agent.cancel()
    expected = {"inputTokens": 100, "outputTokens": 3, "totalTokens": 103, "estimatedTokens": 103}
    assert agent.event_loop_metrics.accumulated_usage == expected
    assert agent.event_loop_metrics.model_calls == 1
    assert agent.event_loop_metrics.accumulated_cost_usd == pytest.approx(100 * 1.0 + 3 * 2.0)


async def test_a_cancel_before_the_request_records_no_model_call() -> None:
    agent = Agent(ScriptedModel(text("never")))
    result = await agent.invoke_async("x", cancel_signal=_set(threading.Event()))
    assert result.stop_reason == "cancelled"
    assert agent.event_loop_metrics.model_calls == 0
    assert agent.event_loop_metrics.accumulated_usage["totalTokens"] == 0


def _set(signal: threading.Event) -> threading.Event:
    signal.set()
    return signal


async def test_cancel_from_another_thread_before_tools_gives_cancelled_results() -> None:
    agent = Agent(ScriptedModel(tool_calls(("nap", {"seconds": 0.01}, "a"), ("nap", {"seconds": 0.01}, "b"))),
                  tools=[nap])

    def stop_when_model_answered(event) -> None:  # type: ignore[no-untyped-def]
        canceller = threading.Thread(target=agent.cancel)
        canceller.start()
        canceller.join()

    from ray_harness.hooks import AfterModelCallEvent

    agent.hooks.add_callback(AfterModelCallEvent, stop_when_model_answered)
    result = await agent.invoke_async("x")
    assert result.stop_reason == "cancelled"
    contents = [b["toolResult"]["content"] for b in agent.messages[2]["content"]]
    assert contents == [[{"text": "Tool execution cancelled"}]] * 2  # history stays valid


async def test_cancel_before_each_sequential_tool() -> None:
    calls: list[str] = []

    @tool(context=True)
    async def step_tool(label: str, tool_context: ToolContext) -> str:
        """One step."""
        calls.append(label)
        tool_context.agent.cancel()
        return label

    agent = Agent(ScriptedModel(tool_calls(("step_tool", {"label": "1"}), ("step_tool", {"label": "2"}))),
                  tools=[step_tool], tool_executor=SequentialToolExecutor())
    result = await agent.invoke_async("x")
    assert result.stop_reason == "cancelled" and calls == ["1"]
    second = agent.messages[2]["content"][1]["toolResult"]
    assert second["content"] == [{"text": "Tool execution cancelled"}]


async def test_cancel_after_current_tools_with_message() -> None:
    @tool(context=True)
    async def work(tool_context: ToolContext) -> str:
        """Work."""
        tool_context.agent.cancel(after_current_tools=True, message="stopped by operator")
        await asyncio.sleep(0.01)
        return "done"

    agent = Agent(ScriptedModel(tool_calls(("work", {}), ("work", {}))), tools=[work])
    result = await agent.invoke_async("x")
    assert result.stop_reason == "cancelled"
    assert [b["toolResult"]["content"] for b in agent.messages[2]["content"]] == [[{"text": "done"}]] * 2
    assert agent.messages[-1] == {"role": "assistant", "content": [{"text": "stopped by operator"}]}


async def test_a_cancelled_model_call_still_ends_with_after_model_call_and_is_not_retried() -> None:
    """Before/AfterModelCallEvent stay paired (as Strands); a retry or a guide cannot undo the cancel."""
    from ray_harness.hooks import AfterModelCallEvent, BeforeModelCallEvent
    from ray_harness.interventions import Guide, InterventionHandler
    from ray_harness.steering import SteerGuide, SteeringHandler

    class Critic(InterventionHandler):
        name = "critic"

        def after_model_call(self, event):  # type: ignore[no-untyped-def,override]
            return Guide("try again")

    class Steer(SteeringHandler):
        def steer_after_model(self, event):  # type: ignore[no-untyped-def,override]
            return SteerGuide("steer again")

    seen: list[str] = []

    def after(event: AfterModelCallEvent) -> None:
        assert event.stop_response is not None
        seen.append(f"after:{event.stop_response.stop_reason}")
        event.retry = True

    model = ScriptedModel(text("never", delay=120), text("unreached"))
    agent = Agent(model, interventions=[Critic()], hooks=[Steer()])
    agent.hooks.add_callback(BeforeModelCallEvent, lambda event: seen.append("before"))
    agent.hooks.add_callback(AfterModelCallEvent, after)
    _, result = await asyncio.gather(_cancel_later(agent, 0.05), agent.invoke_async("x"))
    assert result.stop_reason == "cancelled"
    assert seen == ["before", "after:cancelled"]
    assert len(model.calls) == 1
    assert agent.messages == [{"role": "user", "content": [{"text": "x"}]},
                              {"role": "assistant", "content": [{"text": "Cancelled by user"}]}]  # no guidance


async def test_a_cancel_ends_a_hook_driven_tool_retry_loop() -> None:
    """``AfterToolCallEvent.retry`` does not run the tool again once the invocation is cancelled (as Strands)."""
    from ray_harness.hooks import AfterToolCallEvent

    runs: list[int] = []

    @tool(context=True)
    def flaky(tool_context: ToolContext) -> str:
        """Always fails; cancels on its second run."""
        runs.append(len(runs))
        if len(runs) == 2:
            tool_context.agent.cancel()
        raise RuntimeError("down")

    def retry_failures(event: AfterToolCallEvent) -> None:
        event.retry = event.result["status"] == "error" and len(runs) < 10

    agent = Agent(ScriptedModel(tool_call("flaky", {}, tool_use_id="t1"), text("unreached")), tools=[flaky])
    agent.hooks.add_callback(AfterToolCallEvent, retry_failures)
    result = await agent.invoke_async("x")
    assert result.stop_reason == "cancelled"
    assert runs == [0, 1]  # the retry after the cancel did not run
    assert agent.messages[-1]["content"][0]["toolResult"]["toolUseId"] == "t1"  # the call is still answered


def test_cancel_on_idle_agent_does_not_poison_next_call() -> None:
    agent = Agent(ScriptedModel(text("fine")))
    agent.cancel()
    agent.cancel()
    assert agent("x").stop_reason == "end_turn"


async def test_caller_owned_cancel_signal_and_tools_can_read_it() -> None:
    signal = threading.Event()
    seen: list[bool] = []

    @tool(context=True)
    async def watcher(tool_context: ToolContext) -> str:
        """Watches the signal."""
        signal.set()
        seen.append(tool_context.cancel_signal.is_set())
        return "saw it"

    agent = Agent(ScriptedModel(tool_call("watcher", {}), text("unreached")), tools=[watcher])
    result = await agent.invoke_async("x", cancel_signal=signal)
    assert result.stop_reason == "cancelled" and seen == [True]
    assert len(agent.model.calls) == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("limits", [{"turns": 0}, {"turns": -1}, {"turns": 1.5}, {"turns": True},
                                    {"bogus": 1}, "turns=1", {"cost_usd": 0}])
def test_bad_limits_raise_type_error_before_the_model(limits: object) -> None:
    model = ScriptedModel()
    with pytest.raises(TypeError):
        Agent(model)("x", limits=limits)  # type: ignore[arg-type]
    assert model.calls == []


def test_a_cost_budget_needs_prices_on_the_model() -> None:
    model = ScriptedModel(text("free"))
    agent = Agent(model)
    with pytest.raises(TypeError, match="needs prices on the model"):
        agent("x", limits={"cost_usd": 1.0})  # it would never stop the run
    assert model.calls == [] and agent.messages == []


def _looping_model() -> ScriptedModel:
    usage = {"inputTokens": 100, "outputTokens": 50, "totalTokens": 150}
    return ScriptedModel(tool_call("nap", {"seconds": 0}, usage=usage), loop=True)


@pytest.mark.parametrize(
    ("limits", "reason", "model_calls"),
    [
        ({"turns": 2}, "limit_turns", 2),
        ({"total_tokens": 300}, "limit_total_tokens", 2),
        ({"output_tokens": 120}, "limit_output_tokens", 3),
        ({"total_tokens": 150, "output_tokens": 50}, "limit_total_tokens", 1),
        ({"cost_usd": 0.002}, "limit_cost_usd", 2),
    ],
)
def test_limits_stop_at_the_top_of_a_cycle(limits: dict, reason: str, model_calls: int) -> None:
    model = _looping_model()
    model.prices = ModelPrices(input_per_million=5, output_per_million=10)  # 0.001 USD per call
    agent = Agent(model, tools=[nap])
    result = agent("x", limits=limits)  # type: ignore[arg-type]
    assert result.stop_reason == reason
    assert len(model.calls) == model_calls
    assert agent.messages[-1]["role"] == "user"  # the last tool results are in; history is valid
    assert result.message["role"] == "assistant" and result.message == agent.messages[-2]  # the model's last turn


def test_limit_priority_turns_first_and_per_invocation() -> None:
    model = _looping_model()
    agent = Agent(model, tools=[nap])
    assert agent("x", limits={"turns": 1, "total_tokens": 1, "output_tokens": 1}).stop_reason == "limit_turns"
    assert agent("y", limits={"turns": 1}).stop_reason == "limit_turns"  # counters restart per invocation
    assert len(model.calls) == 2


def test_a_resumed_tool_batch_counts_as_a_turn() -> None:
    """As in Strands, the cycle that runs an interrupted batch is a turn although it does not call the model."""

    @tool(context=True)
    def approve(tool_context: ToolContext) -> str:
        """Asks a human."""
        return f"approved: {tool_context.interrupt('ok?')}"

    model = ScriptedModel(tool_call("approve", {}, tool_use_id="t1"), text("unreached"))
    agent = Agent(model, tools=[approve])
    paused = agent("x")
    answers = [{"interruptResponse": {"interruptId": i.id, "response": "yes"}} for i in paused.interrupts]
    result = agent(answers, limits={"turns": 1})
    assert result.stop_reason == "limit_turns"
    assert len(model.calls) == 1  # the model was not called after the resumed tools
    assert agent.messages[-1]["content"][0]["toolResult"]["content"] == [{"text": "approved: yes"}]


def test_cost_reported_in_metrics() -> None:
    model = ScriptedModel(text("x", usage={"inputTokens": 1_000_000, "outputTokens": 1_000_000,
                                          "totalTokens": 2_000_000}),
                          prices=ModelPrices(input_per_million=3, output_per_million=15))
    result = Agent(model)("x")
    assert result.metrics.accumulated_cost_usd == pytest.approx(18.0)
    assert result.metrics.get_summary()["accumulated_cost_usd"] == pytest.approx(18.0)



async def _close_mid_batch(agent: Agent, tools: list[str]) -> None:
    """Read ``agent``'s stream until its tools run, then stop reading (close it) there."""
    stream = agent.stream_async("x")
    async for event in stream:
        if event.get("type") == "tool_start" and tools:
            break
    await stream.aclose()


async def test_a_stream_closed_mid_batch_has_ended_when_aclose_returns() -> None:
    """``aclose()`` on the agent's stream returns once the invocation is over: tools ended, history rolled back.

    Only the outermost generator is closed by the caller; each inner layer used to be left to the event loop's
    finalizer, so the agent was free again while its tools still ran and before its history was rolled back.
    """
    tools: list[str] = []
    agent = two_waiting_tools(tools)
    await _close_mid_batch(agent, tools)
    assert sorted(tools) == BOTH_ENDED
    assert agent.messages == []
    agent.restore(agent.snapshot())  # idle: no ConcurrencyException
    assert str(await agent.invoke_async("y")).strip() == "next"


def test_a_cancel_before_the_model_answered_ends_with_its_text_not_the_previous_answer() -> None:
    from ray_harness.hooks import BeforeInvocationEvent

    agent = Agent(ScriptedModel(text("first answer"), text("second answer")))
    agent("one")
    stop_next = {"message": "stopped by policy"}

    def cancel_first_thing(event: BeforeInvocationEvent) -> None:
        if stop_next:
            event.agent.cancel(**stop_next)

    agent.add_hook(cancel_first_thing, BeforeInvocationEvent)
    result = agent("two")
    assert result.stop_reason == "cancelled"
    assert str(result) == "stopped by policy\n"  # was "first answer"
    assert agent.messages[-2:] == [{"role": "user", "content": [{"text": "two"}]},
                                   {"role": "assistant", "content": [{"text": "stopped by policy"}]}]
    stop_next.clear()
    assert str(agent("three")) == "second answer\n"  # the script was not consumed; roles still alternate
    assert [message["role"] for message in agent.messages] == ["user", "assistant"] * 3


async def test_a_cancel_reaches_an_invocation_waiting_for_a_tool_provider_to_start() -> None:
    from ray_harness.tools.base import AgentTool

    class SlowServer:  # an MCP server that takes its time to start
        def __init__(self) -> None:
            self.starting = asyncio.Event()
            self.loads = 0

        async def load_tools(self) -> list[AgentTool]:
            self.loads += 1
            self.starting.set()
            if self.loads == 1:
                await asyncio.sleep(300)
            return []

        def close(self) -> None:
            pass

    server = SlowServer()
    agent = Agent(ScriptedModel(text("after the server started")), tools=[server])
    task = asyncio.create_task(agent.invoke_async("hello"))
    await server.starting.wait()
    agent.cancel(message="no time to wait")
    result = await asyncio.wait_for(task, 120)  # the server would take 300 s
    assert (result.stop_reason, str(result)) == ("cancelled", "no time to wait\n")
    assert agent.messages == []  # the prompt was never added
    assert str(await agent.invoke_async("hello")) == "after the server started\n"  # loads again, then runs
    assert server.loads == 2
