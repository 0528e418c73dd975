"""Scheduling rules of Graph and Swarm, with no I/O, no agents and no clocks.

Every executor (in-process or Ray) drives the same rules, so a graph gives the
same result on both runtimes. The graph's rules work on node ids and on edges
as ``(source, target)`` pairs; the caller evaluates edge conditions (they are
user code) and reports which edges fired.

Graph vocabulary:

* an edge *fires* when its source completes and its condition holds; the
  target's *inbox* collects the sources that fired into it since it last started;
* a source that fails or is cancelled *blocks* its targets;
* join ``"any"`` (OR-join, as Strands live): a node with a non-empty inbox is ready;
* join ``"all"``: ready once no source of the node can still fire in this run
  (nothing that is running, queued or another candidate reaches it without
  passing through the node itself), and none of its sources failed; it then runs
  once with every input. Back edges of a cycle do not hold a node back, because
  their sources are reached only through the node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = (
    "GraphScheduler",
    "has_cycle",
    "reachable",
    "should_continue_graph",
    "should_continue_swarm",
    "skipped_nodes",
)

JOINS = ("any", "all")
FAILURE_POLICIES = ("fail_fast", "continue")
SCHEDULINGS = ("batch", "eager")


def reachable(edges: Iterable[tuple[str, str]], starts: Iterable[str], *, exclude: str | None = None) -> set[str]:
    """Nodes reachable from ``starts`` (included) along ``edges``, never expanding through ``exclude``."""
    successors: dict[str, list[str]] = {}
    for source, target in edges:
        successors.setdefault(source, []).append(target)
    seen = {node for node in starts if node != exclude}
    frontier = list(seen)
    while frontier:
        for target in successors.get(frontier.pop(), []):
            if target != exclude and target not in seen:
                seen.add(target)
                frontier.append(target)
    return seen


def has_cycle(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> bool:
    """Whether the edges among ``nodes`` form a cycle (Kahn's algorithm: linear, a graph is built per row)."""
    position = {name: index for index, name in enumerate(nodes)}
    edges = list(edges)
    # Edges that all point forward in the nodes' order close no cycle: the usual case (a chain or fan-out added in
    # order) needs no sort.
    if all(position.get(source, -1) < position.get(target, -1) for source, target in edges
           if source in position and target in position):
        return False
    names = set(position)
    incoming = dict.fromkeys(names, 0)
    outgoing: dict[str, list[str]] = {name: [] for name in names}
    for source, target in edges:
        if source in names and target in names:
            outgoing[source].append(target)
            incoming[target] += 1
    ready = [name for name, count in incoming.items() if count == 0]
    removed = 0
    while ready:
        name = ready.pop()
        removed += 1
        for target in outgoing[name]:
            incoming[target] -= 1
            if incoming[target] == 0:
                ready.append(target)
    return removed < len(names)


def skipped_nodes(nodes: Iterable[str], edges: Iterable[tuple[str, str]], ran: set[str],
                  stopped: set[str]) -> list[str]:
    """Nodes that never ran because a predecessor failed, was cancelled, or was itself skipped."""
    edge_list = list(edges)
    skipped: list[str] = []
    blocked = set(stopped)
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if node in ran or node in blocked:
                continue
            if any(source in blocked for source, target in edge_list if target == node):
                blocked.add(node)
                skipped.append(node)
                changed = True
    return skipped


def should_continue_graph(*, launched: int, max_node_executions: int | None, elapsed: float,
                          execution_timeout: float | None) -> tuple[bool, str]:
    """May one more node start? ``(False, reason)`` ends the graph FAILED."""
    if max_node_executions is not None and launched >= max_node_executions:
        return False, f"Max node executions reached: {max_node_executions}"
    if execution_timeout is not None and elapsed > execution_timeout:
        return False, f"Execution timed out: {execution_timeout}s"
    return True, "Continuing"


def should_continue_swarm(*, history: list[str], max_handoffs: int, max_iterations: int, elapsed: float,
                          execution_timeout: float, window: int, min_unique: int) -> tuple[bool, str]:
    """May the next swarm member run? The checks and texts follow Strands."""
    if len(history) >= max_handoffs:
        return False, f"Max handoffs reached: {max_handoffs}"
    if len(history) >= max_iterations:
        return False, f"Max iterations reached: {max_iterations}"
    if elapsed > execution_timeout:
        return False, f"Execution timed out: {execution_timeout}s"
    if window > 0 and len(history) >= window:
        unique = len(set(history[-window:]))
        if unique < min_unique:
            return False, f"Repetitive handoff: {unique} unique nodes out of {window} recent iterations"
    return True, "Continuing"


@dataclass
class GraphScheduler:
    """Which nodes may start now. Serializable (:meth:`to_dict`) so a run can resume in another process."""

    nodes: list[str]
    edges: list[tuple[str, str]]
    join: str = "any"
    inbox: dict[str, list[str]] = field(default_factory=dict)
    blocked: dict[str, list[str]] = field(default_factory=dict)
    ready: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    """Completions not yet propagated (batch mode propagates when the whole batch is done)."""
    ran: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    """Nodes that failed or were cancelled in this run (they block their successors)."""

    def start(self, entry_points: Iterable[str]) -> None:
        self.inbox, self.blocked, self.finished, self.ran, self.stopped = {}, {}, [], [], []
        self.running = []
        self.ready = list(entry_points)

    def sources_of(self, node: str) -> list[str]:
        return [source for source, target in self.edges if target == node]

    def targets_of(self, node: str) -> list[str]:
        return [target for source, target in self.edges if source == node]

    def launch(self, node: str, *, keep_inbox: bool = False) -> list[str]:
        """Mark ``node`` started; return the sources whose outputs are its inputs.

        ``keep_inbox``: a node re-run to resume an interrupt keeps its original inputs, and
        what fired into it meanwhile stays for its next run.
        """
        if node in self.ready:
            self.ready.remove(node)
        if node not in self.running:
            self.running.append(node)
        if node not in self.ran:
            self.ran.append(node)
        if keep_inbox:
            return []
        self.blocked.pop(node, None)
        return self.inbox.pop(node, [])

    def suspend(self, node: str) -> None:
        """``node`` paused on an interrupt: no longer running, not finished; it is re-launched on resume."""
        if node in self.running:
            self.running.remove(node)

    def finish(self, node: str) -> None:
        """``node`` stopped running (any outcome); its propagation comes with :meth:`propagate`."""
        if node in self.running:
            self.running.remove(node)
        self.finished.append(node)

    def propagate(self, node: str, fired: Iterable[str], *, failed: bool) -> None:
        """Record that ``node`` fired into ``fired`` (its edges whose condition held), or blocked its targets."""
        if node in self.finished:
            self.finished.remove(node)
        if failed:
            if node not in self.stopped:
                self.stopped.append(node)
            for target in self.targets_of(node):
                self.blocked.setdefault(target, []).append(node)
            return
        for target in fired:
            sources = self.inbox.setdefault(target, [])
            if node not in sources:
                sources.append(node)

    def collect_ready(self) -> list[str]:
        """Move the nodes that became ready into :attr:`ready`; return the newly ready ones."""
        candidates = [node for node in self.nodes if self.inbox.get(node)
                      and node not in self.ready and node not in self.running]
        if self.join == "any":
            newly = candidates
        else:
            newly = self._join_all_ready(candidates)
        self.ready.extend(newly)
        return newly

    def _join_all_ready(self, candidates: list[str]) -> list[str]:
        active = set(self.running) | set(self.ready)
        newly: list[str] = []
        waiting: list[str] = []
        for node in candidates:
            pending = reachable(self.edges, active | (set(candidates) - {node}), exclude=node)
            if any(source in pending for source in self.sources_of(node)):
                waiting.append(node)
            elif self.blocked.get(node):
                self.inbox.pop(node, None)  # a failed input: the join can never have all inputs
            else:
                newly.append(node)
        if not newly and not active and waiting:
            # Candidates that wait on each other (a cycle entered from two sides): release them.
            newly = [node for node in waiting if not self.blocked.get(node)]
        return newly

    def idle(self) -> bool:
        return not self.running and not self.ready

    def to_dict(self) -> dict[str, Any]:
        # Running nodes lose their partial work when the process goes away: they re-run on resume.
        ready = self.running + [node for node in self.ready if node not in self.running]
        return {"inbox": self.inbox, "blocked": self.blocked, "ready": ready,
                "finished": self.finished, "ran": self.ran, "stopped": self.stopped}

    def load(self, data: dict[str, Any]) -> None:
        known = set(self.nodes)

        def ids(values: Any) -> list[str]:
            return [str(value) for value in values or [] if value in known]

        self.inbox = {key: ids(value) for key, value in (data.get("inbox") or {}).items() if key in known}
        self.blocked = {key: ids(value) for key, value in (data.get("blocked") or {}).items() if key in known}
        self.ready = ids(data.get("ready"))
        self.running = []
        self.finished = ids(data.get("finished"))
        self.ran = ids(data.get("ran"))
        self.stopped = ids(data.get("stopped"))
