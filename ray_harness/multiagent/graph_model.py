"""The data of a graph: nodes, edges with conditions, execution state and the result type."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ray_harness.multiagent._scheduling import should_continue_graph
from ray_harness.multiagent.base import MultiAgentResult, NodeResult, Status, zero_usage

__all__ = ("EdgeCondition", "EdgeConditionWithContext", "GraphEdge", "GraphNode", "GraphResult", "GraphState",
           "build_node_input")

EdgeCondition = Callable[..., bool | Awaitable[bool]]
"""``f(state) -> bool`` or ``f(state, *, invocation_state) -> bool``; an ``async def`` condition is awaited."""


class EdgeConditionWithContext(Protocol):
    """An edge condition that also reads the invocation's ``invocation_state`` (Strands' protocol, for annotations).

    A condition is called this way when it has a parameter named ``invocation_state``; ``**kwargs`` keeps room for
    more context later, as in Strands.
    """

    def __call__(self, state: GraphState, *, invocation_state: dict[str, Any], **kwargs: Any) -> bool:
        """Whether the edge is traversed, given the graph ``state`` and the invocation's ``invocation_state``."""
        ...


def _takes_invocation_state(condition: EdgeCondition) -> bool:
    try:
        return "invocation_state" in inspect.signature(condition).parameters
    except (TypeError, ValueError):  # builtins without a signature: call them the plain way
        return False


@dataclass(eq=False)
class GraphNode:
    """A node: its id and what runs there (an Agent, a Graph, a Swarm, any ``MultiAgentBase``)."""

    node_id: str
    executor: Any
    dependencies: set[GraphNode] = field(default_factory=set)
    execution_status: Status = Status.PENDING
    result: NodeResult | None = None
    _runner: Any = field(default=None, init=False, repr=False)
    """The node runner of the graph this node belongs to (set by the Graph), which keeps the executor's first
    state. The runner, not the graph: a graph refers to nothing that refers back to it, so it is freed as soon
    as it is dropped (a graph built per row), without waiting for the cycle collector."""

    def reset_executor_state(self) -> None:
        """Give the executor back the conversation it had when the graph was built; the node becomes PENDING.

        As Strands' method of that name (what ``reset_on_revisit`` does to a revisited node's agent): an agent's
        messages, agent state and interrupt state are restored (through ``Agent.snapshot()``/``restore()``), a
        nested Graph or Swarm keeps its own state, and the node's ``result`` is cleared.

        Raises:
            RuntimeError: The node is not part of a Graph yet (its first state is recorded when the graph is built).
        """
        if self._runner is None:
            raise RuntimeError(f"node {self.node_id!r} is not part of a Graph yet: its executor's initial state is "
                               "recorded when the graph is built")
        self._runner.reset_node(self.node_id)
        self.execution_status, self.result = Status.PENDING, None

    @property
    def execution_time(self) -> int:
        """Milliseconds the node's latest execution took (0 before it ran), as Strands' field of that name."""
        return self.result.execution_time if self.result is not None else 0

    def __hash__(self) -> int:
        return hash(self.node_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GraphNode) and other.node_id == self.node_id

    def __repr__(self) -> str:
        return f"GraphNode(node_id={self.node_id!r})"


@dataclass(eq=False)
class GraphEdge:
    """A directed edge; the condition's calling convention is detected once, here."""

    from_node: GraphNode
    to_node: GraphNode
    condition: EdgeCondition | None = None
    _with_context: bool = field(init=False, default=False, repr=False)

    def __post_init__(self) -> None:
        if self.condition is not None:
            if not callable(self.condition):
                raise TypeError(f"edge condition must be callable, got {self.condition!r}")
            self._with_context = _takes_invocation_state(self.condition)

    def should_traverse(self, state: GraphState, invocation_state: dict[str, Any]) -> bool:
        """Whether the edge fires for the graph ``state`` (always, when it has no condition).

        Raises:
            TypeError: The condition is async: use :meth:`should_traverse_async`.
        """
        verdict = self._evaluate(state, invocation_state)
        if inspect.isawaitable(verdict):
            _discard(verdict)
            raise TypeError("this edge's condition is async: call `await edge.should_traverse_async(...)`")
        return bool(verdict)

    async def should_traverse_async(self, state: GraphState, invocation_state: dict[str, Any]) -> bool:
        """:meth:`should_traverse`, awaiting an ``async def`` condition (the graph evaluates edges this way)."""
        verdict = self._evaluate(state, invocation_state)
        if inspect.isawaitable(verdict):
            # A coroutine is truthy: taken as the answer, every async condition would hold.
            verdict = await verdict
        return bool(verdict)

    def _evaluate(self, state: GraphState, invocation_state: dict[str, Any]) -> Any:
        if self.condition is None:
            return True
        if self._with_context:
            return self.condition(state, invocation_state=invocation_state)
        return self.condition(state)


def _discard(awaitable: Awaitable[Any]) -> None:
    """Close a coroutine that will not be awaited, so it does not warn "never awaited" later."""
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


@dataclass
class GraphState:
    """What edge conditions see, and what the graph accumulates while it runs."""

    task: Any = ""
    status: Status = Status.PENDING
    completed_nodes: set[GraphNode] = field(default_factory=set)
    failed_nodes: set[GraphNode] = field(default_factory=set)
    interrupted_nodes: set[GraphNode] = field(default_factory=set)
    cancelled_nodes: set[GraphNode] = field(default_factory=set)
    execution_order: list[GraphNode] = field(default_factory=list)
    results: dict[str, NodeResult] = field(default_factory=dict)
    accumulated_usage: dict[str, int] = field(default_factory=zero_usage)
    accumulated_metrics: dict[str, int] = field(default_factory=lambda: {"latencyMs": 0})
    accumulated_cost_usd: float = 0.0
    execution_count: int = 0
    execution_time: int = 0
    launched: int = 0
    start_time: float = field(default_factory=time.monotonic)
    total_nodes: int = 0
    edges: list[tuple[GraphNode, GraphNode]] = field(default_factory=list)
    entry_points: list[GraphNode] = field(default_factory=list)

    def should_continue(self, max_node_executions: int | None, execution_timeout: float | None) -> tuple[bool, str]:
        """May the graph start another batch? ``(False, reason)`` ends it FAILED (Strands' method and texts).

        Counts the node executions started so far (``launched``) and the seconds run, earlier invocations of
        a resumed run included; ``None`` is no limit.
        """
        return should_continue_graph(
            launched=self.launched, max_node_executions=max_node_executions,
            elapsed=self.execution_time / 1000 + time.monotonic() - self.start_time,
            execution_timeout=execution_timeout)


@dataclass
class GraphResult(MultiAgentResult):
    """A graph's result: the multi-agent result plus the execution order and node counts."""

    total_nodes: int = 0
    completed_nodes: int = 0
    failed_nodes: int = 0
    interrupted_nodes: int = 0
    cancelled_nodes: int = 0
    execution_order: list[GraphNode] = field(default_factory=list)
    edges: list[tuple[GraphNode, GraphNode]] = field(default_factory=list)
    entry_points: list[GraphNode] = field(default_factory=list)


def build_node_input(task: Any, dependencies: dict[str, NodeResult]) -> list[dict[str, Any]]:
    """The prompt of a node: the task alone for entry nodes, else the task and each input (Strands' text)."""
    if not dependencies:
        return [{"text": task}] if isinstance(task, str) else list(task)
    blocks: list[dict[str, Any]] = []
    if isinstance(task, str):
        blocks.append({"text": f"Original Task: {task}"})
    else:
        blocks.append({"text": "Original Task:"})
        blocks.extend(task)
    blocks.append({"text": "\nInputs from previous nodes:"})
    for node_id, node_result in dependencies.items():
        blocks.append({"text": f"\nFrom {node_id}:"})
        for agent_result in node_result.get_agent_results():
            blocks.append({"text": f"  - Agent: {agent_result}"})
    return blocks
