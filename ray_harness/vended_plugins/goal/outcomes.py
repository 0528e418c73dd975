"""What ``GoalLoop`` takes and reports: validators and their outcomes, attempts, the run's result, judge config."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from ray_harness.types.content import Message
from ray_harness.vended_plugins.goal.judge import JUDGE_SYSTEM_PROMPT

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.models.base import Model

__all__ = ("GoalAttempt", "GoalResult", "GoalStopReason", "JudgeConfig", "ValidationOutcome", "Validator",
           "ValidatorFunction", "ValidatorReturn")


@dataclass
class ValidationOutcome:
    """A validator's verdict: ``passed``, and ``feedback`` the next attempt is told (optional)."""

    passed: bool
    feedback: str | None = None


ValidatorReturn: TypeAlias = "bool | ValidationOutcome | dict[str, Any]"
"""What a validator returns: ``True``/``False`` (no feedback), a :class:`ValidationOutcome`, or a dict with
``passed`` and an optional ``feedback``."""


@runtime_checkable
class Validator(Protocol):
    """A programmatic goal: ``validator(response, agent)``, sync or async.

    ``response`` is the agent's last assistant message; ``agent`` is the agent itself (``agent.messages`` is the
    transcript the natural-language judge would read). Return ``True``/``False``, a :class:`ValidationOutcome`
    or ``{"passed": ..., "feedback": ...}``. A validator that raises fails the attempt with the feedback
    ``"Validator error: <error>"``.
    """

    def __call__(self, response: Message, agent: Agent, **kwargs: Any) -> ValidatorReturn | Awaitable[ValidatorReturn]:
        """Judge ``response``."""
        ...


ValidatorFunction: TypeAlias = "Callable[[Message, Agent], ValidatorReturn | Awaitable[ValidatorReturn]]"
"""A validator without ``**kwargs``, as most are written: ``GoalLoop`` takes it too (the ``Validator`` protocol,
Strands' type, asks for ``**kwargs``)."""


GoalStopReason = Literal["satisfied", "max_attempts", "timeout"]
"""Why a goal run ended."""


@dataclass
class GoalAttempt:
    """One validated attempt of a run: its number (from 1), its verdict and its feedback."""

    attempt: int
    passed: bool
    feedback: str | None = None


@dataclass
class GoalResult:
    """How a run ended (``GoalLoop.last_result(agent)``): passed, why it stopped, and every attempt."""

    passed: bool
    stop_reason: GoalStopReason
    attempts: list[GoalAttempt] = field(default_factory=list)


@dataclass
class JudgeConfig:
    """Settings of the judge agent built when the goal is a text (ignored for a validator function).

    Attributes:
        model: The judge's model; by default ``agent.aux_model`` (the agent's ``aux_model``, else its model).
        system_prompt: The judge's system prompt; :data:`JUDGE_SYSTEM_PROMPT` by default.
    """

    model: Model | None = None
    system_prompt: str = JUDGE_SYSTEM_PROMPT
