"""The agent: ``Agent``, ``AgentResult``, ``AgentSnapshot``, ``Limits``, retry strategy, conversation managers."""

from ray_harness.agent.agent import Agent
from ray_harness.agent.limits import Limits
from ray_harness.agent.result import AgentResult, EventLoopMetrics
from ray_harness.agent.retry import ModelRetryStrategy
from ray_harness.agent.snapshot import AgentSnapshot
from ray_harness.agent.state import AgentState

__all__ = ["Agent", "AgentResult", "AgentSnapshot", "AgentState", "EventLoopMetrics", "Limits", "ModelRetryStrategy"]
