"""The data of a swarm: its members, their shared context, the execution state and the result type."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ray_harness.multiagent._handoff import HANDOFF_TOOL_NAME
from ray_harness.multiagent._scheduling import should_continue_swarm
from ray_harness.multiagent.base import MultiAgentResult, NodeResult, Status, zero_usage

__all__ = ("SharedContext", "SwarmNode", "SwarmResult", "SwarmState", "entry_member", "swarm_members")


@dataclass(eq=False)
class SwarmNode:
    """A member of a swarm: its id and the agent (``executor``, as in Strands) that plays it."""

    node_id: str
    executor: Any
    _runner: Any = field(default=None, init=False, repr=False)
    """The node runner of the swarm the member belongs to (set by the Swarm), which keeps the agent's first state.
    The runner, not the swarm: nothing the swarm holds refers back to it, so it is freed as soon as it is dropped."""

    def reset_executor_state(self) -> None:
        """Give the member's agent back the conversation it had when the swarm was built (Strands' method).

        Messages, agent state and interrupt state are restored (through ``Agent.snapshot()``/``restore()``);
        ``Swarm(reset_members=True)`` calls this before each member run that does not resume an interrupt (a
        member interrupted in its own turn gets that turn's conversation back when the swarm's state is restored).

        Raises:
            RuntimeError: The member is not part of a Swarm.
        """
        if self._runner is None:
            raise RuntimeError(f"node {self.node_id!r} is not part of a Swarm: its agent's initial state is "
                               "recorded when the swarm is built")
        self._runner.reset_node(self.node_id)

    def __hash__(self) -> int:
        return hash(self.node_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SwarmNode) and other.node_id == self.node_id

    def __str__(self) -> str:
        return self.node_id

    def __repr__(self) -> str:
        return f"SwarmNode(node_id={self.node_id!r})"


@dataclass
class SharedContext:
    """Knowledge members share through handoffs: member name → {key: JSON value}."""

    context: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add_context(self, node: SwarmNode | str, key: str, value: Any) -> None:
        """Record ``key: value`` as knowledge from ``node`` for the members it hands off to.

        Raises:
            ValueError: ``key`` is empty or ``value`` is not JSON serializable.
        """
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"shared context key must be a non-empty string, got {key!r}")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as error:
            raise ValueError(f"shared context value for {key!r} is not JSON serializable: {error}") from None
        node_id = node.node_id if isinstance(node, SwarmNode) else node
        self.context.setdefault(node_id, {})[key] = value


@dataclass
class SwarmState:
    """A swarm invocation's progress: current member, history, shared context, results and totals."""

    current_node: SwarmNode | None = None
    task: Any = ""
    completion_status: Status = Status.PENDING
    shared_context: SharedContext = field(default_factory=SharedContext)
    node_history: list[SwarmNode] = field(default_factory=list)
    start_time: float = field(default_factory=time.monotonic)
    results: dict[str, NodeResult] = field(default_factory=dict)
    accumulated_usage: dict[str, int] = field(default_factory=zero_usage)
    accumulated_metrics: dict[str, int] = field(default_factory=lambda: {"latencyMs": 0})
    accumulated_cost_usd: float = 0.0
    execution_time: int = 0
    handoff_message: str | None = None
    handoff_node: SwarmNode | None = None
    """The member a handoff names next, from the end of the member's run until it becomes ``current_node``
    (``AfterNodeCallEvent`` hooks see it), else ``None``; as Strands' field."""
    stop_reason: str | None = None

    def should_continue(self, *, max_handoffs: int, max_iterations: int, execution_timeout: float,
                        repetitive_handoff_detection_window: int,
                        repetitive_handoff_min_unique_agents: int) -> tuple[bool, str]:
        """May the next member run? ``(False, reason)`` ends the swarm FAILED (Strands' method, checks and texts)."""
        return should_continue_swarm(
            history=[node.node_id for node in self.node_history], max_handoffs=max_handoffs,
            max_iterations=max_iterations, elapsed=self.execution_time / 1000 + time.monotonic() - self.start_time,
            execution_timeout=execution_timeout, window=repetitive_handoff_detection_window,
            min_unique=repetitive_handoff_min_unique_agents)


@dataclass
class SwarmResult(MultiAgentResult):
    """A swarm's result: the multi-agent result plus the members in the order they ran."""

    node_history: list[SwarmNode] = field(default_factory=list)


def swarm_members(agents: list[Any]) -> dict[str, SwarmNode]:
    """The swarm's members by name, checked: Agents, each once, with unique names and no tool of the handoff's name.

    Raises:
        ValueError: ``agents`` is empty or not a list, or one of them breaks a rule above.
    """
    if not isinstance(agents, list | tuple) or not agents:
        raise ValueError("Swarm needs a non-empty list of agents")
    members: dict[str, SwarmNode] = {}
    seen: set[int] = set()
    for agent in agents:
        if not hasattr(agent, "tool_registry") or not hasattr(agent, "stream_async"):
            raise ValueError(f"swarm members must be Agents, got {agent!r}")
        if id(agent) in seen:
            raise ValueError("Duplicate node instance detected. Each node must have a unique object instance.")
        seen.add(id(agent))
        name = str(agent.name)
        if name in members:
            raise ValueError(f"Node ID '{name}' is not unique. Each agent must have a unique name.")
        if agent.tool_registry.get(HANDOFF_TOOL_NAME) is not None:
            raise ValueError(f"Agent '{name}' already has a tool named '{HANDOFF_TOOL_NAME}', which conflicts "
                             "with the swarm coordination tool; rename it")
        members[name] = SwarmNode(name, agent)
    return members


def entry_member(members: dict[str, SwarmNode], entry_point: Any) -> SwarmNode:
    """The member ``entry_point`` (an agent of the swarm or its name) names; the first member when it is ``None``.

    Raises:
        ValueError: No member is that agent (or has that name).
    """
    if entry_point is None:
        return next(iter(members.values()))
    name = entry_point if isinstance(entry_point, str) else getattr(entry_point, "name", None)
    node = members.get(str(name)) if name is not None else None
    if node is None or (not isinstance(entry_point, str) and node.executor is not entry_point):
        raise ValueError(f"Entry point agent not found in swarm nodes. Available agents: {list(members)}")
    return node
