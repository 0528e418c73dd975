"""The token bucket behind RateLimit: bursts, sliding windows, AIMD, bad values (no Ray)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.models import RateLimit
from ray_harness.models.rate_limit import TokenBucket, model_key, register_rate_limits
from ray_harness.testing import ScriptedModel, text


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def grants(bucket: TokenBucket, clock: Clock, calls: int, tokens: float = 0.0) -> list[float]:
    """When each of ``calls`` back-to-back callers may start (they all ask at the current time)."""
    return [clock.now + bucket.reserve(tokens) for _ in range(calls)]


def assert_windows(starts: list[float], rate: float, capacity: float, window: float = 1.0) -> None:
    starts = sorted(starts)
    for i, start in enumerate(starts):
        inside = sum(1 for s in starts[i:] if s < start + window - 1e-9)
        assert inside <= capacity + rate * window + 1e-6, (start, inside)


def test_a_bucket_holds_one_second_and_paces_the_rest() -> None:
    clock = Clock()
    bucket = TokenBucket(RateLimit(requests_per_minute=600), clock)  # 10/s
    starts = grants(bucket, clock, 40)
    assert starts[:10] == [100.0] * 10  # one second's worth at once
    assert starts[10] == pytest.approx(100.1) and starts[-1] == pytest.approx(103.0)
    assert_windows(starts, rate=10, capacity=10)


def test_a_slow_rate_still_allows_one_call() -> None:
    clock = Clock()
    bucket = TokenBucket(RateLimit(requests_per_minute=6), clock)  # 0.1/s, capacity minimum 1
    assert grants(bucket, clock, 3) == pytest.approx([100.0, 110.0, 120.0])


def test_tokens_per_minute_with_correction_after_the_call() -> None:
    clock = Clock()
    bucket = TokenBucket(RateLimit(tokens_per_minute=6000), clock)  # 100 tokens/s
    assert bucket.reserve(50) == 0
    bucket.settle(estimated=50, actual=250)  # the call used more than estimated: the debt delays the next one
    assert bucket.reserve(50) == pytest.approx(2.0)


def test_aimd_halves_on_throttling_and_grows_back() -> None:
    clock = Clock()
    bucket = TokenBucket(RateLimit(requests_per_minute=600), clock)
    bucket.throttled()
    bucket.throttled()
    assert bucket.state()["requests_per_minute"] == pytest.approx(150)
    assert bucket.reserve() > 0  # nothing left to burst right after a 429
    for _ in range(100):
        bucket.succeeded()
    assert bucket.state()["requests_per_minute"] == pytest.approx(600)  # never above the configured rate
    for _ in range(20):
        bucket.throttled()
    assert bucket.state()["factor"] > 0


@pytest.mark.parametrize(("kwargs", "field"), [({"requests_per_minute": 0}, "requests_per_minute"),
                                               ({"requests_per_minute": -5}, "requests_per_minute"),
                                               ({"tokens_per_minute": float("nan")}, "tokens_per_minute"),
                                               ({"tokens_per_minute": "many"}, "tokens_per_minute"),
                                               ({"requests_per_minute": True}, "requests_per_minute"),
                                               ({}, "requests_per_minute or tokens_per_minute")])
def test_bad_rates_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RateLimit(**kwargs)


def test_providers_take_rate_limit_and_keys_name_provider_and_model() -> None:
    from ray_harness.evaluation import RateLimit as FromEvaluation
    from ray_harness.models import OpenAIModel

    assert FromEvaluation is RateLimit
    model = OpenAIModel("gpt-x", rate_limit=RateLimit(requests_per_minute=60))
    assert model.rate_limit == RateLimit(requests_per_minute=60) and model_key(model) == "openai:gpt-x"
    with pytest.raises(ValueError, match="rate_limit"):
        OpenAIModel("gpt-x", rate_limit={"requests_per_minute": 60})
    with pytest.raises(ValueError, match="provider"):
        register_rate_limits({"no-colon": RateLimit(requests_per_minute=1)})


def test_an_agent_waits_for_its_models_permit() -> None:
    model = ScriptedModel(lambda call: text("ok"), record_calls=False, loop=True)
    model.rate_limit = RateLimit(requests_per_minute=60, key="unit-test-agent-bucket")  # 1/s, burst 1
    agent = Agent(model)
    loop_times: list[float] = []

    async def run() -> None:
        for _ in range(3):
            await agent.invoke_async("hi")
            loop_times.append(asyncio.get_running_loop().time())

    asyncio.run(run())
    # Three calls at 1/s with a burst of one: the third can start no sooner than two seconds after the first.
    assert loop_times[2] - loop_times[0] >= 1.9


def test_registered_limits_travel_to_the_actors_a_process_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray_harness.models import rate_limit as module

    monkeypatch.setattr(module, "_REGISTERED", {})
    monkeypatch.setattr(module, "_FROM_ENV", {"read": True})
    monkeypatch.delenv(module.ENV_VAR, raising=False)
    assert module.forwarded_rate_limits() is None
    limits = {"openai:gpt-x": RateLimit(requests_per_minute=60, tokens_per_minute=9000),
              "anthropic:c": RateLimit(tokens_per_minute=500, key="shared")}
    register_rate_limits(limits)
    value = module.forwarded_rate_limits()
    assert value is not None  # the runtime puts it in every actor's environment (runtime._telemetry.actor_env)
    # The started process: nothing registered yet; the variable is read on its first model call.
    monkeypatch.setattr(module, "_REGISTERED", {})
    monkeypatch.setattr(module, "_FROM_ENV", {"read": False})
    monkeypatch.setenv(module.ENV_VAR, value)
    model = ScriptedModel(text("hi"), model_id="gpt-x")
    model.provider = "openai"  # type: ignore[attr-defined]
    assert module._limit_of(model) == ("openai:gpt-x", limits["openai:gpt-x"])
    assert module.registered_rate_limits() == limits


def test_a_bad_forwarded_variable_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray_harness.models import rate_limit as module

    monkeypatch.setattr(module, "_REGISTERED", {})
    monkeypatch.setattr(module, "_FROM_ENV", {"read": False})
    monkeypatch.setenv(module.ENV_VAR, '{"openai:x": {"requests_per_minute": -1}}')
    with pytest.raises(ValueError, match=r"RAY_HARNESS_RATE_LIMITS.*requests_per_minute"):
        module.registered_rate_limits()


def test_a_limit_keyed_by_a_model_spec_limits_that_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray_harness.models import from_string, rate_limit as module

    monkeypatch.setattr(module, "_REGISTERED", {})
    monkeypatch.setattr(module, "_FROM_ENV", {"read": True})
    limit = RateLimit(requests_per_minute=60)
    spec = "openai-compatible:http://localhost:8000/v1#my-model?max_tokens=64"
    register_rate_limits({spec: limit, "scriptedmodel:x": limit})

    assert module._limit_of(from_string(spec)) == ("openai:my-model", limit)
    assert set(module.registered_rate_limits()) == {"openai:my-model", "scriptedmodel:x"}
