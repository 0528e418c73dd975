"""What crosses between a driver and its orchestration host (see :mod:`ray_harness.runtime._orchestrator`).

The orchestrator ships by value, except the objects in its *object table* (the orchestrator and nested
ones, their nodes, agents, edges, hook registries, node runners, locks and session managers), which cross
as references (pickle persistent ids) so both sides keep their own objects; at the end of a run the
typed :class:`EndState` — each orchestrator's run state (``MultiAgentBase.run_state()``) and each agent's
``AgentSnapshot``, or a ``SnapshotDelta`` over the history it was shipped with when the run only appended to it
(:func:`agent_baselines`; so a long history does not travel back at every invocation) — comes back and is applied to the driver's objects through ``apply_run_state()`` and
``Agent.restore()``. Which parts of an orchestrator stay in their process (hooks, node runner, lock, session
manager) the orchestrator says itself (``MultiAgentBase.local_parts()``).
In the actor, session managers are replaced by a relay that sends their writes back.
"""

from __future__ import annotations

import asyncio
import contextvars
import io
import pickle
import threading
from dataclasses import dataclass
from typing import Any

from ray_harness.agent.snapshot import SnapshotDelta, restore_snapshot
from ray_harness.multiagent.base import MultiAgentBase, RunState
from ray_harness.multiagent.graph_model import GraphNode
from ray_harness.multiagent.swarm import SwarmNode
from ray_harness.runtime import _pickling
from ray_harness.runtime._pickling import FastPickler
from ray_harness.runtime._slots import RunBaseline, node_state
from ray_harness.runtime._wire import SessionWriteItem

__all__ = ("EndState", "OrchestratorState", "agent_baselines", "apply_end", "dump_orchestrator", "dumps",
           "load_orchestrator", "loads", "object_table", "pack_end")


# -- what crosses as a reference ------------------------------------------------------------------------------

_NODE_TYPES = (GraphNode, SwarmNode)


def object_table(root: MultiAgentBase, path: str = "",
                 table: dict[tuple[str, ...], Any] | None = None) -> dict[tuple[str, ...], Any]:
    """Key → object for everything of an orchestrator tree that crosses by reference.

    Keys name the object's place (``path`` is ``""`` for the root, ``"/inner"`` for a nested node), so the
    driver's and the actor's copies of one tree map onto each other. Nested orchestrators are walked by the
    same call (``path`` and ``table``: where it is in the tree, and the table being filled).
    """
    if table is None:
        table = {}
    table[("orch", path)] = root
    for role, part in root.local_parts().items():  # hooks, node runner, lock, session manager
        table[(role, path)] = part
    for index, edge in enumerate(getattr(root, "edges", None) or []):
        table[("edge", path, str(index))] = edge
    for node_id, node in getattr(root, "nodes", {}).items():
        table[("node", path, node_id)] = node
        target = node.executor
        table[("target", path, node_id)] = target
        if isinstance(target, MultiAgentBase):
            object_table(target, f"{path}/{node_id}", table)
    return table


_resolver: contextvars.ContextVar[Any] = contextvars.ContextVar("ray_harness_orchestrator_refs")
"""The resolver of the :func:`loads` running in this context (references are resolved while unpickling)."""


def _ref(key: tuple[str, ...]) -> Any:
    where = _resolver.get()
    if type(where) is not dict:
        return where(key)
    try:
        return where[key]
    except KeyError:
        raise pickle.UnpicklingError(f"orchestrator state refers to {key!r}, which this side does not have") from None


class _RefPickler(FastPickler):
    """cloudpickle, with the objects of ``refs`` (``id(obj)`` → key) written as references for :func:`loads`.

    The references are reductions (``_ref(key)``) from ``reducer_override``, not persistent ids: the pickler
    calls ``persistent_id`` back in Python for every object it writes — each string and dict of every history
    — and ``reducer_override`` only for objects of classes it has no fast path for (the references are all such
    objects: orchestrators, agents, nodes, hooks, locks, session managers).
    """

    def __init__(self, file: io.BytesIO, refs: dict[int, tuple[str, ...]]) -> None:
        super().__init__(file)
        self._refs = refs

    def reducer_override(self, obj: Any) -> Any:
        key = self._refs.get(id(obj))
        if key is not None:
            return _ref, (key,)
        if type(obj) in _NODE_TYPES:
            # Nodes hash by node_id and sit in sets of each other (dependencies, cycles): rebuilt from node_id
            # first, so a set that refers back to a node being unpickled can hash it.
            return _new_node, (type(obj), obj.node_id), dict(vars(obj))
        return super().reducer_override(obj)


def _new_node(kind: Any, node_id: str) -> Any:
    node = kind.__new__(kind)
    node.node_id = node_id
    return node


def dumps(value: Any, refs: dict[int, tuple[str, ...]]) -> bytes:
    buffer = io.BytesIO()
    _RefPickler(buffer, refs).dump(value)
    return buffer.getvalue()


def loads(payload: bytes, resolve: dict[tuple[str, ...], Any] | Any) -> Any:
    """Unpickle ``payload``; its references resolve in ``resolve``: an object table, or ``key -> object``."""
    token = _resolver.set(resolve)
    try:
        return pickle.loads(payload)
    finally:
        _resolver.reset(token)


# -- the driver ships the orchestrator -----------------------------------------------------------------------


def dump_orchestrator(orchestrator: MultiAgentBase, table: dict[tuple[str, ...], Any]) -> bytes:
    """Pickle the orchestrator by value, its locks and session managers as references (rebuilt in the actor).

    Raises:
        TypeError: a part of it does not pickle; the message names the part.

    """
    refs = {id(value): key for key, value in table.items() if key[0] in ("lock", "session_manager")}
    try:
        return dumps(orchestrator, refs)
    except Exception as error:
        raise TypeError(_unpicklable_message(orchestrator, table, error)) from error


def _unpicklable_message(orchestrator: MultiAgentBase, table: dict[tuple[str, ...], Any], error: Exception) -> str:
    culprits: list[str] = []
    for key, value in table.items():
        kind = key[0]
        if kind not in ("target", "hooks", "edge"):
            continue
        if kind == "target" and isinstance(value, MultiAgentBase):
            continue  # its own parts are checked under their own keys
        try:
            _pickling.dumps(value)
        except Exception as part_error:
            place = f" of {key[1].lstrip('/')!r}" if key[1] else ""
            what = "the hook registry" if kind == "hooks" else (f"node {key[2]!r}" if kind == "target"
                                                               else f"the condition of edge #{key[2]}")
            culprits.append(f"{what}{place} ({type(value).__name__}: {part_error})")
    culprits.extend(_unpicklable_plugins(orchestrator))
    named = "; ".join(culprits) if culprits else f"{type(error).__name__}: {error}"
    kind = type(orchestrator).__name__
    return (f"{kind} {orchestrator.id!r} cannot be shipped to its orchestration host (runtime='ray'): "
            f"{named}. Use runtime='local', or make the part picklable (e.g. build clients lazily, pass "
            "factories or module-level functions).")


def _unpicklable_plugins(orchestrator: MultiAgentBase) -> list[str]:
    """The orchestrator's plugins that do not pickle, named: their hooks make "the hook registry" fail above."""
    registry = getattr(orchestrator, "_plugin_registry", None)  # only an orchestrator given plugins= has one
    found = []
    for name, plugin in (registry.plugins.items() if registry is not None else ()):
        try:
            _pickling.dumps(plugin)
        except Exception as part_error:
            found.append(f"plugin {name!r} ({type(plugin).__name__}: {part_error})")
    return found


class _SessionRelay:
    """Stands in for a session manager in the actor: writes go back to the driver through the event stream."""

    def __init__(self, path: str, outbox: asyncio.Queue[Any]) -> None:
        self._path = path
        self._outbox = outbox

    def bind(self, outbox: asyncio.Queue[Any]) -> None:
        """Send the writes to ``outbox`` from now on (a resident orchestrator's next invocation)."""
        self._outbox = outbox

    def write_multi_agent_json(self, data: dict[str, Any]) -> None:
        # Sent at once (not with the next event): a quiet run has almost no events to ride on.
        self._outbox.put_nowait(SessionWriteItem(path=self._path, data=data))

    def read_multi_agent_json(self) -> dict[str, Any] | None:
        return None  # state is restored in the driver (at construction), never in the actor


def load_orchestrator(payload: bytes, outbox: asyncio.Queue[Any], relays: list[Any] | None = None) -> MultiAgentBase:
    """Unpickle a shipped orchestrator; its session managers become relays to ``outbox`` (appended to ``relays``)."""
    def resolve(key: tuple[str, ...]) -> Any:
        if key[0] == "lock":
            return threading.Lock()
        if key[0] == "session_manager":
            relay = _SessionRelay(key[1], outbox)
            if relays is not None:
                relays.append(relay)
            return relay
        raise pickle.UnpicklingError(f"unexpected reference {key!r}")

    orchestrator = loads(payload, resolve)
    if not isinstance(orchestrator, MultiAgentBase):
        raise TypeError(f"expected a Graph or Swarm, got {type(orchestrator).__name__}")
    return orchestrator


# -- end-of-run state ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OrchestratorState:
    """One orchestrator's part of the end state: its run state and its agent nodes' pickled snapshots."""

    run: RunState
    agents: bytes
    """``pickle.dumps({node id: AgentSnapshot or SnapshotDelta})``: the C pickler (a snapshot is plain data), all
    of an orchestrator's agents in one pickle, so the field names they share are written once."""


@dataclass(frozen=True)
class EndState:
    """What an orchestration host sends back at the end of a run (pickled into an ``EndItem``).

    Attributes:
        orchestrators: By orchestrator path (``""``: the root, ``"/inner"``: a nested node).
        final: The held-back final ``multiagent_result`` event (``None`` when the run raised).
        error: The run's exception (``fail_fast``), raised in the driver as its own type.

    """

    orchestrators: dict[str, OrchestratorState]
    final: dict[str, Any] | None = None
    error: BaseException | None = None


def agent_baselines(table: dict[tuple[str, ...], Any]) -> dict[tuple[str, ...], RunBaseline]:
    """The agent nodes' messages now (by table key), to tell at the end of the run which only appended."""
    from ray_harness.agent.agent import Agent

    baselines: dict[tuple[str, ...], RunBaseline] = {}
    for key, target in table.items():
        if key[0] == "target" and isinstance(target, Agent):
            baselines[key] = RunBaseline(target.messages)
    return baselines


def pack_end(table: dict[tuple[str, ...], Any], final: dict[str, Any] | None,
             error: BaseException | None, baselines: dict[tuple[str, ...], RunBaseline] | None = None) -> EndState:
    """Collect the end state of the tree in ``table``.

    That is each orchestrator's :class:`~ray_harness.multiagent.base.RunState` and its agent nodes'
    :class:`~ray_harness.agent.AgentSnapshot` — a ``SnapshotDelta`` over the agent's entry of ``baselines``
    (taken when the run was loaded) when the run only appended to its history.
    """
    orchestrators: dict[str, OrchestratorState] = {}
    known = baselines or {}
    for key, orchestrator in table.items():
        if key[0] != "orch":
            continue
        # Pickled here, at once: the snapshots may share the agents' own objects (no copies).
        agents = pickle.dumps({node_id: node_state(node.executor, known.get(("target", key[1], node_id)), copy=False)
                               for node_id, node in orchestrator.nodes.items() if _is_agent(node.executor)},
                              pickle.HIGHEST_PROTOCOL)
        orchestrators[key[1]] = OrchestratorState(run=orchestrator.run_state(), agents=agents)
    return EndState(orchestrators=orchestrators, final=final, error=error)


def apply_end(end: EndState, table: dict[tuple[str, ...], Any],
              baselines: dict[tuple[str, ...], RunBaseline] | None = None) -> None:
    """Apply ``end`` to the driver's objects, through their public methods (``apply_run_state``, ``restore``).

    ``baselines``: the driver's :func:`agent_baselines` from when the run was shipped. A delta applies over
    them, so an agent the driver's code changed meanwhile gets the run's end state, as a full snapshot would do.
    """
    if not isinstance(end, EndState):
        raise TypeError(f"expected the orchestrator's EndState, got {type(end).__name__}")
    for path, part in end.orchestrators.items():
        table[("orch", path)].apply_run_state(part.run)
        for node_id, state in pickle.loads(part.agents).items():
            key = ("target", path, node_id)
            agent = table[key]
            if isinstance(state, SnapshotDelta) and state.base_messages != len(agent.messages):
                base = (baselines or {}).get(key)
                if base is None:
                    raise ValueError(f"node {node_id!r}: the run's end state is a delta over {state.base_messages} "
                                     f"messages, the agent has {len(agent.messages)}")
                state = state.over(base.messages)
            restore_snapshot(agent, state, copy=False)  # just unpickled: nobody else holds it


def _is_agent(target: Any) -> bool:
    from ray_harness.agent.agent import Agent

    return isinstance(target, Agent)
