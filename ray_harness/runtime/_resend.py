"""Sending a Graph/Swarm run again after its orchestration host died (no Ray here).

The driver's side of "Host loss" (:mod:`ray_harness.runtime._orchestrator`): which runs can be sent again
(:func:`resendable`), how often (:data:`RUN_RESENDS`), and which of the re-sent run's events the caller already
got (:class:`ReportedRuns`). The node slots' side is in :mod:`ray_harness.runtime._slots` ("Re-sent runs").
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ray_harness.agent.agent import Agent
from ray_harness.multiagent.swarm import Swarm

__all__ = ("RUN_RESENDS", "ReportedRuns", "resendable")

_RUN_ENDS = frozenset({"multiagent_node_stop", "multiagent_node_interrupt"})
"""The events that end a node's run for the caller (an interrupted node has no stop event)."""

RUN_RESENDS = 3
"""How many times a run whose orchestration host died is sent again before ``RemoteActorError``."""


def resendable(table: dict[tuple[str, ...], Any]) -> bool:
    """Whether the run of this object table's tree can be sent again after its host died.

    Not when a Swarm in it has a member that is no in-slot ``Agent`` (the Swarm takes any object with a tool
    registry and ``stream_async``; a ``RemoteAgent`` has none): a Swarm learns its handoffs from its members'
    streamed tool events, and only a node slot answers a re-sent run it had completed with those events again.
    """
    return all(isinstance(node.executor, Agent) for key, target in table.items()
               if key[0] == "orch" and isinstance(target, Swarm) for node in target.nodes.values())


class ReportedRuns:
    """The node runs and handoffs whose events the caller got, so that a run sent again does not report them twice.

    A re-sent run starts from the beginning: each node's runs are reported again in order (the slots answer those
    that completed with what those runs sent). Per node, as many runs as the caller saw end (``multiagent_node_stop``,
    or ``multiagent_node_interrupt`` for a node that interrupted) are skipped, with all their events; the run that was going on when the host died is reported again from its
    start. Handoffs (``multiagent_handoff``) the caller got are skipped by their from and to nodes, however the
    re-sent run orders them. Other events (the final result) always pass.
    """

    def __init__(self) -> None:
        self._seen: Counter[Any] = Counter()  # node id -> its runs' stop events yielded; handoff key -> yielded
        self._skip: Counter[Any] | None = None  # the same, for what the re-sent run reports again (once re-sent)

    def resent(self) -> None:
        """The run is sent again: the node runs and handoffs the caller saw will be reported again."""
        self._skip = Counter(self._seen)

    def new(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` is new to the caller (to yield); counts the node runs and handoffs it reports."""
        kind = event.get("type")
        if self._skip is None and kind not in _RUN_ENDS and kind != "multiagent_handoff":
            return True  # nothing re-sent (every event of a run passes here): no look-up
        if kind == "multiagent_handoff":
            key: Any = (tuple(event.get("from_node_ids") or ()), tuple(event.get("to_node_ids") or ()))
            ends = True
        else:
            key = event.get("node_id")
            if key is None:
                return True
            ends = kind in _RUN_ENDS
        if self._skip is not None and self._skip[key]:
            if ends:
                self._skip[key] -= 1
            return False
        if ends:
            self._seen[key] += 1
        return True
