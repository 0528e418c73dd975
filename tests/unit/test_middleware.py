from __future__ import annotations

import asyncio

import pytest

from ray_harness import Agent, tool
from ray_harness.hooks import AfterModelCallEvent, AfterToolCallEvent
from ray_harness.middleware import (
    ExecuteToolResult,
    ExecuteToolStage,
    InvokeModelResult,
    InvokeModelStage,
    MiddlewareError,
    ModelStopReason,
    ToolResultEvent,
)
from ray_harness.middleware.registry import MiddlewareRegistry
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.exceptions import EventLoopException


@tool
def echo(value: str) -> str:
    """Echo."""
    return value


def test_phases_run_input_wrap_output_whatever_the_registration_order() -> None:
    order: list[str] = []
    agent = Agent(ScriptedModel(text("hi")))

    def output(result: InvokeModelResult) -> InvokeModelResult:
        order.append("output")
        return result

    async def wrap(ctx, next_fn):  # type: ignore[no-untyped-def]
        order.append("wrap-in")
        async for event in next_fn(ctx):
            yield event
        order.append("wrap-out")

    def input_(ctx):  # type: ignore[no-untyped-def]
        order.append("input")
        return ctx

    agent.add_middleware(InvokeModelStage.Output, output)
    agent.add_middleware(InvokeModelStage, wrap)
    agent.add_middleware(InvokeModelStage.Input, input_)
    agent("x")
    assert order == ["input", "wrap-in", "wrap-out", "output"]


def test_first_registered_wrap_is_outermost_and_generators_are_closed() -> None:
    order: list[str] = []
    agent = Agent(ScriptedModel(text("hi")))

    def layer(label: str):  # type: ignore[no-untyped-def]
        async def wrap(ctx, next_fn):  # type: ignore[no-untyped-def]
            order.append(f"{label}-in")
            try:
                async for event in next_fn(ctx):
                    yield event
            finally:
                order.append(f"{label}-closed")

        return wrap

    agent.add_middleware(InvokeModelStage, layer("outer"))
    agent.add_middleware(InvokeModelStage, layer("inner"))
    agent("x")
    assert order == ["outer-in", "inner-in", "inner-closed", "outer-closed"]


def test_model_wrap_can_short_circuit_and_rewrite_system_prompt_defensively() -> None:
    model = ScriptedModel(text("from model"))
    agent = Agent(model, system_prompt="original")

    async def cache(ctx, next_fn):  # type: ignore[no-untyped-def]
        if ctx.messages[-1]["content"][0]["text"] == "cached?":
            yield ModelStopReason(stop_reason="end_turn", message={"role": "assistant", "content": [{"text": "hit"}]})
            return
        ctx.messages.append({"role": "user", "content": [{"text": "mutated copy"}]})
        async for event in next_fn(ctx.replace(system_prompt="rewritten")):
            yield event

    agent.add_middleware(InvokeModelStage, cache)
    assert str(agent("cached?")) == "hit\n"
    assert str(agent("real")) == "from model\n"
    assert model.calls[0].system_prompt == "rewritten"
    assert agent.system_prompt == "original"
    assert all(m["content"][0].get("text") != "mutated copy" for m in agent.messages)


def test_model_output_phase_rewrites_the_result() -> None:
    agent = Agent(ScriptedModel(text("secret 4111-1111-1111-1111")))

    def redact(result: InvokeModelResult) -> InvokeModelResult:
        stop = result.result
        message = {"role": "assistant", "content": [{"text": "[REDACTED]"}]}
        return InvokeModelResult(result=ModelStopReason(stop.stop_reason, message, stop.usage, stop.metrics))

    agent.add_middleware(InvokeModelStage.Output, redact)
    assert str(agent("x")) == "[REDACTED]\n"
    assert agent.messages[-1]["content"] == [{"text": "[REDACTED]"}]


def test_model_wrap_without_result_raises_a_runtime_error_as_strands() -> None:
    agent = Agent(ScriptedModel())

    async def swallow(ctx, next_fn):  # type: ignore[no-untyped-def]
        if False:
            yield None

    agent.add_middleware(InvokeModelStage, swallow)
    with pytest.raises(MiddlewareError, match="InvokeModelStage middleware chain did not yield a ModelStopReason") \
            as raised:
        agent("x")
    assert isinstance(raised.value, RuntimeError) and not isinstance(raised.value, EventLoopException)
    assert agent.messages == []  # the failed turn is rolled back


def test_model_wrap_without_result_reaches_after_model_call_which_may_retry() -> None:
    seen: list[BaseException | None] = []
    wraps = 0

    def after(event: AfterModelCallEvent) -> None:
        seen.append(event.exception)
        event.retry = event.exception is not None

    async def swallow_first(ctx, next_fn):  # type: ignore[no-untyped-def]
        nonlocal wraps
        wraps += 1
        if wraps > 1:
            async for event in next_fn(ctx):
                yield event

    agent = Agent(ScriptedModel(text("second try")), hooks=[after])
    agent.add_middleware(InvokeModelStage, swallow_first)
    assert str(agent("x")) == "second try\n"
    assert isinstance(seen[0], MiddlewareError) and seen[1:] == [None]


def test_tool_wrap_short_circuits_and_after_hook_sees_it() -> None:
    seen: list[dict] = []

    def after(event: AfterToolCallEvent) -> None:
        seen.append(event.result)

    agent = Agent(ScriptedModel(tool_call("echo", {"value": "v"}, tool_use_id="t1"), text("ok")), tools=[echo],
                  hooks=[after])

    async def block(ctx, next_fn):  # type: ignore[no-untyped-def]
        yield ToolResultEvent({"toolUseId": ctx.tool_use["toolUseId"], "status": "error",
                               "content": [{"text": "blocked by policy"}]})

    agent.add_middleware(ExecuteToolStage, block)
    agent("x")
    assert seen == [{"toolUseId": "t1", "status": "error", "content": [{"text": "blocked by policy"}]}]


def test_tool_input_rewrite_reaches_tool_history_keeps_original_and_output_phase() -> None:
    agent = Agent(ScriptedModel(tool_call("echo", {"value": "model"}, tool_use_id="t1"), text("ok")), tools=[echo])

    def rewrite(ctx):  # type: ignore[no-untyped-def]
        return ctx.replace(tool_use={**ctx.tool_use, "input": {"value": "middleware"}})

    def shout(result: ExecuteToolResult) -> ExecuteToolResult:
        tool_result = result.result.tool_result
        upper = [{"text": block["text"].upper()} for block in tool_result["content"]]
        return ExecuteToolResult(result=ToolResultEvent({**tool_result, "content": upper}))

    agent.add_middleware(ExecuteToolStage.Input, rewrite)
    agent.add_middleware(ExecuteToolStage.Output, shout)
    agent("x")
    assert agent.messages[1]["content"][0]["toolUse"]["input"] == {"value": "model"}
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "MIDDLEWARE"}]


def test_tool_wrap_without_result_is_an_error_result() -> None:
    agent = Agent(ScriptedModel(tool_call("echo", {"value": "v"}), text("ok")), tools=[echo])

    async def swallow(ctx, next_fn):  # type: ignore[no-untyped-def]
        if False:
            yield None

    exceptions: list[BaseException | None] = []
    agent.add_hook(lambda event: exceptions.append(event.exception), AfterToolCallEvent)
    agent.add_middleware(ExecuteToolStage, swallow)
    agent("x")
    result = agent.messages[2]["content"][0]["toolResult"]
    assert result["status"] == "error"
    assert result["content"][0]["text"].startswith(
        "Error: ExecuteToolStage middleware chain did not yield a ToolResultEvent.")
    assert len(exceptions) == 1 and isinstance(exceptions[0], MiddlewareError)  # the hooks see why (Strands)


def test_middleware_interrupt_in_tool_stage_then_resume() -> None:
    calls: list[str] = []

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        calls.append(path)
        return "deleted"

    model = ScriptedModel(tool_call("delete", {"path": "/tmp/x"}, tool_use_id="d1"), text("done"))
    agent = Agent(model, tools=[delete])

    async def approval(ctx, next_fn):  # type: ignore[no-untyped-def]
        answer = ctx.interrupt("approve", reason={"path": ctx.tool_use["input"]["path"]})
        if answer.response != "yes":
            yield ToolResultEvent({"toolUseId": ctx.tool_use["toolUseId"], "status": "error",
                                   "content": [{"text": "rejected"}]})
            return
        async for event in next_fn(ctx):
            yield event

    agent.add_middleware(ExecuteToolStage, approval)
    first = agent("delete it")
    assert first.stop_reason == "interrupt"
    (pending,) = first.interrupts
    assert pending.id.startswith("v1:middleware_execute_tool:d1:")
    assert pending.reason == {"path": "/tmp/x"}
    second = agent([{"interruptResponse": {"interruptId": pending.id, "response": "yes"}}])
    assert str(second) == "done\n" and calls == ["/tmp/x"]
    assert len(model.calls) == 2


def test_an_inner_chain_a_wrap_stops_reading_is_closed_with_its_layer() -> None:
    events: list[str] = []

    async def peek_then_answer(ctx, next_fn):  # type: ignore[no-untyped-def]
        async for _ in next_fn(ctx):
            break  # stops reading the inner chain without closing it
        yield ToolResultEvent({"toolUseId": "t", "status": "success", "content": [{"text": "peeked"}]})

    async def terminal(ctx):  # type: ignore[no-untyped-def]
        try:
            yield "chunk"
            yield ToolResultEvent({"toolUseId": "t", "status": "success", "content": []})
        finally:
            events.append("terminal closed")

    async def drain() -> list[object]:
        seen = [event async for event in chain(None)]
        events.append("chain done")
        return seen

    registry = MiddlewareRegistry()
    registry.add_middleware(ExecuteToolStage, peek_then_answer)
    chain = registry.compose(ExecuteToolStage, terminal)
    seen = asyncio.run(drain())
    assert events == ["terminal closed", "chain done"]  # closed by the layer, not later by the loop's finalizer
    assert isinstance(seen[-1], ToolResultEvent) and seen[-1].tool_result["content"] == [{"text": "peeked"}]


def test_an_output_handler_wrapping_something_else_than_the_result_event_is_named() -> None:
    def plain_dict(result: ExecuteToolResult) -> ExecuteToolResult:
        return ExecuteToolResult(result={"toolUseId": "x", "status": "success",  # type: ignore[arg-type]
                                         "content": [{"text": "not an event"}]})

    agent = Agent(ScriptedModel(tool_call("echo", {"value": "v"}), text("ok")), tools=[echo])
    agent.add_middleware(ExecuteToolStage.Output, plain_dict)
    agent("x")
    (text_block,) = agent.messages[2]["content"][0]["toolResult"]["content"]
    assert "ExecuteToolStage.Output handler must return ExecuteToolResult wrapping a ToolResultEvent" \
        in text_block["text"]

    def model_dict(result: InvokeModelResult) -> InvokeModelResult:
        return InvokeModelResult(result={"stop_reason": "end_turn"})  # type: ignore[arg-type]

    agent = Agent(ScriptedModel(text("hi")))
    agent.add_middleware(InvokeModelStage.Output, model_dict)
    with pytest.raises(TypeError, match="wrapping a ModelStopReason"):
        agent("x")


def test_bad_registration() -> None:
    agent = Agent(ScriptedModel())
    with pytest.raises(TypeError, match="stage"):
        agent.add_middleware("model", lambda c: c)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="async generator"):
        agent.add_middleware(InvokeModelStage, lambda c, n: None)


def test_invoke_without_streaming_still_shows_chunk_events_to_model_wrap_middleware() -> None:
    # invoke_async/__call__ skip per-chunk events nobody reads; a Wrap layer still sees every one of them.
    seen: list[str] = []

    async def observe(ctx, next_fn):  # type: ignore[no-untyped-def]
        async for event in next_fn(ctx):
            if isinstance(event, dict):
                seen.append(event["type"])
            yield event

    agent = Agent(ScriptedModel(tool_call("echo", {"value": "v"}), text("done")), tools=[echo])
    agent.add_middleware(InvokeModelStage, observe)
    assert str(agent("x")).strip() == "done"
    assert seen.count("text_delta") == 1 and "model_event" in seen and "tool_use_stream" in seen


async def test_stream_async_keeps_every_event_and_invoke_async_gets_the_same_result() -> None:
    def script() -> ScriptedModel:
        return ScriptedModel(tool_call("echo", {"value": "v"}, tool_use_id="t1"), text("done"))

    streamed = Agent(script(), tools=[echo])
    kinds = [event["type"] async for event in streamed.stream_async("x")]
    assert {"model_event", "text_delta", "tool_use_stream", "message", "tool_start", "tool_result",
            "result"} <= set(kinds)
    invoked = Agent(script(), tools=[echo])
    result = await invoked.invoke_async("x")
    assert str(result).strip() == "done"
    assert invoked.messages == streamed.messages
