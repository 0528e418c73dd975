"""The ``GoalLoop`` plugin (Strands' ``strands.vended_plugins.goal``): retry until a validator passes.

After each invocation the agent's answer is validated; a failed verdict sets ``AfterInvocationEvent.resume``
to a retry prompt carrying the feedback, so the same call runs another round. The loop ends when a verdict
passes, after ``max_attempts`` validated attempts, or when ``timeout`` seconds have passed since the call began.
"""

from __future__ import annotations

import inspect
import logging
import math
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ray_harness._clock import Clock, SystemClock
from ray_harness.hooks.events import AfterInvocationEvent, BeforeInvocationEvent, BeforeModelCallEvent
from ray_harness.plugins.plugin import Plugin
from ray_harness.types.content import ContentBlock, Message
from ray_harness.vended_plugins.goal._run import Rewind, RunState, normalize_outcome
from ray_harness.vended_plugins.goal.judge import JudgeOutcome, build_judge_prompt
from ray_harness.vended_plugins.goal.outcomes import (
    GoalAttempt,
    GoalResult,
    JudgeConfig,
    ValidationOutcome,
    Validator,
    ValidatorFunction,
)

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("GoalLoop",)

logger = logging.getLogger(__name__)

_DEFAULT_NAME = "strands:goal-loop"  # Strands' default name: one program's plugins keep their names

ResumePromptTemplate = Callable[[str | None], "str | list[ContentBlock]"]


def _default_resume_prompt(feedback: str | None) -> str:
    """The user message of a retry, with the validator's feedback when there is some."""
    if not feedback:
        return ("Your previous attempt did not satisfy the goal. Write a new, corrected response that fully "
                "satisfies it; do not repeat the previous attempt or only touch it up.")
    return ("Your previous attempt did not satisfy the goal.\n\n"
            f"Feedback on what was wrong:\n{feedback}\n\n"
            "Address every point of this feedback and write a new, corrected response that fully satisfies the "
            "goal; do not repeat the previous attempt or only touch it up.")


def _last_assistant_message(messages: list[Message]) -> Message | None:
    return next((message for message in reversed(messages) if message["role"] == "assistant"), None)


def _check_limit(name: str, value: Any, *, positive: bool) -> None:
    """``max_attempts`` must be at least 1 (``positive=False``), ``timeout`` above 0; both may be ``inf``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise TypeError(f"GoalLoop {name} must be a number, got {value!r}")
    if (value <= 0) if positive else (value < 1):
        raise ValueError(f"GoalLoop {name} must be {'positive' if positive else 'at least 1'}, got {value!r}")


class GoalLoop(Plugin):
    """Validate each answer against a goal and make the agent try again until it is met.

    One GoalLoop may serve several agents (each has its own run state); an agent takes one GoalLoop only.
    Every invocation of the agent starts a new run; its rounds are one call (``agent(...)`` returns the last
    round's result) and the history keeps every attempt and every retry prompt. A round stopped by an interrupt
    is not judged: the call that answers the interrupts goes on with the run.

    Args:
        goal: A natural-language goal, judged by an agent built on ``agent.aux_model`` (see ``judge``), or a
            :class:`~ray_harness.vended_plugins.goal.Validator` function ``(response, agent)`` (sync or async).
        judge: The judge's model and system prompt (:class:`JudgeConfig`); ignored for a validator function.
        max_attempts: Validated attempts before the run stops (``"max_attempts"``); unbounded by default.
        timeout: Seconds from the start of the call after which the run stops (``"timeout"``), checked after
            each round; unbounded by default. A warning is issued when neither bound is given.
        name: The plugin's name (default ``"strands:goal-loop"``).
        preserve_context: ``True`` (default): a retry sees the previous attempts and their feedback. ``False``:
            before each retry the agent's messages, conversation manager state, interrupt state and system prompt
            are put back as they were just before the run's first model call.
        resume_prompt_template: ``(feedback or None) -> str | list[ContentBlock]``: the retry's user message.
            It gets the feedback stripped of surrounding whitespace, ``None`` when the verdict had none.

    Raises:
        ValueError: ``goal`` is ``None``, ``max_attempts`` is below 1 or ``timeout`` not positive.
        TypeError: ``goal`` is neither a text nor callable, ``judge`` no ``JudgeConfig``, ``max_attempts`` or
            ``timeout`` no number, ``resume_prompt_template`` not callable.
    """

    def __init__(self, goal: str | Validator | ValidatorFunction, *, judge: JudgeConfig | None = None,
                 max_attempts: int | float = math.inf, timeout: float = math.inf, name: str = _DEFAULT_NAME,
                 preserve_context: bool = True, resume_prompt_template: ResumePromptTemplate | None = None) -> None:
        if goal is None:
            raise ValueError("GoalLoop goal is required: a natural-language goal or a validator function")
        if not isinstance(goal, str) and not callable(goal):
            raise TypeError(f"GoalLoop goal must be a str or a validator function, got {type(goal).__name__}")
        if judge is not None and not isinstance(judge, JudgeConfig):
            raise TypeError(f"GoalLoop judge must be a JudgeConfig, got {type(judge).__name__}")
        _check_limit("max_attempts", max_attempts, positive=False)
        _check_limit("timeout", timeout, positive=True)
        if resume_prompt_template is not None and not callable(resume_prompt_template):
            raise TypeError(f"GoalLoop resume_prompt_template must be callable, got {resume_prompt_template!r}")
        self._name = name
        self._goal = goal
        self._judge = judge or JudgeConfig()
        self._max_attempts = max_attempts
        self._timeout = timeout
        self._preserve_context = preserve_context
        self._resume_prompt_template: ResumePromptTemplate = resume_prompt_template or _default_resume_prompt
        self._clock: Clock = SystemClock()
        # Keyed by agent, weakly: dropping an agent drops its run.
        self._runs: weakref.WeakKeyDictionary[Agent, RunState] = weakref.WeakKeyDictionary()
        if math.isinf(max_attempts) and math.isinf(timeout):
            warnings.warn(f"{name} has no max_attempts or timeout; execution is unbounded", stacklevel=2)
        super().__init__()

    @property
    def name(self) -> str:
        """The plugin's name."""
        return self._name

    def last_result(self, agent: Agent) -> GoalResult | None:
        """The result of the latest finished run on ``agent``; ``None`` before one finished or while one runs."""
        run = self._runs.get(agent)
        return None if run is None else run.result

    # -- pickling: agents ship to Ray hosts with their plugins; a WeakKeyDictionary does not pickle ----------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_runs"] = list(self._runs.items())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        runs = state.pop("_runs")
        self.__dict__.update(state)
        self._runs = weakref.WeakKeyDictionary(runs)

    # -- hooks ------------------------------------------------------------------------------------------

    def init_agent(self, agent: Agent) -> None:
        """Register the hooks (bound methods, so that they pickle); refuse a second GoalLoop on ``agent``.

        Raises:
            RuntimeError: Another GoalLoop is attached to ``agent``: both would write ``resume``, and only one
                value would survive.
        """
        attached = agent.hooks.get_callbacks_for(AfterInvocationEvent(agent=agent))
        if any(isinstance(getattr(callback, "__self__", None), GoalLoop) for callback in attached):
            raise RuntimeError(f"{self._name}: another GoalLoop is already attached to this agent; "
                               "only one GoalLoop is supported per agent")
        agent.add_hook(self._start_run, BeforeInvocationEvent)
        if not self._preserve_context:  # no hook on every model call unless a rewind needs it
            agent.add_hook(self._take_rewind, BeforeModelCallEvent)
        agent.add_hook(self._judge_round, AfterInvocationEvent)

    def _start_run(self, event: BeforeInvocationEvent) -> None:
        run = self._runs.get(event.agent)
        if run is not None and run.resumed:
            run.resumed = False  # a retry round: the same run goes on
            return
        self._runs[event.agent] = RunState(start_time=self._clock.now())

    def _take_rewind(self, event: BeforeModelCallEvent) -> None:
        run = self._runs.get(event.agent)
        if run is not None and run.rewind is None:
            run.rewind = Rewind.take(event.agent)

    async def _judge_round(self, event: AfterInvocationEvent) -> None:
        agent = event.agent
        run = self._runs.get(agent)
        if run is None or run.result is not None:
            return
        if event.result is None:  # the round raised: the call fails, nothing is resumed
            del self._runs[agent]
            return
        if event.result.stop_reason == "interrupt":
            # No answer to judge yet (Strands judges the tool use): the call that answers the interrupts goes on
            # with this run.
            run.resumed = True
            return
        if self._clock.now() - run.start_time >= self._timeout:
            run.finish("timeout")
            return
        response = _last_assistant_message(agent.messages)
        if response is None:
            return
        outcome = await self._validate(response, agent)
        attempt = len(run.attempts) + 1
        run.attempts.append(GoalAttempt(attempt=attempt, passed=outcome.passed, feedback=outcome.feedback))
        if outcome.passed:
            run.finish("satisfied")
        elif attempt >= self._max_attempts:
            run.finish("max_attempts")
        else:
            if run.rewind is not None:
                run.rewind.apply(agent)
            feedback = outcome.feedback.strip() if outcome.feedback else None
            event.resume = self._resume_prompt_template(feedback)
            run.resumed = True

    async def _validate(self, response: Message, agent: Agent) -> ValidationOutcome:
        """The goal's verdict on ``response``; a validator (or judge) that raises fails the attempt."""
        try:
            if isinstance(self._goal, str):
                return await self._ask_judge(self._goal, agent)
            value = self._goal(response, agent)
            return normalize_outcome(await value if inspect.isawaitable(value) else value)
        except Exception as error:
            logger.warning("plugin=<%s>, error=<%s> | validator threw", self._name, error)
            return ValidationOutcome(passed=False, feedback=f"Validator error: {error}")

    async def _ask_judge(self, goal: str, agent: Agent) -> ValidationOutcome:
        """A fresh judge agent reads the goal and the transcript and answers with a :class:`JudgeOutcome`."""
        from ray_harness.agent.agent import Agent

        judge = Agent(model=self._judge.model or agent.aux_model, system_prompt=self._judge.system_prompt,
                      structured_output_model=JudgeOutcome)
        result = await judge.invoke_async(build_judge_prompt(goal, agent.messages))
        verdict = result.structured_output
        if isinstance(verdict, JudgeOutcome):
            return ValidationOutcome(passed=verdict.passed, feedback=verdict.feedback)
        return ValidationOutcome(passed=False, feedback="Judge produced no structured outcome.")
