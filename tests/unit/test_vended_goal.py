"""``ray_harness.vended_plugins.goal``: GoalLoop retries until its goal is met, as Strands' goal plugin."""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from typing import Any, cast

import cloudpickle
import pytest

from ray_harness import Agent, tool
from ray_harness.hooks import AfterInvocationEvent, BeforeToolCallEvent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.testing.clock import FakeClock
from ray_harness.types.content import Message
from ray_harness.vended_plugins import goal as goal_module
from ray_harness.vended_plugins.goal import (
    JUDGE_SYSTEM_PROMPT,
    GoalAttempt,
    GoalLoop,
    GoalResult,
    JudgeConfig,
    JudgeOutcome,
    ValidationOutcome,
    Validator,
    build_judge_prompt,
)


def verdict(passed: bool, feedback: str | None = None) -> Any:
    """The judge model's answer: a call of the structured-output tool."""
    return tool_call("JudgeOutcome", {"passed": passed} | ({"feedback": feedback} if feedback else {}))


def answer_text(response: Message) -> str:
    return "".join(block.get("text", "") for block in response["content"])


def test_the_public_names_are_strands() -> None:
    import strands.vended_plugins.goal as strands_goal

    assert sorted(goal_module.__all__) == sorted(strands_goal.__all__)


def test_a_goal_met_on_the_first_attempt_ends_the_call() -> None:
    model = ScriptedModel(["done", verdict(True)])
    loop = GoalLoop("say done", max_attempts=3)
    agent = Agent(model, plugins=[loop])
    result = agent("go")
    assert str(result) == "done\n"
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]
    assert loop.last_result(agent) == GoalResult(True, "satisfied", [GoalAttempt(1, True)])
    model.assert_complete()


def test_the_judge_reads_the_goal_and_transcript_with_its_system_prompt() -> None:
    model = ScriptedModel(["done", verdict(True)])
    agent = Agent(model, plugins=[GoalLoop("say done", max_attempts=3)])
    agent("go")
    judge_call = model.calls[1]
    assert judge_call.system_prompt == JUDGE_SYSTEM_PROMPT
    assert judge_call.last_text == "Goal:\nsay done\n\nConversation transcript:\n[user]\ngo\n\n[assistant]\ndone"
    assert "JudgeOutcome" in judge_call.tool_names


def test_a_failed_verdict_retries_with_its_feedback_until_the_goal_is_met() -> None:
    model = ScriptedModel(["draft 1", verdict(False, "  too long  "), "draft 2", verdict(True)])
    loop = GoalLoop("be short", max_attempts=5)
    agent = Agent(model, plugins=[loop])
    result = agent("write")
    # As Strands: the call returns the last round's answer; the history keeps every attempt and retry prompt.
    assert str(result) == "draft 2\n" and result.stop_reason == "end_turn"
    assert [(m["role"], answer_text(m)) for m in agent.messages] == [
        ("user", "write"), ("assistant", "draft 1"),
        ("user", goal_module.plugin._default_resume_prompt("too long")), ("assistant", "draft 2")]
    assert "Feedback on what was wrong:\ntoo long\n" in answer_text(agent.messages[2])
    assert loop.last_result(agent) == GoalResult(
        True, "satisfied", [GoalAttempt(1, False, "  too long  "), GoalAttempt(2, True)])
    model.assert_complete()


def test_max_attempts_stops_the_run_with_its_reason() -> None:
    model = ScriptedModel(["a1", verdict(False, "no"), "a2", verdict(False, "still no")])
    loop = GoalLoop("impossible", max_attempts=2)
    agent = Agent(model, plugins=[loop])
    assert str(agent("go")) == "a2\n"
    result = loop.last_result(agent)
    assert result is not None and (result.passed, result.stop_reason) == (False, "max_attempts")
    assert [a.attempt for a in result.attempts] == [1, 2]
    model.assert_complete()  # no third attempt


def test_the_timeout_stops_the_run_before_validating() -> None:
    clock = FakeClock()
    calls: list[str] = []

    def slow(response: Message, agent: Agent) -> bool:
        calls.append(answer_text(response))
        clock.advance(10)
        return False

    loop = GoalLoop(slow, timeout=5)
    loop._clock = clock
    agent = Agent(ScriptedModel(["a1", "a2"]), plugins=[loop])
    agent("go")
    assert calls == ["a1"]  # the second round found the 5 s spent
    assert loop.last_result(agent) == GoalResult(False, "timeout", [GoalAttempt(1, False)])


async def test_a_validator_function_gets_the_response_and_agent_and_may_be_async() -> None:
    seen: list[tuple[str, Agent]] = []

    async def shorter_than_5(response: Message, agent: Agent) -> ValidationOutcome | dict[str, Any]:
        seen.append((answer_text(response), agent))
        words = len(answer_text(response).split())
        return ValidationOutcome(True) if words < 5 else {"passed": False, "feedback": f"{words} words"}

    assert isinstance(shorter_than_5, Validator)
    model = ScriptedModel(["one two three four five", "one two"])
    loop = GoalLoop(shorter_than_5, max_attempts=3)
    agent = Agent(model, plugins=[loop])
    await agent.invoke_async("go")
    assert [text for text, _ in seen] == ["one two three four five", "one two"]
    assert all(a is agent for _, a in seen)
    assert loop.last_result(agent) == GoalResult(True, "satisfied", [GoalAttempt(1, False, "5 words"),
                                                                      GoalAttempt(2, True)])


def test_a_validator_that_raises_fails_the_attempt_with_its_error(caplog: pytest.LogCaptureFixture) -> None:
    def broken(response: Message, agent: Agent) -> bool:
        raise KeyError("boom")

    loop = GoalLoop(broken, max_attempts=2)
    agent = Agent(ScriptedModel(["a1", "a2"]), plugins=[loop])
    with caplog.at_level(logging.WARNING):
        agent("go")
    result = loop.last_result(agent)
    assert result is not None and result.attempts[0] == GoalAttempt(1, False, "Validator error: 'boom'")
    assert "validator threw" in caplog.text


def test_judge_outcomes_parse_and_a_missing_one_fails() -> None:
    assert JudgeOutcome.model_validate({"passed": False, "feedback": "x"}) == JudgeOutcome(passed=False, feedback="x")
    assert JudgeOutcome.model_validate({"passed": True}).feedback is None
    # A judge that answers in prose only (no structured output, even when forced) fails the attempt.
    judge = ScriptedModel(["I think it passes", "still prose"])
    loop = GoalLoop("g", judge=JudgeConfig(model=judge, system_prompt="be fair"), max_attempts=1)
    agent = Agent(ScriptedModel(["a1"]), plugins=[loop])
    agent("go")
    result = loop.last_result(agent)
    assert result is not None and result.attempts[0].passed is False
    assert result.attempts[0].feedback is not None and result.attempts[0].feedback.startswith("Validator error:")
    assert judge.calls[0].system_prompt == "be fair"


def test_build_judge_prompt_renders_tool_calls_and_clips_long_blocks() -> None:
    transcript: list[Message] = [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "echo", "input": {"x": 1}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "success",
                                                      "content": [{"text": "y" * 501}, {"json": {"k": 2}}]}}]},
        {"role": "assistant", "content": [{"image": {"format": "png", "source": {"bytes": b""}}}, {"text": "ok"}]},
    ]
    from strands.vended_plugins.goal import build_judge_prompt as strands_build_judge_prompt

    expected = ('Goal:\ngoal\n\nConversation transcript:\n[user]\nhi\n\n[assistant]\n[tool-call: echo] input={"x": 1}'
                f'\n\n[user]\n[tool-result: success] {"y" * 500}… [10 more chars]\n\n[assistant]\nok')
    assert build_judge_prompt("goal", transcript) == expected == strands_build_judge_prompt("goal", cast(Any, transcript))


def test_preserve_context_false_rewinds_the_history_before_each_retry() -> None:
    model = ScriptedModel(["a1", "a2"])
    loop = GoalLoop(lambda response, agent: answer_text(response) == "a2", max_attempts=3, preserve_context=False)
    agent = Agent(model, plugins=[loop], messages=[{"role": "user", "content": [{"text": "old"}]},
                                                   {"role": "assistant", "content": [{"text": "older"}]}])
    agent.system_prompt = "sys"
    first = agent.messages[0]
    agent("go")
    # As Strands: a1 is gone, the retry prompt follows the original prompt; older messages are the same objects.
    assert [answer_text(m) for m in agent.messages] == [
        "old", "older", "go", goal_module.plugin._default_resume_prompt(None), "a2"]
    assert agent.messages[0] is first
    assert model.calls[1].messages[-2]["content"] == [{"text": "go"}]


def test_a_custom_resume_prompt_gets_the_stripped_feedback() -> None:
    got: list[str | None] = []

    def template(feedback: str | None) -> str:
        got.append(feedback)
        return f"again: {feedback}"

    outcomes: Iterator[bool | dict[str, Any]] = iter([{"passed": False, "feedback": " fix x "}, False, True])
    loop = GoalLoop(lambda r, a: next(outcomes), max_attempts=5, resume_prompt_template=template)
    agent = Agent(ScriptedModel(["a1", "a2", "a3"]), plugins=[loop])
    agent("go")
    assert got == ["fix x", None]
    assert answer_text(agent.messages[2]) == "again: fix x"


def test_each_invocation_starts_a_new_run() -> None:
    outcomes = iter([False, True, True])
    loop = GoalLoop(lambda r, a: next(outcomes), max_attempts=5)
    agent = Agent(ScriptedModel(["a1", "a2", "b1"]), plugins=[loop])
    agent("first")
    agent("second")
    assert loop.last_result(agent) == GoalResult(True, "satisfied", [GoalAttempt(1, True)])


def test_a_round_that_raises_ends_the_run_without_a_result() -> None:
    loop = GoalLoop(lambda r, a: False, max_attempts=5)
    agent = Agent(ScriptedModel([RuntimeError("model down")]), plugins=[loop])
    with pytest.raises(RuntimeError, match="model down"):
        agent("go")
    assert loop.last_result(agent) is None


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"goal": None}, ValueError, "goal is required"),
    ({"goal": 3}, TypeError, "goal must be a str or a validator function, got int"),
    ({"goal": "g", "max_attempts": 0}, ValueError, "max_attempts must be at least 1, got 0"),
    ({"goal": "g", "max_attempts": "3"}, TypeError, "max_attempts must be a number"),
    ({"goal": "g", "timeout": 0}, ValueError, "timeout must be positive, got 0"),
    ({"goal": "g", "timeout": float("nan")}, TypeError, "timeout must be a number"),
    ({"goal": "g", "judge": {"model": None}}, TypeError, "judge must be a JudgeConfig, got dict"),
    ({"goal": "g", "max_attempts": 2, "resume_prompt_template": "again"}, TypeError,
     "resume_prompt_template must be callable"),
])
def test_bad_arguments_are_named(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        GoalLoop(**kwargs)


def test_an_unbounded_loop_warns_and_the_default_name_is_strands() -> None:
    with pytest.warns(UserWarning, match="no max_attempts or timeout; execution is unbounded"):
        loop = GoalLoop("g")
    assert loop.name == "strands:goal-loop"


def test_one_goal_loop_per_agent() -> None:
    with pytest.raises(RuntimeError, match="another GoalLoop is already attached"):
        Agent(ScriptedModel([]), plugins=[GoalLoop("a", max_attempts=1), GoalLoop("b", max_attempts=1, name="b")])


def test_one_goal_loop_serves_several_agents() -> None:
    loop = GoalLoop(lambda r, a: answer_text(r) == "yes", max_attempts=1)
    yes, no = Agent(ScriptedModel(["yes"]), plugins=[loop]), Agent(ScriptedModel(["no"]), plugins=[loop])
    yes("go")
    no("go")
    assert [r.passed for r in (loop.last_result(yes), loop.last_result(no)) if r] == [True, False]


def test_no_after_invocation_hook_without_a_goal_loop() -> None:
    # The loop builds no AfterInvocationEvent for agents that have no callback (GoalLoop adds one).
    assert not Agent(ScriptedModel([])).hooks.has_callbacks(AfterInvocationEvent)
    assert Agent(ScriptedModel([]), plugins=[GoalLoop("g", max_attempts=1)]).hooks.has_callbacks(AfterInvocationEvent)


def _ends_with_yes(response: Message, agent: Agent) -> bool:
    return answer_text(response).endswith("yes")


def test_an_agent_with_a_goal_loop_pickles_and_its_copy_retries() -> None:
    loop = GoalLoop(_ends_with_yes, max_attempts=3, preserve_context=False)
    agent = Agent(ScriptedModel(["no", text("yes")]), plugins=[loop])
    copy = pickle.loads(cloudpickle.dumps(agent))  # as runtime="ray" ships agents to hosts
    assert str(copy("go")) == "yes\n"
    copied_loop = copy._plugin_registry.plugins["strands:goal-loop"]
    assert copied_loop.last_result(copy) == GoalResult(True, "satisfied", [GoalAttempt(1, False),
                                                                           GoalAttempt(2, True)])
    assert loop.last_result(agent) is None  # the original did not run


def test_a_retry_that_raises_after_a_rewind_rolls_back_only_this_call() -> None:
    # The rewind puts the history's own message objects back: the failed call's rollback finds its prompt by
    # identity and keeps the older messages (with copies it would have cut the whole history).
    loop = GoalLoop(lambda response, agent: False, max_attempts=3, preserve_context=False)
    agent = Agent(ScriptedModel(["a1", RuntimeError("model down")]), plugins=[loop],
                  messages=[{"role": "user", "content": [{"text": "old"}]},
                            {"role": "assistant", "content": [{"text": "older"}]}])
    with pytest.raises(RuntimeError, match="model down"):
        agent("go")
    assert [answer_text(m) for m in agent.messages] == ["old", "older"]


def test_an_interrupted_round_is_not_judged_and_the_resuming_call_goes_on_with_the_run() -> None:
    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        return "deleted"

    def approve(event: BeforeToolCallEvent) -> None:
        if event.interrupt("approve", reason="delete?") != "yes":
            event.cancel_tool = "refused"

    outcomes = iter([False, True])
    judged: list[str] = []

    def validator(response: Message, agent: Agent) -> bool:
        judged.append(answer_text(response))
        return next(outcomes)

    loop = GoalLoop(validator, max_attempts=3)
    agent = Agent(ScriptedModel([tool_call("delete", {"path": "a"}), "d1", "d2"]), tools=[delete], plugins=[loop],
                  hooks=[approve])
    interrupted = agent("clean up")
    assert interrupted.stop_reason == "interrupt" and judged == [] and loop.last_result(agent) is None
    result = agent([{"interruptResponse": {"interruptId": interrupted.interrupts[0].id, "response": "yes"}}])
    assert str(result) == "d2\n" and judged == ["d1", "d2"]
    assert loop.last_result(agent) == GoalResult(True, "satisfied", [GoalAttempt(1, False), GoalAttempt(2, True)])
