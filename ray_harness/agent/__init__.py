"""The agent: ``Agent``, ``AgentResult``, ``Limits``, retry strategy, conversation managers."""

from ray_harness.agent.agent import Agent
from ray_harness.agent.limits import Limits
from ray_harness.agent.result import AgentResult, EventLoopMetrics
from ray_harness.agent.retry import ModelRetryStrategy
from ray_harness.agent.state import AgentState

__all__ = ["Agent", "AgentResult", "AgentState", "EventLoopMetrics", "Limits", "ModelRetryStrategy"]
