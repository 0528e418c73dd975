"""The model half of a cycle: its quiet form (plain coroutines) and the order around proactive compression."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.agent.conversation_manager import ConversationManager
from ray_harness.hooks import AfterModelCallEvent, BeforeModelCallEvent
from ray_harness.middleware import InvokeModelStage
from ray_harness.models.base import estimate_tokens
from ray_harness.testing import FakeClock, RecordingHooks, ScriptedModel, text, tool_call
from ray_harness.types.exceptions import ContextWindowOverflowException, EventLoopException, ModelThrottledException
from tests.asyncgens import generators_started

MODEL_HALF = {"model_turn", "call_model", "_attempt", "terminal", "process_stream"}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_a_quiet_invocation_runs_the_model_half_without_generator_layers() -> None:
    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}), text("3")), tools=[add])
    started = generators_started(agent, "add")
    assert MODEL_HALF.isdisjoint(started), started
    assert str(agent.messages[-1]["content"][0]["text"]) == "3"


def test_middleware_keeps_the_generator_form_on_a_quiet_invocation() -> None:
    seen: list[str] = []

    async def passthrough(ctx: Any, next_fn: Any) -> Any:
        async for event in next_fn(ctx):
            seen.append(event.get("type", "stop") if isinstance(event, dict) else "stop")
            yield event

    agent = Agent(ScriptedModel(text("hi")))
    agent.add_middleware(InvokeModelStage, passthrough)
    started = generators_started(agent, "q")
    assert {"model_turn", "call_model", "terminal", "process_stream"} <= set(started)
    assert "text_delta" in seen and seen[-1] == "stop"  # middleware sees the chunk events, as before


def test_middleware_added_by_a_hook_during_a_quiet_turn_runs_for_that_call() -> None:
    calls: list[int] = []

    async def count(ctx: Any, next_fn: Any) -> Any:
        calls.append(len(ctx.messages))
        async for event in next_fn(ctx):
            yield event

    agent = Agent(ScriptedModel(text("hi")))

    def add_middleware(event: BeforeModelCallEvent) -> None:
        if not calls and not event.agent._middleware.has(InvokeModelStage):
            event.agent.add_middleware(InvokeModelStage, count)

    agent.add_hook(add_middleware, BeforeModelCallEvent)
    assert str(agent("q")) == "hi\n"
    assert calls == [1]


def test_quiet_and_streamed_invocations_hear_the_same_hooks_and_keep_the_same_history() -> None:
    def run(streamed: bool) -> tuple[list[str], list[Any], int, dict[str, int]]:
        usage = {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}
        model = ScriptedModel(text("discarded", usage=usage), tool_call("add", {"a": 1, "b": 2}, tool_use_id="t1", usage=usage),
                              text("3", usage=usage))
        recorder = RecordingHooks()
        agent = Agent(model, tools=[add], hooks=[recorder])
        retried: list[bool] = []

        def retry_first(event: AfterModelCallEvent) -> None:
            if not retried:
                retried.append(True)
                event.retry = True

        agent.add_hook(retry_first, AfterModelCallEvent)
        if streamed:
            async def drain() -> None:
                async for _ in agent.stream_async("add"):
                    pass

            asyncio.run(drain())
        else:
            agent("add")
        metrics = agent.event_loop_metrics
        return recorder.names(), agent.messages, metrics.cycle_count, dict(metrics.accumulated_usage)

    quiet, streamed = run(False), run(True)
    assert quiet == streamed
    assert quiet[0].count("AfterModelCallEvent") == 3 and quiet[3]["totalTokens"] == 15  # the retried answer is billed


class _Parked(ScriptedModel):
    """Streams part of an answer, then waits forever (until cancelled)."""

    def __init__(self) -> None:
        super().__init__(text("unused"))
        self.parked = asyncio.Event()
        self.closed = False

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):  # type: ignore[no-untyped-def,override]
        try:
            yield {"messageStart": {"role": "assistant"}}
            yield {"contentBlockDelta": {"delta": {"text": "a partial answer"}, "contentBlockIndex": 0}}
            self.parked.set()
            await asyncio.Event().wait()
        finally:
            self.closed = True


def test_a_cancel_during_the_model_stream_of_a_quiet_invocation_stops_it() -> None:
    model = _Parked()
    agent = Agent(model)
    recorder = RecordingHooks()
    agent.add_hook(recorder)

    async def main() -> Any:
        task = asyncio.create_task(agent.invoke_async("q"))
        await model.parked.wait()
        agent.cancel()
        return await task

    result = asyncio.run(main())
    assert result.stop_reason == "cancelled" and model.closed
    assert agent.messages[-1] == {"role": "assistant", "content": [{"text": "Cancelled by user"}]}
    assert agent.event_loop_metrics.accumulated_usage["totalTokens"] > 0  # the cut stream's estimate is billed
    assert recorder.names().count("AfterModelCallEvent") == 1


class _DropFirst(ConversationManager):
    """Proactive compression that drops the two oldest messages."""

    def apply_management(self, agent: Any, **kwargs: Any) -> None:
        pass

    def reduce_context(self, agent: Any, e: Exception | None = None, **kwargs: Any) -> None:
        del agent.messages[:2]


def _long_history() -> list[Any]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": "word " * 200}]} for i in range(4)]


def test_a_before_model_call_hook_sees_the_history_after_proactive_compression() -> None:
    # As in Strands, where compression is the conversation manager's own BeforeModelCallEvent callback, registered
    # before any other: hooks see what the model gets; projected_input_tokens is the estimate from before it.
    agent = Agent(ScriptedModel(text("done"), context_window=400), messages=_long_history(),
                  conversation_manager=_DropFirst(proactive_compression={"compression_threshold": 0.5}))
    seen: list[tuple[int, int | None]] = []
    agent.add_hook(lambda event: seen.append((len(event.agent.messages), event.projected_input_tokens)),
                   BeforeModelCallEvent)
    before = [*_long_history(), {"role": "user", "content": [{"text": "next"}]}]
    agent("next")
    assert seen == [(3, estimate_tokens(before, None, []))]


def test_proactive_compression_runs_before_a_hook_that_vetoes_the_call() -> None:
    agent = Agent(ScriptedModel(text("unused"), context_window=400), messages=_long_history(),
                  conversation_manager=_DropFirst(proactive_compression={"compression_threshold": 0.5}))

    def veto(event: BeforeModelCallEvent) -> None:
        event.cancel = "no call"

    agent.add_hook(veto, BeforeModelCallEvent)
    assert str(agent("next")) == "no call\n"
    # Compressed (the two oldest dropped) before the hook ran, then the prompt and the veto's answer.
    assert [m["content"][0]["text"][:4] for m in agent.messages] == ["word", "word", "next", "no c"]


class _RecordedDelays:
    """A duck-typed retry strategy that retries every ``ModelThrottledException`` at once and records the attempt."""

    def __init__(self) -> None:
        self.attempts: list[int] = []
        self.clock = FakeClock()

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        self.attempts.append(attempt)
        return 0.0


def _invoke(agent: Agent, prompt: str, streamed: bool) -> Any:
    if not streamed:
        return agent(prompt)

    async def drain() -> Any:
        final = None
        async for event in agent.stream_async(prompt):
            final = event.get("result", final)
        return final

    return asyncio.run(drain())


@pytest.mark.parametrize("streamed", [False, True])
def test_both_forms_share_the_attempt_a_veto_an_overflow_and_a_throttle_take(streamed: bool) -> None:
    # The model half's two forms run one attempt the same way: a vetoed call makes no request and is not accounted
    # (a hook retried it), a context overflow reduces the history and calls again without counting as an attempt,
    # a throttle waits with the attempt's number.
    usage = {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}
    model = ScriptedModel(ContextWindowOverflowException("too long"), ModelThrottledException("slow down"),
                          text("ok", usage=usage))
    strategy = _RecordedDelays()
    agent = Agent(model, messages=_long_history(), conversation_manager=_DropFirst(), retry_strategy=strategy)
    vetoed: list[bool] = []

    def veto_first(event: BeforeModelCallEvent) -> None:
        if not vetoed:
            vetoed.append(True)
            event.cancel = "vetoed"

    def retry_the_veto(event: AfterModelCallEvent) -> None:
        if event.stop_response is not None and event.stop_response.message["content"] == [{"text": "vetoed"}]:
            event.retry = True

    agent.add_hook(veto_first, BeforeModelCallEvent)
    agent.add_hook(retry_the_veto, AfterModelCallEvent)
    result = _invoke(agent, "next", streamed)
    assert str(result) == "ok\n"
    assert len(model.calls) == 3 and len(model.calls[0].messages) == 5 and len(model.calls[1].messages) == 3
    assert strategy.attempts == [2]  # the vetoed attempt was the first; the overflowed one does not count
    metrics = agent.event_loop_metrics
    assert metrics.model_calls == 1 and metrics.accumulated_usage["totalTokens"] == 5  # the veto is not accounted


@pytest.mark.parametrize("streamed", [False, True])
def test_both_forms_raise_a_loop_error_of_the_model_call_without_retrying_it(streamed: bool) -> None:
    error = EventLoopException(RuntimeError("broken loop"))
    model = ScriptedModel(error, text("never reached"))
    heard: list[Any] = []
    agent = Agent(model, retry_strategy=_RecordedDelays())
    agent.add_hook(lambda event: heard.append(event.exception), AfterModelCallEvent)
    with pytest.raises(EventLoopException) as raised:
        _invoke(agent, "x", streamed)
    assert raised.value is error and len(model.calls) == 1 and heard == []
