"""``idempotency_token=``: a call naming the running invocation's token gets that invocation's result (Strands')."""

from __future__ import annotations

import asyncio
import pickle
import threading
from typing import Any

import pytest

from ray_harness import Agent, AgentResult
from ray_harness.hooks.events import BeforeInvocationEvent
from ray_harness.testing import ScriptedModel, text
from ray_harness.types.exceptions import ConcurrencyException, IdempotencyAbortedError, RayHarnessError


class _Held:
    """A model answer that waits until the test lets it go; ``started`` is set once the model was called."""

    def __init__(self, answer: Any = "done") -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.answer = answer

    async def __call__(self, call: Any) -> Any:
        self.started.set()
        await self.release.wait()
        if isinstance(self.answer, BaseException):
            raise self.answer
        return text(self.answer)


class _Token:
    """An unhashable token (``__eq__`` without ``__hash__``) that notes when a call compared it."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.compared = threading.Event()

    def __eq__(self, other: object) -> bool:
        self.compared.set()
        return isinstance(other, _Token) and other.key == self.key


async def _hold(agent: Agent, held: _Held, token: Any = "req-1") -> asyncio.Task[AgentResult]:
    """Start the first call with ``token`` and return once its model call is waiting."""
    first = asyncio.create_task(agent.invoke_async("hi", idempotency_token=token))
    await held.started.wait()
    return first


async def _waiting(coroutine: Any) -> asyncio.Task[Any]:
    """Start a duplicate call; one loop turn takes it to its wait (it claims the token without awaiting)."""
    task = asyncio.ensure_future(coroutine)
    await asyncio.sleep(0)
    assert not task.done()
    return task


async def test_a_duplicate_gets_the_running_invocation_result_object() -> None:
    held = _Held()
    model = ScriptedModel(held, text("later"))
    agent = Agent(model)
    first = await _hold(agent, held)
    duplicate = await _waiting(agent.invoke_async("hi", idempotency_token="req-1"))
    held.release.set()
    result = await first
    assert await duplicate is result
    assert len(model.calls) == 1  # the agent ran once
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]
    assert "_inflight" not in agent.__dict__  # the slot is freed: the token runs again
    assert str(await agent.invoke_async("again", idempotency_token="req-1")) == "later\n"


async def test_other_tokens_and_calls_without_one_still_raise_concurrency_exception() -> None:
    held = _Held()
    agent = Agent(ScriptedModel(held, text("x"), text("y")))
    first = await _hold(agent, held)
    with pytest.raises(ConcurrencyException):
        await agent.invoke_async("b", idempotency_token="req-2")
    with pytest.raises(ConcurrencyException):
        await agent.invoke_async("c")
    held.release.set()
    assert str(await first) == "done\n"
    assert str(await agent.invoke_async("d", idempotency_token="req-2")) == "x\n"


async def test_a_token_call_meeting_a_call_without_one_raises_and_frees_the_token() -> None:
    held = _Held()
    agent = Agent(ScriptedModel(held, text("x")))
    first = asyncio.create_task(agent.invoke_async("hi"))
    await held.started.wait()
    with pytest.raises(ConcurrencyException):
        await agent.invoke_async("b", idempotency_token="req-1")
    held.release.set()
    await first
    assert str(await agent.invoke_async("c", idempotency_token="req-1")) == "x\n"


async def test_unhashable_equal_tokens_match() -> None:
    held = _Held()
    agent = Agent(ScriptedModel(held))
    token, equal = _Token("a"), _Token("a")
    with pytest.raises(TypeError):
        hash(token)
    first = await _hold(agent, held, token=token)
    duplicate = await _waiting(agent.invoke_async("hi", idempotency_token=equal))
    assert token.compared.is_set()
    held.release.set()
    assert await duplicate is await first


async def test_a_duplicate_raises_the_exception_the_running_invocation_raised() -> None:
    held = _Held(RuntimeError("model down"))
    agent = Agent(ScriptedModel(held))
    first = await _hold(agent, held)
    duplicate = await _waiting(agent.invoke_async("hi", idempotency_token="req-1"))
    held.release.set()
    with pytest.raises(Exception) as primary:
        await first
    with pytest.raises(Exception) as copy:
        await duplicate
    assert copy.value is primary.value


async def test_a_cancelled_task_aborts_its_duplicates() -> None:
    held = _Held()
    agent = Agent(ScriptedModel(held, text("x")))
    first = await _hold(agent, held)
    duplicate = await _waiting(agent.invoke_async("hi", idempotency_token="req-1"))
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    with pytest.raises(IdempotencyAbortedError):
        await duplicate
    assert str(await agent.invoke_async("x", idempotency_token="req-1")) == "x\n"  # the agent is free


async def test_agent_cancel_gives_the_duplicate_the_cancelled_result() -> None:
    held = _Held()
    agent = Agent(ScriptedModel(held))
    first = await _hold(agent, held)
    duplicate = await _waiting(agent.invoke_async("hi", idempotency_token="req-1"))
    agent.cancel()
    result = await first
    assert result.stop_reason == "cancelled"
    assert await duplicate is result


async def test_a_duplicate_does_not_observe_its_cancel_signal() -> None:
    held = _Held()
    agent = Agent(ScriptedModel(held))
    first = await _hold(agent, held)
    cancelled = threading.Event()
    cancelled.set()
    duplicate = await _waiting(agent.invoke_async("hi", idempotency_token="req-1", cancel_signal=cancelled))
    held.release.set()
    result = await first
    assert result.stop_reason == "end_turn"
    assert await duplicate is result


async def test_a_streamed_duplicate_yields_only_the_result_and_the_handler_hears_it() -> None:
    held = _Held()
    heard: list[str] = []
    agent = Agent(ScriptedModel(held), callback_handler=lambda **event: heard.append(event["type"]))
    first = await _hold(agent, held)
    heard_by_first = len(heard)

    async def read() -> list[dict[str, Any]]:
        return [event async for event in agent.stream_async("hi", idempotency_token="req-1")]

    duplicate = await _waiting(read())
    assert len(heard) == heard_by_first  # the duplicate hears nothing of the running invocation's stream
    held.release.set()
    result = await first
    assert await duplicate == [{"type": "result", "result": result}]
    assert heard.count("result") == 2  # the first call's result, then the duplicate's


async def test_a_stream_closed_before_its_result_aborts_its_duplicates() -> None:
    agent = Agent(ScriptedModel(text("x")))
    stream = agent.stream_async("hi", idempotency_token="req-1")
    await anext(stream)  # the invocation has begun; its stream waits at its first event
    duplicate = await _waiting(agent.invoke_async("hi", idempotency_token="req-1"))
    await stream.aclose()
    with pytest.raises(IdempotencyAbortedError):
        await duplicate
    assert str(await agent.invoke_async("x")) == "x\n"  # the closed invocation never called the model


async def test_a_streamed_first_call_serves_an_invoked_duplicate() -> None:
    held = _Held()
    agent = Agent(ScriptedModel(held))

    async def read() -> list[dict[str, Any]]:
        return [event async for event in agent.stream_async("hi", idempotency_token="req-1")]

    first = asyncio.create_task(read())
    await held.started.wait()
    duplicate = await _waiting(agent.invoke_async("hi", idempotency_token="req-1"))
    held.release.set()
    events = await first
    assert await duplicate is events[-1]["result"]


def test_sync_calls_from_two_threads_share_one_invocation() -> None:
    started, release = threading.Event(), threading.Event()

    async def held(call: Any) -> Any:
        started.set()
        await asyncio.to_thread(release.wait)
        return text("done")

    model = ScriptedModel(held)
    agent = Agent(model)
    results: dict[str, AgentResult] = {}
    token = _Token("a")  # the running call's token: the second call compares it with its own
    first = threading.Thread(target=lambda: results.update(first=agent("hi", idempotency_token=token)))
    first.start()
    started.wait()
    second = threading.Thread(target=lambda: results.update(second=agent("hi", idempotency_token=_Token("a"))))
    second.start()
    token.compared.wait()  # the second call found the first: it gets its result however the threads interleave
    release.set()
    first.join()
    second.join()
    assert results["second"] is results["first"]
    assert len(model.calls) == 1


def test_the_token_is_an_argument_not_invocation_state() -> None:
    seen: list[dict[str, Any]] = []
    agent = Agent(ScriptedModel(text("ok"), text("ok")))
    agent.add_hook(lambda event: seen.append(dict(event.invocation_state)), BeforeInvocationEvent)
    assert str(agent("x", idempotency_token="req-1")) == "ok\n"
    assert str(agent("x", idempotency_token=None)) == "ok\n"  # Strands' default
    assert seen == [{}, {}]
    plain = Agent(ScriptedModel(text("ok")))
    plain("x", idempotency_token="req-1")
    assert "_inflight" not in plain.__dict__
    pickle.dumps(plain)  # nothing of the token stays on the agent


def test_idempotency_aborted_error_is_a_ray_harness_error() -> None:
    assert issubclass(IdempotencyAbortedError, RayHarnessError)
    assert isinstance(pickle.loads(pickle.dumps(IdempotencyAbortedError("gone"))), IdempotencyAbortedError)
