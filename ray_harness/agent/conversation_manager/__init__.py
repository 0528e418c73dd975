"""Conversation managers."""

from ray_harness.agent.conversation_manager.base import ConversationManager
from ray_harness.agent.conversation_manager.null import NullConversationManager

__all__ = ["ConversationManager", "NullConversationManager"]
