"""``GraphBuilder``: collect nodes, edges and settings; ``build()`` validates them into a ``Graph``."""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from ray_harness.multiagent._scheduling import FAILURE_POLICIES, JOINS, SCHEDULINGS, has_cycle
from ray_harness.multiagent.graph_model import EdgeCondition, GraphEdge, GraphNode
from ray_harness.multiagent.node_runner import DEFAULT_RUNTIME
from ray_harness.plugins.multiagent_registry import check_multi_agent_plugins

if TYPE_CHECKING:
    from ray_harness.multiagent.graph import Graph

__all__ = ("GraphBuilder",)

logger = logging.getLogger(__name__)


def _positive(name: str, value: Any, kind: type | tuple[type, ...]) -> None:
    """Check a limit: a positive ``kind``, or None (no limit, as Strands' setters document)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, kind) or not float(str(value)) > 0:
        raise ValueError(f"{name} must be a positive number or None, got {value!r}")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")
    return str(value)


@functools.cache
def _graph_class() -> type[Graph]:
    """``Graph``, imported once (graph.py imports this module): an import statement per ``build()`` costs ≈1 µs."""
    from ray_harness.multiagent.graph import Graph

    return Graph


class GraphBuilder:
    """Builder of a :class:`~ray_harness.multiagent.graph.Graph`."""

    def __init__(self) -> None:
        self.nodes: dict[str, GraphNode] = {}
        self.edges: list[GraphEdge] = []
        self.entry_points: list[GraphNode] = []
        # The executors added (their nodes keep them alive, so an id stays theirs): a duplicate is found in one
        # lookup, not a scan of every node per add_node (quadratic in a large graph).
        self._executor_ids: set[int] = set()
        self._max_node_executions: int | None = None
        self._execution_timeout: float | None = None
        self._node_timeout: float | None = None
        self._reset_on_revisit = False
        self._join = "any"
        self._failure_policy = "fail_fast"
        self._scheduling = "batch"
        self._hooks: list[Any] = []
        self._plugins: list[Any] = []
        self._session_manager: Any = None
        self._graph_id = "default_graph"

    def add_node(self, executor: Any, node_id: str | None = None) -> GraphNode:
        """Add an Agent, Graph, Swarm or any ``MultiAgentBase`` (each instance once)."""
        if not hasattr(executor, "stream_async"):
            raise TypeError(f"a graph node must be an Agent or a MultiAgentBase, got {executor!r}")
        if id(executor) in self._executor_ids:
            raise ValueError("Duplicate node instance detected. Each node must have a unique object instance.")
        if node_id is None:
            node_id = getattr(executor, "name", None) or getattr(executor, "id", None) or f"node_{len(self.nodes)}"
        if not isinstance(node_id, str) or not node_id:
            raise ValueError(f"node_id must be a non-empty string, got {node_id!r}")
        if node_id in self.nodes:
            raise ValueError(f"Node '{node_id}' already exists")
        node = GraphNode(node_id=node_id, executor=executor)
        self.nodes[node_id] = node
        self._executor_ids.add(id(executor))
        return node

    def add_edge(self, from_node: str | GraphNode, to_node: str | GraphNode,
                 condition: EdgeCondition | None = None) -> GraphEdge:
        """Connect two added nodes; ``condition(state)`` or ``condition(state, *, invocation_state)`` gates it."""
        source = self._resolve(from_node, "Source")
        target = self._resolve(to_node, "Target")
        edge = GraphEdge(from_node=source, to_node=target, condition=condition)
        # Compared by identity (the builder holds one node per id): GraphNode.__eq__ is a Python call per edge.
        self.edges = [e for e in self.edges if e.from_node is not source or e.to_node is not target]
        self.edges.append(edge)
        target.dependencies.add(source)
        return edge

    def _resolve(self, node: str | GraphNode, role: str) -> GraphNode:
        node_id = node.node_id if isinstance(node, GraphNode) else node
        if node_id not in self.nodes:
            raise ValueError(f"{role} node '{node_id}' not found")
        return self.nodes[node_id]

    def set_entry_point(self, node_id: str) -> GraphBuilder:
        """Add ``node_id`` to the entry points (by default: the nodes without incoming edges).

        Raises:
            ValueError: No node has that id.
        """
        if node_id not in self.nodes:
            raise ValueError(f"Node '{node_id}' not found")
        if self.nodes[node_id] not in self.entry_points:
            self.entry_points.append(self.nodes[node_id])
        return self

    def set_max_node_executions(self, max_executions: int | None) -> GraphBuilder:
        """Stop the graph after ``max_executions`` node executions in total (cycles count each visit).

        ``None`` removes the limit, as in Strands.

        Raises:
            ValueError: ``max_executions`` is not a positive int or None.
        """
        _positive("max_node_executions", max_executions, int)
        self._max_node_executions = max_executions
        return self

    def set_execution_timeout(self, timeout: float | None) -> GraphBuilder:
        """Stop the whole graph after ``timeout`` seconds: its running nodes are stopped. ``None``: no limit.

        Raises:
            ValueError: ``timeout`` is not a positive number or None.
        """
        _positive("execution_timeout", timeout, (int, float))
        self._execution_timeout = timeout
        return self

    def set_node_timeout(self, timeout: float | None) -> GraphBuilder:
        """Fail a node that runs longer than ``timeout`` seconds. ``None``: no limit.

        Raises:
            ValueError: ``timeout`` is not a positive number or None.
        """
        _positive("node_timeout", timeout, (int, float))
        self._node_timeout = timeout  # kept as given: it appears in the timeout message
        return self

    def reset_on_revisit(self, enabled: bool = True) -> GraphBuilder:
        """Reset a node's agent to its first conversation each time a cycle revisits it."""
        self._reset_on_revisit = bool(enabled)
        return self

    def set_join(self, join: str) -> GraphBuilder:
        """How a node with several incoming edges waits: ``"any"`` (runs once any parent completes) or ``"all"``.

        Raises:
            ValueError: ``join`` is neither.
        """
        self._join = _choice("join", join, JOINS)
        return self

    def set_failure_policy(self, policy: str) -> GraphBuilder:
        """What a failed node does to the graph: ``"fail_fast"`` or ``"continue"``.

        ``"fail_fast"`` stops the running nodes and fails the graph; under ``"continue"`` the other branches go on.

        Raises:
            ValueError: ``policy`` is neither.
        """
        self._failure_policy = _choice("failure_policy", policy, FAILURE_POLICIES)
        return self

    def set_scheduling(self, scheduling: str) -> GraphBuilder:
        """When ready nodes start: ``"batch"`` or ``"eager"``.

        ``"batch"`` starts the next batch once the running one is done (as in Strands); ``"eager"`` starts
        each node as soon as it is ready.

        Raises:
            ValueError: ``scheduling`` is neither.
        """
        self._scheduling = _choice("scheduling", scheduling, SCHEDULINGS)
        return self

    def set_hook_providers(self, hooks: list[Any]) -> GraphBuilder:
        """Hook providers registered on the graph (multi-agent events such as node start and finish)."""
        self._hooks = list(hooks)
        return self

    def set_plugins(self, plugins: list[Any]) -> GraphBuilder:
        """:class:`~ray_harness.plugins.MultiAgentPlugin` objects for the graph (``Graph(plugins=...)``).

        Raises:
            TypeError: ``plugins`` is not a list of ``MultiAgentPlugin`` objects; the error names the entry.
            ValueError: Two plugins share a name, or a name is empty.
        """
        self._plugins = check_multi_agent_plugins(plugins)
        return self

    def set_session_manager(self, session_manager: Any) -> GraphBuilder:
        """Persist the graph's state after each node with ``session_manager``, and resume from it.

        Raises:
            TypeError: ``session_manager`` has no ``write_multi_agent_json``/``read_multi_agent_json``.
        """
        for method in ("write_multi_agent_json", "read_multi_agent_json"):
            if not callable(getattr(session_manager, method, None)):
                raise TypeError(f"session_manager must have a {method}() method, got {session_manager!r}")
        self._session_manager = session_manager
        return self

    def set_graph_id(self, graph_id: str) -> GraphBuilder:
        """The id the graph's state is stored under by the session manager (default ``"default_graph"``).

        Raises:
            ValueError: ``graph_id`` is not a non-empty string.
        """
        if not isinstance(graph_id, str) or not graph_id:
            raise ValueError(f"graph_id must be a non-empty string, got {graph_id!r}")
        self._graph_id = graph_id
        return self

    def build(self, runtime: str = DEFAULT_RUNTIME) -> Graph:
        """Validate and build. ``runtime``: "local" (in-process) or "ray" (the Ray node runner)."""
        graph_class = _graph_class()
        if not self.nodes:
            raise ValueError("Graph must contain at least one node")
        entry_points = list(self.entry_points)
        if not entry_points:
            entry_points = [node for node in self.nodes.values() if not node.dependencies]
            if not entry_points:
                raise ValueError("No entry points found - all nodes have dependencies; call set_entry_point()")
        pairs = [(edge.from_node.node_id, edge.to_node.node_id) for edge in self.edges]
        if (self._max_node_executions is None and self._execution_timeout is None
                and has_cycle(self.nodes, pairs)):
            # logging, not warnings.warn: a cycle may be intended (feedback loops) and tests run -W error.
            logger.warning("graph_id=<%s> | graph has a cycle and neither max_node_executions nor "
                           "execution_timeout: execution may never end", self._graph_id)
        return graph_class(
            nodes=dict(self.nodes), edges=list(self.edges), entry_points=entry_points,
            max_node_executions=self._max_node_executions, execution_timeout=self._execution_timeout,
            node_timeout=self._node_timeout, reset_on_revisit=self._reset_on_revisit, join=self._join,
            failure_policy=self._failure_policy, scheduling=self._scheduling, hooks=self._hooks,
            session_manager=self._session_manager, id=self._graph_id, runtime=runtime, plugins=self._plugins,
        )
