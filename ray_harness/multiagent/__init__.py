"""Multi-agent orchestration: ``Graph`` (explicit edges), ``Swarm`` (handoffs), shared results.

Graphs and swarms have the Agent surface (``__call__``, ``invoke_async``,
``stream_async``, ``cancel``), so they nest in each other. ``runtime="local"``
runs the orchestration and the nodes in this process; ``runtime="ray"`` (the
default) runs the orchestration on a pre-started orchestration host
(``ray_harness:orchestrator:<i>``; no actor per instance) and the agent nodes on
pooled host actors, with the same semantics (see
:mod:`ray_harness.runtime._orchestrator`). ``invoke_async`` leaves out the
stream events nobody reads; ``stream_async`` yields them all.
"""

from ray_harness._lazy import lazy_attributes
from ray_harness.multiagent.base import MultiAgentBase, MultiAgentResult, NodeResult, Status
from ray_harness.multiagent.builder import GraphBuilder
from ray_harness.multiagent.graph import (
    EdgeCondition,
    EdgeConditionWithContext,
    Graph,
    GraphEdge,
    GraphNode,
    GraphResult,
    GraphState,
)
from ray_harness.multiagent.node_runner import LocalNodeRunner, NodeRunner
from ray_harness.multiagent.swarm import Swarm
from ray_harness.multiagent.swarm_model import SharedContext, SwarmNode, SwarmResult

__all__ = [
    "AgentSpec",
    "Choice",
    "EdgeCondition",
    "EdgeConditionWithContext",
    "Fixed",
    "Graph",
    "GraphBuilder",
    "GraphEdge",
    "GraphNode",
    "GraphResult",
    "GraphState",
    "Inherit",
    "LocalNodeRunner",
    "MultiAgentBase",
    "MultiAgentResult",
    "NodeRunner",
    "NodeResult",
    "Open",
    "Option",
    "Preset",
    "SharedContext",
    "Status",
    "Swarm",
    "SwarmNode",
    "SwarmResult",
]

# The authority modes of model-driven multi-agent tools (Strands exports them here too): loaded on first use,
# as a host running graphs never needs them.
_LAZY = dict.fromkeys(("AgentSpec", "Choice", "Fixed", "Inherit", "Open", "Option", "Preset"),
                      "ray_harness.multiagent.spec")

__getattr__ = lazy_attributes(__name__, _LAZY)
