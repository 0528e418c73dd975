"""Strands' import path ``strands.agent.conversation_manager.summarizing_conversation_manager``.

The same objects as :mod:`ray_harness.agent.conversation_manager` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.agent.conversation_manager import SummarizingConversationManager

__all__ = ("SummarizingConversationManager",)
