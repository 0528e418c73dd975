"""What an injection consumer is given (:class:`InjectionContext`) and when it injects (:data:`InjectionTrigger`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from typing_extensions import TypedDict

from ray_harness.types.content import Message

InjectionTrigger = Literal["userTurn", "everyTurn"]
"""When injection runs before a model call.

``"userTurn"`` (the default): only when the latest message is a fresh ask — a ``user`` message without a tool
result — so a chat agent's context arrives with each question and not again at every tool round. ``"everyTurn"``:
before every model call, tool-result turns included. A predicate over :class:`InjectionContext` decides otherwise.
"""


@dataclass
class InjectionContext:
    """What ``render_content`` and a trigger predicate get, per model call.

    Attributes:
        messages: The conversation about to be sent (a list of its own: reordering it changes nothing).
        state: The agent's durable state (``agent.state``): read what a tool stored in an earlier turn.
        agent: The agent the injection belongs to.
    """

    messages: list[Message]
    state: Any
    agent: Any


class TriggerCallback(Protocol):
    """A predicate deciding whether to inject on a model call (a plain function qualifies)."""

    def __call__(self, context: InjectionContext, **kwargs: Any) -> bool:
        """Whether to inject on this call."""
        ...


InjectionTriggerPredicate = InjectionTrigger | Callable[[InjectionContext], bool] | TriggerCallback
"""A trigger name, or a predicate over the :class:`InjectionContext`."""


class InjectionConfig(TypedDict, total=False):
    """Configuration common to injection consumers.

    Attributes:
        trigger: When injection runs (default ``"userTurn"``); a predicate that raises skips the injection.
    """

    trigger: InjectionTriggerPredicate
