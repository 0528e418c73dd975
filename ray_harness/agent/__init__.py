"""The agent: ``Agent``, ``AgentResult``, ``AgentSnapshot`` / ``SnapshotDelta``, ``Limits``, retry, conversation managers."""

from typing import Any

from ray_harness.agent.agent import Agent
from ray_harness.agent.agent_metadata import AgentMetadata
from ray_harness.agent.base import AgentBase
from ray_harness.agent.limits import Limits
from ray_harness.agent.result import AgentResult, EventLoopMetrics
from ray_harness.agent.retry import ModelRetryStrategy
from ray_harness.agent.state import AgentState

__all__ = ["Agent", "AgentBase", "AgentMetadata", "AgentResult", "AgentSnapshot", "AgentState", "EventLoopMetrics",
           "Limits", "ModelRetryStrategy", "SnapshotDelta"]


_CONVERSATION_MANAGERS = ("ConversationManager", "NullConversationManager", "SlidingWindowConversationManager",
                          "SummarizingConversationManager")


def __getattr__(name: str) -> Any:
    # AgentSnapshot loads on first use: building its pydantic models would cost every `import ray_harness`.
    if name in ("AgentSnapshot", "SnapshotDelta"):
        from ray_harness.agent import snapshot

        return getattr(snapshot, name)
    if name in _CONVERSATION_MANAGERS:  # where Strands exports them (`strands.agent`)
        from ray_harness.agent import conversation_manager

        return getattr(conversation_manager, name)
    raise AttributeError(f"module 'ray_harness.agent' has no attribute {name!r}")
