"""``NullConversationManager``: never changes the history; overflow errors propagate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray_harness.agent.conversation_manager.base import ConversationManager

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("NullConversationManager",)


class NullConversationManager(ConversationManager):
    def apply_management(self, agent: Agent, **kwargs: Any) -> None:
        return None

    def reduce_context(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        if e is not None:
            raise e
