"""``NullConversationManager``: never changes the history; overflow errors propagate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray_harness.agent.conversation_manager.base import ConversationManager

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("NullConversationManager",)


class NullConversationManager(ConversationManager):
    """A conversation manager that never changes the history."""

    def apply_management(self, agent: Agent, **kwargs: Any) -> None:
        """Do nothing."""
        return None

    def reduce_context(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """Re-raise ``e``, the overflow, if given: this manager never removes messages."""
        if e is not None:
            raise e
