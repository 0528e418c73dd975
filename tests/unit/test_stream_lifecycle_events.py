"""Strands' lifecycle stream events: ``init_event_loop``, ``start`` / ``start_event_loop`` per cycle, ``force_stop``.

A callback handler or ``stream_async`` reader written for Strands keys on them (``if event.get("init_event_loop")``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.testing import ScriptedModel, text, tool_call

LIFECYCLE = ("init_event_loop", "start", "start_event_loop", "force_stop", "result")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: One.
        b: The other.
    """
    return a + b


def _lifecycle(events: list[dict[str, Any]]) -> list[str]:
    return [str(event["type"]) for event in events if event.get("type") in LIFECYCLE]


def test_a_two_cycle_stream_has_strands_lifecycle_events_in_order() -> None:
    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}), text("3")), tools=[add])

    async def read() -> list[dict[str, Any]]:
        return [event async for event in agent.stream_async("add 1 and 2")]

    events = asyncio.run(read())
    assert _lifecycle(events) == ["init_event_loop", "start", "start_event_loop", "start", "start_event_loop",
                                  "result"]
    init = next(event for event in events if event["type"] == "init_event_loop")
    assert init["init_event_loop"] is True  # Strands' key, for handlers that test it
    types = [event["type"] for event in events]
    assert types.index("init_event_loop") < types.index("start") < types.index("message")


def test_a_callback_handler_hears_them_with_strands_keys() -> None:
    heard: list[dict[str, Any]] = []
    agent = Agent(ScriptedModel(text("hi")), callback_handler=lambda **event: heard.append(event))
    agent("hello")
    assert [event for event in heard if event.get("start_event_loop")] == [
        {"type": "start_event_loop", "start_event_loop": True}]
    assert sum(1 for event in heard if event.get("init_event_loop")) == 1


def test_a_model_error_ends_the_stream_with_force_stop_then_raises_and_the_history_rolls_back() -> None:
    heard: list[dict[str, Any]] = []
    agent = Agent(ScriptedModel(RuntimeError("provider down")), callback_handler=lambda **event: heard.append(event),
                  retry_strategy=None)
    with pytest.raises(RuntimeError, match="provider down"):
        agent("hello")
    assert _lifecycle(heard) == ["init_event_loop", "start", "start_event_loop", "force_stop"]
    assert heard[-1] == {"type": "force_stop", "force_stop": True, "force_stop_reason": "provider down"}
    assert agent.messages == []


def test_a_reader_that_stops_at_force_stop_still_gets_the_rollback() -> None:
    agent = Agent(ScriptedModel(RuntimeError("provider down")), retry_strategy=None)

    async def read_until_force_stop() -> None:
        stream = agent.stream_async("hello")
        async for event in stream:
            if event.get("force_stop"):
                break
        await stream.aclose()

    asyncio.run(read_until_force_stop())
    assert agent.messages == []
    agent.model = ScriptedModel(text("back"))
    assert str(agent("again")).strip() == "back"  # the agent was released


def test_a_throttled_call_is_heard_as_strands_throttle_event_after_the_wait() -> None:
    from ray_harness.agent.retry import ModelRetryStrategy
    from ray_harness.testing import FakeClock
    from ray_harness.types.exceptions import ModelThrottledException

    clock = FakeClock()
    heard: list[dict[str, Any]] = []
    model = ScriptedModel(ModelThrottledException("429"), ModelThrottledException("429", retry_after=30), text("ok"))
    agent = Agent(model, retry_strategy=ModelRetryStrategy(max_attempts=4, initial_delay=2, max_delay=60, clock=clock),
                  callback_handler=lambda **event: heard.append(event))
    assert str(agent("x")) == "ok\n"
    throttles = [event for event in heard if "event_loop_throttled_delay" in event]
    assert throttles == [{"type": "event_loop_throttled", "event_loop_throttled_delay": 2.0},
                         {"type": "event_loop_throttled", "event_loop_throttled_delay": 30.0}]
    types = [event["type"] for event in heard]
    assert types.index("event_loop_throttled") < types.index("message")  # before the answer that came after


def test_a_quiet_invocation_retries_the_same_without_the_event() -> None:
    from ray_harness.agent.retry import ModelRetryStrategy
    from ray_harness.testing import FakeClock
    from ray_harness.types.exceptions import ModelThrottledException

    clock = FakeClock()
    agent = Agent(ScriptedModel(ModelThrottledException("429"), text("ok")),
                  retry_strategy=ModelRetryStrategy(initial_delay=1, clock=clock))
    assert str(asyncio.run(agent.invoke_async("x"))) == "ok\n"
    assert clock.sleeps == [1]
