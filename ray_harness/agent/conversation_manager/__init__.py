"""Conversation managers."""

from ray_harness.agent.conversation_manager.base import ConversationManager
from ray_harness.agent.conversation_manager.null import NullConversationManager
from ray_harness.agent.conversation_manager.sliding_window import SlidingWindowConversationManager
from ray_harness.agent.conversation_manager.summarizing import SummarizingConversationManager

__all__ = [
    "ConversationManager",
    "NullConversationManager",
    "SlidingWindowConversationManager",
    "SummarizingConversationManager",
]
