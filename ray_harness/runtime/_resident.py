"""Resident orchestrators: a Graph/Swarm object's orchestration copy kept on its host between invocations.

With ``runtime="ray"`` a Graph/Swarm invoked from a driver runs on an orchestration host
(:mod:`ray_harness.runtime._orchestrator`). The first invocation ships the whole orchestrator (its agents with
their histories, hooks, conditions); the host keeps that copy under the object's *resident key* and each later
invocation runs it again, so what crosses is the task and what changed in the driver since the end state it
applied last (:class:`Sync`), not the orchestrator. After every run the driver takes over the host's end state
(:func:`~ray_harness.runtime._orchestrator_wire.apply_end`), so both copies agree; the host's end state names a
*token*, and the next request names the token of the end state the driver applied: a host without that copy
(restarted, released, idle, evicted, or the last run's end never reached the driver) answers
``ResidentMissItem`` and the driver ships the orchestrator again. Nothing is lost: the driver's objects are
authoritative.

What the driver tells (:class:`DriverCopy`), checked at each invocation:

* **Agent state** — messages, agent state and interrupt state of every agent node, by digest
  (:func:`~ray_harness.runtime._slots.conversation_digest`) against the digest at the last end state: a changed
  agent travels as its ``AgentSnapshot`` and the host's copy restores it (its slot gets it with its next request).
* **Run state** — each orchestrator's ``RUN_FIELDS`` and its nodes' ``NODE_RUN_FIELDS``, by identity: a
  reassigned field (``deserialize_state``, a session restore, ``graph.state = ...``) sends that orchestrator's
  run state. A run-state object changed *in place* in the driver between invocations is not seen.
* **Structure** — the objects of the tree (nodes, agents, edges, nested orchestrators, hook registries, session
  managers) by identity and the number of hook callbacks: any difference ships the orchestrator again.
  Configuration edits inside those objects (an agent's model or tools, a node's settings) reach neither a
  resident orchestrator nor a node slot: ``shutdown()`` (or a new Graph/Swarm) ships them.

The host's side (:class:`Residents`, one per host process) keeps at most :data:`MAX_RESIDENTS` copies (the least
recently used goes first), drops a copy idle for the slot idle timeout (``RAY_HARNESS_SLOT_IDLE_TIMEOUT``) when
it next serves a request, and releases copies by key prefix with the Graph/Swarm's node slots (``shutdown()``,
garbage collection, ``ray_harness.runtime.shutdown()``). A copy runs one invocation at a time.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ray_harness.runtime._slots import conversation_digest

if TYPE_CHECKING:  # a host loads the multi-agent layer on its first orchestration only
    from ray_harness.agent.snapshot import AgentSnapshot
    from ray_harness.multiagent.base import MultiAgentBase, RunState

__all__ = ("MAX_RESIDENTS", "DriverCopy", "Resident", "Residents", "Sync", "apply_sync")

MAX_RESIDENTS = 256
"""Resident orchestrators one host keeps at most (the least recently used is dropped first)."""

Table = dict[tuple[str, ...], Any]

_OWNERS = ("orch", "node_runner")


@dataclass(frozen=True)
class Sync:
    """What changed in the driver since the end state it applied last, for the host's resident copy.

    Attributes:
        agents: By table key (``("target", path, node_id)``): the agent's snapshot, to restore.
        runs: By orchestrator path: its run state (fields and node fields; no node runner state), to apply.

    """

    agents: dict[tuple[str, ...], AgentSnapshot] = field(default_factory=dict)
    runs: dict[str, RunState] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.agents or self.runs)


class DriverCopy:
    """What the driver knows of its orchestrator's resident copy on the host (see the module docstring).

    Built right after the driver applied a run's end state, when both copies agree. It holds the tree's objects
    themselves (an id can be reused once its object is gone), except the root orchestrator and its node runner,
    which own this copy (held by id: no reference cycle that would keep a Graph/Swarm from being freed, and their
    ids cannot be reused while they are in use). What it compares is flat, computed here once: the objects' ids
    and hook counts (the structure), each run field with its value (``(path, object key, name, value)``) and each
    agent node's digest.

    Args:
        token: The end state's token (named in the next request).
        table: The driver's object table (:func:`~ray_harness.runtime._orchestrator_wire.object_table`).
        same_structure: The copy whose :meth:`sync` passed for the request this end state answers: the structure
            it checked is this table's, so it is taken over instead of read again.

    """

    __slots__ = ("_digests", "_hooks", "_ids", "_objects", "_watch", "token")

    def __init__(self, token: str, table: Table, same_structure: DriverCopy | None = None) -> None:
        from ray_harness.agent.agent import Agent

        self.token = token
        self._objects: dict[tuple[str, ...], Any]
        self._ids: dict[tuple[str, ...], int]
        self._hooks: dict[tuple[str, ...], int]
        if same_structure is not None:
            self._objects, self._ids, self._hooks = same_structure._objects, same_structure._ids, same_structure._hooks
        else:
            self._objects, self._ids, self._hooks = {}, {}, {}
            for key, value in table.items():
                self._ids[key] = id(value)
                self._objects[key] = id(value) if key[1] == "" and key[0] in _OWNERS else value
                if key[0] == "hooks" and hasattr(value, "callback_count"):
                    self._hooks[key] = value.callback_count
        self._watch: list[tuple[str, tuple[str, ...], str, Any]] = []
        self._digests: dict[tuple[str, ...], str] = {}
        for key, value in table.items():
            if key[0] == "orch":
                path = key[1]
                for name in value.RUN_FIELDS:
                    self._watch.append((path, key, name, getattr(value, name)))
                for node_id, node in getattr(value, "nodes", {}).items():
                    for name in value.NODE_RUN_FIELDS:
                        self._watch.append((path, ("node", path, node_id), name, getattr(node, name)))
            elif key[0] == "target" and isinstance(value, Agent):
                # The digest the host computed for the agent's end state, when its node runner sent one.
                runner: Any = table.get(("node_runner", key[1]))
                known = runner.state_digest(key[2]) if hasattr(runner, "state_digest") else None
                self._digests[key] = known if known is not None else conversation_digest(value)

    def sync(self, table: Table) -> Sync | None:
        """What to send with the next request; ``None`` when the structure changed (ship the orchestrator).

        The snapshots in it share the agents' objects: pickle it before they change.
        """
        ids = self._ids
        if len(table) != len(ids):
            return None
        for key, value in table.items():
            if ids.get(key) != id(value):
                return None
        for key, count in self._hooks.items():
            if table[key].callback_count != count:
                return None
        agents: dict[tuple[str, ...], AgentSnapshot] = {}
        for key, digest in self._digests.items():
            target = table[key]
            if conversation_digest(target) != digest:
                from ray_harness.agent.snapshot import take_snapshot

                agents[key] = take_snapshot(target, copy=False)  # not a copy: the caller pickles the sync at once
        runs: dict[str, RunState] = {}
        for path, key, name, value in self._watch:
            if path not in runs and getattr(table[key], name) is not value:
                from ray_harness.multiagent.base import RunState

                state = table[("orch", path)].run_state()
                runs[path] = RunState(fields=state.fields, nodes=state.nodes)
        return Sync(agents=agents, runs=runs)


def apply_sync(sync: Sync, table: Table) -> None:
    """Apply the driver's :class:`Sync` to a resident copy (its object table), through public methods.

    A restored agent's node runner is told its copy changed, so the node's slot gets the snapshot with its next
    request.
    """
    if not isinstance(sync, Sync):
        raise TypeError(f"expected the driver's Sync, got {type(sync).__name__}")
    for path, state in sync.runs.items():
        table[("orch", path)].apply_run_state(state)
    from ray_harness.agent.snapshot import restore_snapshot

    for key, snapshot in sync.agents.items():
        restore_snapshot(table[key], snapshot, copy=False)  # the sync was just unpickled: nobody else holds it
        changed = getattr(table.get(("node_runner", key[1])), "copy_changed", None)
        if callable(changed):
            changed(key[2])


@dataclass
class Resident:
    """One orchestrator kept on its host between invocations.

    Attributes:
        orchestrator: The host's copy.
        table: Its object table.
        token: The token of its last run's end state (the driver names it to run this copy again).
        bind: Re-points the copy's session relays at an invocation's outbox.

    """

    orchestrator: MultiAgentBase
    table: Table
    token: str
    bind: Callable[[Any], None]
    used: float = field(default_factory=time.monotonic)


class Residents:
    """The resident orchestrators of one host process, by resident key (see the module docstring).

    Args:
        idle_timeout: Seconds a copy may stay unused (0: no limit).
        limit: Copies kept at most.
        clock: For tests.

    """

    def __init__(self, idle_timeout: float = 0.0, limit: int = MAX_RESIDENTS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._idle_timeout = idle_timeout
        self._limit = limit
        self._clock = clock
        self._kept: collections.OrderedDict[str, Resident] = collections.OrderedDict()
        self._guard = threading.Lock()  # release comes from the control group's thread

    def __len__(self) -> int:
        return len(self._kept)

    def keys(self) -> list[str]:
        """The keys kept, least recently used first."""
        with self._guard:
            return list(self._kept)

    def take(self, key: str, token: str) -> Resident | None:
        """Take the copy under ``key`` for one run when its last end state is ``token``; ``None``: ship it again.

        A taken copy is not kept meanwhile (a second request for it misses); :meth:`keep` puts it back.
        """
        with self._guard:
            self._expire()
            resident = self._kept.get(key)
            if resident is None or resident.token != token:
                return None
            del self._kept[key]
            return resident

    def keep(self, key: str, resident: Resident) -> None:
        """Keep ``resident`` under ``key`` (replacing what is there), as the most recently used."""
        resident.used = self._clock()
        with self._guard:
            self._kept.pop(key, None)
            self._kept[key] = resident
            while len(self._kept) > self._limit:
                self._kept.popitem(last=False)
            self._expire()

    def release(self, prefixes: Iterable[str]) -> int:
        """Drop the copies whose keys start with any of ``prefixes``; return how many."""
        prefixes = tuple(prefixes)
        with self._guard:
            gone = [key for key in self._kept if key.startswith(prefixes)]
            for key in gone:
                del self._kept[key]
        return len(gone)

    def _expire(self) -> None:
        if self._idle_timeout <= 0:
            return
        horizon = self._clock() - self._idle_timeout
        while self._kept:
            key, oldest = next(iter(self._kept.items()))
            if oldest.used > horizon:
                break
            del self._kept[key]
