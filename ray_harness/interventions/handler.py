"""``InterventionHandler``: override the lifecycle methods you care about and return an action."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Literal

from ray_harness.interventions.actions import InterventionAction, Proceed

__all__ = ("LIFECYCLE_METHODS", "InterventionHandler", "OnError")

OnError = Literal["throw", "deny", "proceed"]
LIFECYCLE_METHODS = ("before_invocation", "before_model_call", "after_model_call", "before_tool_call",
                     "after_tool_call")


class InterventionHandler(ABC):
    """A policy: override the lifecycle methods it cares about and return an action from each.

    ``on_error``: ``"throw"`` (default, a broken policy stops the run), ``"deny"`` (fail closed) or
    ``"proceed"`` (fail open — the policy silently stops being enforced).
    """

    on_error: OnError = "throw"

    @property
    @abstractmethod
    def name(self) -> str:
        """The handler's unique name (shown in ``GUIDANCE:`` lines and diagnostics)."""

    def before_invocation(self, event: Any) -> InterventionAction | Any:
        """Decide before an invocation starts (``BeforeInvocationEvent``). Override to enable."""
        return Proceed()

    def before_model_call(self, event: Any) -> InterventionAction | Any:
        """Decide before each model call (``BeforeModelCallEvent``). Override to enable."""
        return Proceed()

    def after_model_call(self, event: Any) -> InterventionAction | Any:
        """Decide on each model response (``AfterModelCallEvent``). Override to enable."""
        return Proceed()

    def before_tool_call(self, event: Any) -> InterventionAction | Any:
        """Decide before each tool call (``BeforeToolCallEvent``); the only place ``Confirm`` works. Override to enable."""
        return Proceed()

    def after_tool_call(self, event: Any) -> InterventionAction | Any:
        """Decide on each tool result (``AfterToolCallEvent``). Override to enable."""
        return Proceed()
