"""Multi-agent orchestration: ``Graph`` (explicit edges), ``Swarm`` (handoffs), shared results.

Graphs and swarms have the Agent surface (``__call__``, ``invoke_async``,
``stream_async``, ``cancel``), so they nest in each other. ``runtime="local"``
runs nodes in this process; ``runtime="ray"`` runs them on Ray actors with the
same semantics.
"""

from ray_harness.multiagent.base import MultiAgentBase, MultiAgentResult, NodeResult, Status
from ray_harness.multiagent.builder import GraphBuilder
from ray_harness.multiagent.executor import LocalExecutor, NodeExecutor
from ray_harness.multiagent.graph import Graph
from ray_harness.multiagent.graph_model import GraphEdge, GraphNode, GraphResult, GraphState
from ray_harness.multiagent.swarm import SharedContext, Swarm, SwarmNode, SwarmResult

__all__ = [
    "Graph",
    "GraphBuilder",
    "GraphEdge",
    "GraphNode",
    "GraphResult",
    "GraphState",
    "LocalExecutor",
    "MultiAgentBase",
    "MultiAgentResult",
    "NodeExecutor",
    "NodeResult",
    "SharedContext",
    "Status",
    "Swarm",
    "SwarmNode",
    "SwarmResult",
]
