"""``ConversationManager``: keeps an agent's history within its context window."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("ConversationManager",)


class ConversationManager(ABC):
    """Trims or summarizes ``agent.messages``.

    ``apply_management`` runs after every invocation; ``reduce_context`` runs when the model
    reports a context-window overflow (the loop then retries the cycle) and must raise the given
    error when it cannot reduce further.
    """

    def __init__(self) -> None:
        self.removed_message_count = 0

    @abstractmethod
    def apply_management(self, agent: Agent, **kwargs: Any) -> None:
        """Keep ``agent.messages`` within bounds after an invocation."""

    @abstractmethod
    def reduce_context(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """Shorten ``agent.messages`` after a context-window overflow.

        Raises:
            Exception: ``e`` (the overflow) or ``ContextWindowOverflowException`` when nothing can be removed.
        """

    def before_model_call(self, agent: Agent, **kwargs: Any) -> None:
        """Proactive management before a model call (default: nothing)."""

    # The loop awaits these two, so a manager that calls a model (summarizing) can do it without
    # blocking the event loop; the defaults delegate to the synchronous methods.
    async def reduce_context_async(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """The loop's entry for an overflow: by default :meth:`reduce_context`."""
        self.reduce_context(agent, e, **kwargs)

    async def before_model_call_async(self, agent: Agent, **kwargs: Any) -> None:
        """The loop's entry before each model call: by default :meth:`before_model_call`."""
        self.before_model_call(agent, **kwargs)

    def get_state(self) -> dict[str, Any]:
        """The state a session persists: the manager's class name and how many messages it removed."""
        return {"__name__": type(self).__name__, "removed_message_count": self.removed_message_count}

    def restore_from_session(self, state: dict[str, Any]) -> list[Any] | None:
        """Restore the state written by :meth:`get_state`.

        Returns:
            Messages to put back in front of the restored conversation, or ``None`` (the base adds none).

        Raises:
            ValueError: The state was written by another manager class.
        """
        if state.get("__name__") not in (None, type(self).__name__):
            raise ValueError(f"conversation manager state is for {state.get('__name__')}, not {type(self).__name__}")
        self.removed_message_count = int(state.get("removed_message_count", 0))
        return None
