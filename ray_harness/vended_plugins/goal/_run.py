"""A goal run's state on one agent, and the rewind of ``preserve_context=False``."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ray_harness.agent.field_snapshot import Snapshot, restore_fields
from ray_harness.types.content import Message
from ray_harness.vended_plugins.goal.outcomes import GoalAttempt, GoalResult, GoalStopReason, ValidationOutcome

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("RunState", "Rewind", "normalize_outcome")

# Strands' rewind is a "session" snapshot plus the system prompt, without the agent's state. Its messages are
# kept apart (see Rewind) and the model state is left out: a ray_harness model's state is no server-side
# conversation but e.g. ScriptedModel's place in its script, which a rewind must not replay.
_REWOUND_FIELDS = ["conversation_manager_state", "interrupt_state", "system_prompt"]


@dataclass
class Rewind:
    """The agent as it was just before a run's first model call."""

    messages: list[Message]
    """The history's own message objects: a later failed round rolls back by finding them by identity."""
    copies: list[Message]
    """Copies taken then: a message changed in place since is put back as it was."""
    snapshot: Snapshot

    @classmethod
    def take(cls, agent: Agent) -> Rewind:
        messages = list(agent.messages)
        return cls(messages, copy.deepcopy(messages), agent.take_snapshot(include=list(_REWOUND_FIELDS)))

    def apply(self, agent: Agent) -> None:
        """Put the agent back; the invocation is still running, so ``load_snapshot``'s idle check is skipped."""
        restore_fields(agent, self.snapshot)
        agent.messages[:] = [kept if kept == copied else copy.deepcopy(copied)
                             for kept, copied in zip(self.messages, self.copies, strict=True)]


@dataclass
class RunState:
    """One run: from a new invocation until a verdict passes or a limit stops it."""

    start_time: float
    attempts: list[GoalAttempt] = field(default_factory=list)
    result: GoalResult | None = None
    resumed: bool = False
    """The agent was told to resume: the next ``BeforeInvocationEvent`` continues this run."""
    rewind: Rewind | None = None

    def finish(self, stop_reason: GoalStopReason) -> None:
        self.result = GoalResult(passed=stop_reason == "satisfied", stop_reason=stop_reason,
                                 attempts=list(self.attempts))
        self.resumed = False


def normalize_outcome(value: Any) -> ValidationOutcome:
    """A validator's return value as a :class:`ValidationOutcome`.

    Raises:
        TypeError: ``value`` is none of ``bool``, ``ValidationOutcome`` and ``dict``.
    """
    if isinstance(value, bool):
        return ValidationOutcome(passed=value)
    if isinstance(value, ValidationOutcome):
        return value
    if isinstance(value, dict):
        feedback = value.get("feedback")
        return ValidationOutcome(passed=bool(value.get("passed", False)),
                                 feedback=None if feedback is None else str(feedback))
    raise TypeError(f"a validator must return a bool, a ValidationOutcome or a dict, got {type(value).__name__}")
