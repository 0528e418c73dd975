"""The ready-made extraction triggers: :class:`InvocationTrigger` (every invocation) and :class:`IntervalTrigger`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ray_harness.hooks.events import AfterInvocationEvent
from ray_harness.hooks.registry import HookOrder
from ray_harness.memory.extraction.types import ExtractionTrigger, ExtractionTriggerContext

__all__ = ("IntervalTrigger", "InvocationTrigger")


class _FireEvery:
    """The after-invocation callback of one attached trigger: fires every ``turns``-th time.

    An object rather than a closure: it is registered on the agent, and the agent pickles (it ships to Ray hosts).
    """

    def __init__(self, fire: Callable[[], None], turns: int) -> None:
        self.fire = fire
        self.turns = turns
        self.count = 0

    def __call__(self, event: Any) -> None:
        self.count += 1
        if self.count % self.turns == 0:
            self.fire()


class InvocationTrigger(ExtractionTrigger):
    """Extraction after every invocation: the freshest memory, and with an extractor a model call per invocation.

    Example:
        ```python
        ExtractionConfig(trigger=[InvocationTrigger()])
        ```
    """

    name = "invocation"

    def attach(self, context: ExtractionTriggerContext) -> None:
        """Fire after each invocation, after the agent's own after-invocation hooks (``HookOrder.SDK_LAST``)."""
        context.agent.add_hook(_FireEvery(context.fire, 1), AfterInvocationEvent, order=HookOrder.SDK_LAST)


class IntervalTrigger(ExtractionTrigger):
    """Extraction every ``turns`` invocations; the skipped invocations' messages are saved when it fires.

    Example:
        ```python
        ExtractionConfig(trigger=[IntervalTrigger(turns=5)])
        ```

    Raises:
        ValueError: ``turns`` is not a positive integer (``True`` included).
    """

    name = "interval"

    def __init__(self, turns: int) -> None:
        if not isinstance(turns, int) or isinstance(turns, bool) or turns < 1:
            raise ValueError(f"IntervalTrigger: turns must be a positive integer, got {turns!r}")
        self._turns = turns

    @property
    def turns(self) -> int:
        """Invocations between two extractions."""
        return self._turns

    def attach(self, context: ExtractionTriggerContext) -> None:
        """Count invocations, one count per attachment (one trigger shared by two stores counts for each)."""
        context.agent.add_hook(_FireEvery(context.fire, self._turns), AfterInvocationEvent, order=HookOrder.SDK_LAST)
