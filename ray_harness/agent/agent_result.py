"""Strands' import path ``strands.agent.agent_result``.

The same objects as :mod:`ray_harness.agent` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.agent import AgentResult

__all__ = ("AgentResult",)
