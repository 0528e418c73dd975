"""Sending a Graph run again after its orchestration host died (no Ray here).

The driver's side of "Host loss" (:mod:`ray_harness.runtime._orchestrator`): which runs can be sent again
(:func:`resendable`), how often (:data:`RUN_RESENDS`), and which of the re-sent run's events the caller already
got (:class:`ReportedRuns`). The node slots' side is in :mod:`ray_harness.runtime._slots` ("Re-sent runs").
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ray_harness.multiagent.swarm import Swarm

__all__ = ("RUN_RESENDS", "ReportedRuns", "resendable")

RUN_RESENDS = 3
"""How many times a Graph run whose orchestration host died is sent again before ``RemoteActorError``."""


def resendable(table: dict[tuple[str, ...], Any]) -> bool:
    """Whether the run of this object table's tree can be sent again after its host died: no Swarm in it.

    A Swarm learns its handoffs from its members' streamed tool events, which a slot answering a re-sent run from
    its journal does not stream again.
    """
    return not any(key[0] == "orch" and isinstance(target, Swarm) for key, target in table.items())


class ReportedRuns:
    """The node runs whose events the caller got, so that a run sent again does not report them twice.

    A re-sent run starts from the beginning: each node's runs are reported again in order (the slots answer those
    that completed from their journals). Per node, as many runs as the caller saw end (``multiagent_node_stop``)
    are skipped, with all their events; the run that was going on when the host died is reported again from its
    start. Events that name no node (the final result) always pass.
    """

    def __init__(self) -> None:
        self._stops: Counter[str] = Counter()  # node id -> its runs' stop events yielded
        self._skip: Counter[str] = Counter()  # node id -> its runs the re-sent run reports again

    def resent(self) -> None:
        """The run is sent again: the node runs the caller saw end will be reported again."""
        self._skip = Counter(self._stops)

    def new(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` is new to the caller (to yield); counts the node runs it ends."""
        node_id = event.get("node_id")
        if node_id is None:
            return True
        stop = event.get("type") == "multiagent_node_stop"
        if self._skip[node_id]:
            if stop:
                self._skip[node_id] -= 1
            return False
        if stop:
            self._stops[node_id] += 1
        return True
