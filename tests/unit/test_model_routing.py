"""ModelRouter and its strategies (Strands' ``strands.models.routing``): routing, failover, state (no Ray)."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from pydantic import BaseModel

from ray_harness import Agent, tool
from ray_harness.agent import ModelRetryStrategy
from ray_harness.models import (
    ClassifierStrategy,
    FallbackStrategy,
    Model,
    ModelPrices,
    ModelRouter,
    RateLimit,
    RoutingAttempt,
    RoutingCandidate,
    RoutingContext,
    RoutingStrategy,
    rate_limit as rate_limit_module,
)
from ray_harness.testing import FakeClock, ScriptedModel, text, tool_call
from ray_harness.types.exceptions import ContextWindowOverflowException, ModelThrottledException


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


class Answer(BaseModel):
    value: int


def failing(model_id: str, *errors: BaseException) -> ScriptedModel:
    return ScriptedModel(*errors, model_id=model_id)


class Recorder:
    """A strategy that records what it is shown and answers from a script (defaulting to FallbackStrategy)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.contexts: list[RoutingContext] = []

    async def select(self, context: RoutingContext, **kwargs: Any) -> RoutingCandidate | None:
        self.contexts.append(context)
        if not self.answers:
            return await FallbackStrategy().select(context)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer(context) if callable(answer) else answer  # type: ignore[no-any-return]


# -- surface ---------------------------------------------------------------------------------------------


def test_strands_names_are_exported_and_importing_models_stays_cheap() -> None:
    import ray_harness.models.routing as routing

    for name in ("CandidateInput", "ClassifierStrategy", "FallbackStrategy", "ModelRouter", "RoutingAttempt",
                 "RoutingCandidate", "RoutingContext", "RoutingStrategy"):
        assert name in routing.__all__
    assert isinstance(FallbackStrategy(), RoutingStrategy)
    code = "import sys, ray_harness.models; print('ray_harness.models.routing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize(("models", "kwargs", "error", "match"), [
    ([], {}, ValueError, "at least one"),
    ("ab", {}, TypeError, "sequence"),
    ([object()], {}, TypeError, r"models\[0\]"),
    ([ScriptedModel()], {"max_switches": -1}, ValueError, "max_switches"),
    ([ScriptedModel()], {"strategy": object()}, TypeError, "async select"),
])
def test_bad_arguments_name_the_field(models: Any, kwargs: dict[str, Any], error: type[Exception],
                                      match: str) -> None:
    with pytest.raises(error, match=match):
        ModelRouter(models, **kwargs)


def test_a_model_reachable_twice_or_a_repeated_name_is_refused() -> None:
    a, b = ScriptedModel(), ScriptedModel()
    with pytest.raises(ValueError, match="repeats a model"):
        ModelRouter([a, a])
    with pytest.raises(ValueError, match="repeats a model"):
        ModelRouter([a, ModelRouter([b, a])])
    with pytest.raises(ValueError, match="used twice"):
        ModelRouter([RoutingCandidate(a, name="x"), RoutingCandidate(b, name="x")])
    candidate = RoutingCandidate(a)
    with pytest.raises(ValueError, match="same RoutingCandidate"):
        ModelRouter([candidate, candidate])


def test_candidate_metadata_must_be_json() -> None:
    with pytest.raises(ValueError, match="JSON"):
        RoutingCandidate(ScriptedModel(), metadata={"when": object()})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="string"):
        RoutingCandidate(ScriptedModel(), metadata={1: "x"})  # type: ignore[dict-item]


def test_a_stateful_candidate_is_refused() -> None:
    class Stateful(ScriptedModel):
        @property
        def stateful(self) -> bool:
            return True

    with pytest.raises(ValueError, match="stateful"):
        ModelRouter([Stateful()])


def test_config_names_the_default_and_update_config_points_at_the_candidates() -> None:
    router = ModelRouter([RoutingCandidate(ScriptedModel(model_id="a"), name="fast"), ScriptedModel(model_id="b")])
    config = router.get_config()
    assert config["model_id"] == "a" and config["candidates"][0] == "fast" and config["strategy"] == "FallbackStrategy"
    assert router.model_id == "a" and router.default_model is router.candidates[0].model
    with pytest.raises(TypeError, match="candidate models"):
        router.update_config(max_tokens=10)


def test_the_context_window_is_the_smallest_known() -> None:
    router = ModelRouter([ScriptedModel(context_window=100_000), ScriptedModel(context_window=None),
                          ScriptedModel(context_window=8_000)])
    assert router.context_window_limit == 8_000
    assert ModelRouter([ScriptedModel(context_window=None)]).context_window_limit is None


# -- routing in the agent loop ---------------------------------------------------------------------------


def test_a_failing_candidate_fails_over_and_the_tool_loop_stays_on_the_new_one() -> None:
    a = failing("a", RuntimeError("down"))
    b = ScriptedModel(tool_call("add", {"a": 1, "b": 2}), text("3"), model_id="b")
    agent = Agent(ModelRouter([a, b]), tools=[add])
    assert str(agent("add")).strip() == "3"
    assert len(a.calls) == 1 and len(b.calls) == 2  # the second call of the request went straight to b


def test_each_request_opens_a_session_from_the_strategys_opening_choice() -> None:
    a = ScriptedModel(RuntimeError("down"), text("a again"), model_id="a")
    b = ScriptedModel(text("b"), model_id="b")
    agent = Agent(ModelRouter([a, b]))
    assert str(agent("one")).strip() == "b"
    assert str(agent("two")).strip() == "a again"  # a new request starts on the declared first candidate
    assert [len(a.calls), len(b.calls)] == [2, 1]


def test_when_every_candidate_fails_the_error_surfaces_and_the_retry_strategy_calls_again() -> None:
    throttled = ModelThrottledException("slow down")
    a = ScriptedModel(throttled, text("a, after backing off"), model_id="a")
    b = ScriptedModel(throttled, model_id="b")
    clock = FakeClock()
    agent = Agent(ModelRouter([a, b]), retry_strategy=ModelRetryStrategy(clock=clock))
    assert str(agent("hi")).strip() == "a, after backing off"
    assert [len(a.calls), len(b.calls)] == [2, 1]
    assert clock.sleeps == [4.0]  # one back-off: the whole round failed once


def test_without_a_retry_the_last_candidates_error_is_raised() -> None:
    router = ModelRouter([failing("a", RuntimeError("a down")), failing("b", RuntimeError("b down"))])
    with pytest.raises(RuntimeError, match="b down"):
        Agent(router)("hi")


def test_max_switches_caps_failover() -> None:
    b = ScriptedModel(text("b"), model_id="b")
    with pytest.raises(RuntimeError, match="a down"):
        Agent(ModelRouter([failing("a", RuntimeError("a down")), b], max_switches=0))("hi")
    assert b.calls == []


class HalfStream(Model):
    """Streams the start of an answer, then fails."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> dict[str, Any]:
        return {"model_id": "half"}

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, *,
                     tool_choice: Any = None) -> AsyncGenerator[Any, None]:
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockDelta": {"delta": {"text": "par"}}}
        raise RuntimeError("connection reset")


def test_a_half_streamed_answer_is_not_failed_over() -> None:
    b = ScriptedModel(text("b"), model_id="b")
    with pytest.raises(RuntimeError, match="connection reset"):
        Agent(ModelRouter([HalfStream(), b]))("hi")
    assert b.calls == []


def test_a_context_overflow_is_not_a_failover() -> None:
    b = ScriptedModel(text("b"), model_id="b")
    router = ModelRouter([failing("a", ContextWindowOverflowException("too long")), b])
    with pytest.raises(ContextWindowOverflowException):
        Agent(router)("hi")  # the default manager cannot shorten one message: the overflow is raised
    assert b.calls == []


def test_a_candidate_without_keyword_arguments_is_not_given_agent_metadata() -> None:
    # HalfStream.stream takes no **kwargs: the router must not pass it agent_metadata (a TypeError otherwise).
    b = ScriptedModel(text("b"), model_id="b")
    with pytest.raises(RuntimeError, match="connection reset"):
        Agent(ModelRouter([HalfStream(), b]))("hi")


def test_the_call_is_priced_at_the_rate_of_the_model_that_made_it() -> None:
    usage = {"inputTokens": 1_000_000, "outputTokens": 0, "totalTokens": 1_000_000}
    a = ScriptedModel(RuntimeError("down"), model_id="a", prices=ModelPrices(1.0, 1.0))
    b = ScriptedModel(text("b", usage=usage), model_id="b", prices=ModelPrices(5.0, 5.0))
    agent = Agent(ModelRouter([a, b]))
    agent("hi")
    assert agent.event_loop_metrics.accumulated_cost_usd == pytest.approx(5.0)
    fixed = ModelRouter([ScriptedModel(text("x", usage=usage), prices=ModelPrices(5.0, 5.0))])
    fixed.prices = ModelPrices(2.0, 2.0)
    agent = Agent(fixed)
    agent("hi")
    assert agent.event_loop_metrics.accumulated_cost_usd == pytest.approx(2.0)


def test_each_candidate_waits_for_its_own_rate_limit() -> None:
    a = ScriptedModel(ModelThrottledException("429"), model_id="a")
    a.rate_limit = RateLimit(requests_per_minute=6000, key="routing-unit-a")
    b = ScriptedModel(text("b"), model_id="b")
    b.rate_limit = RateLimit(requests_per_minute=6000, key="routing-unit-b")
    Agent(ModelRouter([a, b]))("hi")
    buckets = rate_limit_module._LOCAL
    assert "routing-unit-a" in buckets and "routing-unit-b" in buckets
    assert buckets["routing-unit-a"].factor < buckets["routing-unit-b"].factor  # a's throttle slowed only a


def test_structured_output_routes_too() -> None:
    a = failing("a", RuntimeError("down"))
    b = ScriptedModel(tool_call("Answer", {"value": 7}), tool_call("Answer", {"value": 8}), model_id="b")
    router = ModelRouter([a, b])
    assert Agent(router)("x?", structured_output_model=Answer).structured_output == Answer(value=7)

    async def direct() -> Any:
        output = None
        async for event in router.structured_output(Answer, "x?"):
            output = event.get("output", output)
        return output

    assert asyncio.run(direct()) == Answer(value=8)  # a new request: a again (its script is spent), then b


# -- the strategy's contract --------------------------------------------------------------------------------


def test_the_strategy_sees_copies_the_candidates_and_the_attempts() -> None:
    a, b = failing("a", RuntimeError("down")), ScriptedModel(text("b"), model_id="b")
    strategy = Recorder()
    router = ModelRouter([a, b], strategy=strategy)
    agent = Agent(router, system_prompt="be brief")
    agent("hi")
    opening, after = strategy.contexts
    assert opening.attempts == () and opening.system_prompt == "be brief"
    assert opening.candidates is router.candidates and dict(opening.invocation_state) == {}
    assert opening.messages == agent.messages[:1] and opening.messages is not agent.messages
    assert [(x.candidate, type(x.exception)) for x in after.attempts] == [(router.candidates[0], RuntimeError)]


def test_declining_the_opening_serves_the_default_model() -> None:
    a, b = ScriptedModel(text("a"), model_id="a"), ScriptedModel(text("b"), model_id="b")
    assert str(Agent(ModelRouter([a, b], strategy=Recorder(None)))("hi")).strip() == "a"


def test_a_foreign_candidate_is_refused_at_the_opening() -> None:
    router = ModelRouter([ScriptedModel()], strategy=Recorder(RoutingCandidate(ScriptedModel())))
    with pytest.raises(ValueError, match=r"context\.candidates"):
        Agent(router)("hi")


def test_a_strategy_failing_after_a_failure_leaves_the_models_error() -> None:
    router = ModelRouter([failing("a", RuntimeError("a down")), ScriptedModel(text("b"))],
                         strategy=Recorder(lambda c: c.candidates[0], KeyError("strategy bug")))
    with pytest.raises(RuntimeError, match="a down"):
        Agent(router)("hi")


def test_naming_a_used_candidate_again_ends_the_round() -> None:
    a = ScriptedModel(RuntimeError("a down"), text("never"), model_id="a")
    router = ModelRouter([a, ScriptedModel(text("b"))], strategy=Recorder(lambda c: c.candidates[0],
                                                                           lambda c: c.candidates[0]))
    with pytest.raises(RuntimeError, match="a down"):
        Agent(router)("hi")
    assert len(a.calls) == 1


def test_fallback_prefers_the_healthiest_untried_candidate() -> None:
    a, b, c = (RoutingCandidate(ScriptedModel(), name=n) for n in "abc")
    fail = RuntimeError("x")

    def pick(*attempts: RoutingAttempt) -> RoutingCandidate | None:
        context = RoutingContext(messages=[], system_prompt=None, tool_specs=[], candidates=(a, b, c),
                                 attempts=attempts)
        return asyncio.run(FallbackStrategy().select(context))

    assert pick() is a
    assert pick(RoutingAttempt(a, fail)) is b
    assert pick(RoutingAttempt(a, fail), RoutingAttempt(b, fail), RoutingAttempt(c, fail)) is None
    # After a success everything is eligible again; a's failure keeps it below b and c, b succeeded so is clean.
    assert pick(RoutingAttempt(a, fail), RoutingAttempt(b)) is b
    assert pick(RoutingAttempt(a, fail), RoutingAttempt(b, fail), RoutingAttempt(c)) is c


def test_a_nested_router_is_one_candidate_without_failover_of_its_own() -> None:
    inner_a = failing("inner-a", RuntimeError("inner down"))
    inner_b = ScriptedModel(text("inner b"), model_id="inner-b")
    outer_b = ScriptedModel(text("outer b"), model_id="outer-b")
    router = ModelRouter([ModelRouter([inner_a, inner_b]), outer_b])
    assert str(Agent(router)("hi")).strip() == "outer b"
    assert len(inner_a.calls) == 1 and inner_b.calls == []
    assert router.default_model is inner_a


# -- ClassifierStrategy --------------------------------------------------------------------------------------


def test_the_classifier_picks_from_the_candidates_evidence() -> None:
    classifier = ScriptedModel(tool_call("_Choice", {"selected_candidate_index": 1}), model_id="classifier")
    small = ScriptedModel(text("small"), model_id="small")
    large = ScriptedModel(text("large"), model_id="large")
    router = ModelRouter([RoutingCandidate(small, name="small", description="short answers"),
                          RoutingCandidate(large, name="large", description="hard maths", metadata={"tier": 2})],
                         strategy=ClassifierStrategy(classifier))
    agent = Agent(router, system_prompt="You are a tutor.")
    assert str(agent("prove Fermat's last theorem")).strip() == "large"
    call = classifier.calls[0]
    assert call.last_text == "prove Fermat's last theorem"
    assert "hard maths" in str(call.system_prompt) and "You are a tutor." in str(call.system_prompt)
    assert '"tier":2' in str(call.system_prompt)


def test_a_failing_classifier_declines_and_declines_failover() -> None:
    small = ScriptedModel(text("small"), model_id="small")
    router = ModelRouter([small, ScriptedModel(model_id="large")],
                         strategy=ClassifierStrategy(ScriptedModel(RuntimeError("classifier down"))))
    assert str(Agent(router)("hi")).strip() == "small"
    after = RoutingContext(messages=[], system_prompt=None, tool_specs=[], candidates=router.candidates,
                           attempts=(RoutingAttempt(router.candidates[0], RuntimeError("x")),))
    assert asyncio.run(ClassifierStrategy(ScriptedModel()).select(after)) is None


def test_the_classifiers_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="timeout"):
        ClassifierStrategy(ScriptedModel(), timeout=0)
    with pytest.raises(TypeError, match="max_message_chars"):
        ClassifierStrategy(ScriptedModel(), max_message_chars=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Model"):
        ClassifierStrategy(object())  # type: ignore[arg-type]
    strategy = ClassifierStrategy(ScriptedModel(), max_candidate_chars=10)
    router = ModelRouter([RoutingCandidate(ScriptedModel(), description="x" * 50), ScriptedModel()],
                         strategy=strategy)
    with pytest.raises(ValueError, match="max_candidate_chars"):
        Agent(router)("hi")


def test_the_classifier_sees_a_bounded_request() -> None:
    from ray_harness.models.routing.classifier_strategy import latest_request

    messages: Any = [{"role": "user", "content": [{"text": "a" * 50 + "z" * 50}, {"image": {}}]},
                     {"role": "assistant", "content": [{"text": "..."}]},
                     {"role": "user", "content": [{"toolResult": {"toolUseId": "1", "content": []}}]}]
    bounded = latest_request(messages, 60)
    assert len(bounded) == 60 and bounded.startswith("a") and bounded.endswith("[Image]")


# -- state, snapshots, pickling ------------------------------------------------------------------------------


def test_snapshots_carry_the_candidates_states() -> None:
    a = failing("a", RuntimeError("down"))
    b = ScriptedModel(text("one"), text("two"), model_id="b")
    agent = Agent(ModelRouter([a, b]))
    agent("first")
    snapshot = agent.snapshot()
    assert snapshot.model_state == {"candidates": [a.get_state(), b.get_state()]}
    agent("second")
    agent.restore(snapshot)
    assert b.get_state()["cursor"] == 1 and a.get_state()["cursor"] == 1
    with pytest.raises(ValueError, match="'candidates'"):
        agent.model.set_state({"candidates": [None]})  # type: ignore[attr-defined]
    agent.model.set_state({})  # type: ignore[attr-defined]  # an empty state leaves the candidates alone


def test_a_pickled_router_starts_without_sessions_and_routes() -> None:
    a = failing("a", RuntimeError("down"))
    b = ScriptedModel(tool_call("add", {"a": 1, "b": 2}), text("3"), model_id="b")
    agent = Agent(ModelRouter([a, b]), tools=[add])
    agent("add")
    assert agent.model._sessions  # type: ignore[attr-defined]
    copy = pickle.loads(pickle.dumps(agent))
    assert copy.model._sessions == {}
    assert isinstance(copy.model, ModelRouter) and copy.model.candidates[1].model.get_state()["cursor"] == 2
