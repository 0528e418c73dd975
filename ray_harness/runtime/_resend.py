"""Sending a Graph/Swarm run again after its orchestration host died (no Ray here).

The driver's side of "Host loss" (:mod:`ray_harness.runtime._orchestrator`): which runs can be sent again
(:func:`resendable`), how often (:data:`RUN_RESENDS`), and which of the re-sent run's events the caller already
got (:class:`ReportedRuns`). The node slots' side is in :mod:`ray_harness.runtime._slots` ("Re-sent runs").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
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
    or ``multiagent_node_interrupt`` for a node that interrupted) are skipped, with all their events. Handoffs
    (``multiagent_handoff``) the caller got are skipped by their from and to nodes, however the re-sent run orders
    them. Other events (the final result) always pass.

    A node's run that was going on when the host died comes again from its start. When it repeats what the caller
    got of it — its slot answers a run that completed meanwhile with what that run sent — those events are not
    reported again; the first event that differs (the run ran again, differently) releases the held ones, and the
    caller gets that run from its start: :meth:`new` answers ``True`` for it and :attr:`released` holds, in order,
    the events to yield before it.
    """

    def __init__(self) -> None:
        self._seen: Counter[Any] = Counter()  # node id -> its runs' stop events yielded; handoff key -> yielded
        self._skip: Counter[Any] | None = None  # the same, for what the re-sent run reports again (once re-sent)
        self._running: dict[Any, list[dict[str, Any]]] = {}  # node id -> the events yielded of its unfinished run
        self._replays: dict[Any, list[dict[str, Any]]] = {}  # the same, as they were when the run was re-sent
        self._held: dict[Any, list[dict[str, Any]]] = {}  # node id -> events of the re-sent run that repeat them
        self.released: list[dict[str, Any]] = []
        """Held events to yield, in order, before the one :meth:`new` just accepted (the caller empties it)."""

    def resent(self) -> None:
        """The run is sent again: the node runs and handoffs the caller saw will be reported again."""
        self._skip = Counter(self._seen)
        replays = {node: events for node, events in self._running.items() if events}
        for node, replay in self._replays.items():  # still being repeated when lost again: the caller saw it all
            replays.setdefault(node, replay)
        self._replays, self._running, self._held = replays, {}, {}

    def passing(self, events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Of ``events``, those new to the caller, each after the held ones it releases (see :meth:`new`)."""
        for event in events:
            if self.new(event):
                if self.released:  # a lost node run that ran again differently: the caller gets it from its start
                    released, self.released = self.released, []
                    yield from released
                yield event

    def new(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` is new to the caller (to yield, after :attr:`released`); counts what it reports."""
        kind = event.get("type")
        if kind == "multiagent_handoff":
            key: Any = (tuple(event.get("from_node_ids") or ()), tuple(event.get("to_node_ids") or ()))
            if self._skip is not None and self._skip[key]:
                self._skip[key] -= 1
                return False
            self._seen[key] += 1
            return True
        node = event.get("node_id")
        if node is None:
            return True
        ends = kind in _RUN_ENDS
        if self._skip is not None:
            if self._skip[node]:
                if ends:
                    self._skip[node] -= 1
                return False
            replay = self._replays.get(node)
            if replay is not None and self._repeats(node, replay, event):
                return False
        if ends:
            self._seen[node] += 1
            self._running.pop(node, None)
        else:
            self._running.setdefault(node, []).append(event)
        return True

    def _repeats(self, node: Any, replay: list[dict[str, Any]], event: dict[str, Any]) -> bool:
        """Whether ``event`` repeats the next one the caller got of ``node``'s lost run (then it is held)."""
        held = self._held.setdefault(node, [])
        try:
            same = bool(event == replay[len(held)])
        except Exception:  # an event value that cannot be compared: taken as different
            same = False
        if same:
            held.append(event)
            if len(held) == len(replay):  # all the caller got of it, repeated: the run goes on from there
                del self._replays[node], self._held[node]
                self._running[node] = replay
            return True
        del self._replays[node], self._held[node]
        self.released.extend(held)  # it ran differently: the caller gets this run from its start
        self._running[node] = held
        return False
