"""``HostSlots``: the Graph/Swarm node slots resident in one ``AgentHost`` and the requests they serve.

A Graph/Swarm agent node on ``runtime="ray"`` runs in a resident **node slot** of a pooled host
(:class:`~ray_harness.runtime._host.AgentHost`): a ``stream`` request with ``slot`` set runs in the slot
``agent_key`` (``"<uid>/<node id>"``), built from the spec that comes with the slot's first request only; a slot
the host does not have answers ``SlotMissItem("unknown")`` and one at another revision than the caller's copy
``"stale"``, so the caller sends the spec or its snapshot once. ``release_prefix`` drops a Graph/Swarm's slots in
one message; slots idle for the idle timeout are dropped by the host (a sweeper task runs while it has slots).
The per-slot bookkeeping (revision, use, counters) and the state sent back (a delta when the run only appended)
are Ray-free, in :mod:`ray_harness.runtime._slots`.

Node slots journal from an invocation's first tool result on (``journal="side_effects"`` of
:class:`~ray_harness.runtime._runner.AgentRunner`), under the key ``slot:<agent_key>`` in the state directory. When
the host's process dies mid-request, its caller sends the same request again (``AgentPool.stream_slot``); the
restarted host does not have the slot, the caller ships the agent, and the slot opened from it adopts the journal
that names the request's invocation id: completed tools are not re-run, the running step runs again. A dropped
slot's journal is deleted (by the host, which drops every resident runner in one place).

When the *orchestration* host dies instead, its driver sends the whole run again with the same ids: a node's
request for a run the slot completed (one of its last few, from the copy that run started from: the same revision,
or the same state sent along by a changed copy) gets the items that run sent, again, without running
(:meth:`~ray_harness.runtime._slots.SlotBook.completed_run`); any other request that restores the slot from the
caller's copy drops a journaled result of its id, so it runs.

A slot's runner lives among the host's resident runners (the dict is shared); runs register with the host (so
``cancel`` reaches them) and slots are dropped through the host (so their sandboxes close): :class:`HostSlots`
takes those three from the host and holds the rest.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from typing import Any

from ray_harness.agent.snapshot import AgentSnapshot, SnapshotDelta, restore_snapshot
from ray_harness.runtime import _sandbox_owner as sandboxes
from ray_harness.runtime._runner import AgentRunner, SlotMiss
from ray_harness.runtime._slots import (
    CompletedRun,
    RunBaseline,
    SlotBook,
    node_state,
    slot_idle_timeout,
    snapshot_digest,
)
from ray_harness.runtime._spec import AgentSpec
from ray_harness.runtime._store import FileAgentStore
from ray_harness.runtime._wire import (
    EventItem,
    InvokeRequest,
    ResultItem,
    SlotMissItem,
    SlotSync,
    SnapshotItem,
    unpack_snapshot,
)
from ray_harness.sandbox import _binding
from ray_harness.types.exceptions import RayHarnessError

__all__ = ("HostSlots", "RunInFlight", "register_when_free")

logger = logging.getLogger(__name__)

_IN_FLIGHT_POLL_S = 0.05
"""How often a re-sent node run checks whether the run of the same id (from a lost orchestration) ended."""


class RunInFlight(RayHarnessError, ValueError):
    """Raised by the host's ``register``: a run with that id is already running on this host."""


async def register_when_free(register: Callable[[str, AgentRunner], None], run_id: str, runner: AgentRunner) -> None:
    """Register a run of a resident agent with its host (``register``) once no run of that id is running there.

    The same run, sent again by a driver whose orchestration host died while it ran here: once the lost one ends,
    this request gets what it sent (a slot's kept run, a resident agent's journaled result), or continues it.
    """
    while True:
        try:
            register(run_id, runner)
            return
        except RunInFlight:
            await asyncio.sleep(_IN_FLIGHT_POLL_S)


def _copy_start(sync: SlotSync, spec: AgentSpec | None, sent: AgentSnapshot | None) -> int | str | None:
    """What identifies the caller's copy a request starts from, to match a re-send with a kept run.

    For a changed copy, the digest of the snapshot it sent along (``sent``: its conversation, state and interrupt
    state; the same copy sent again has the same, while its pickle may differ between processes); else
    ``sync.revision``; 0 for a copy that ships its agent to a new slot; ``None`` for one that ships it to restore an
    existing slot (its run is not kept for a re-send).
    """
    if sent is not None:
        return "snapshot:" + snapshot_digest(sent)
    if spec is not None:
        return 0 if sync.revision is None else None
    return sync.revision


class HostSlots:
    """The node slots of one host: opening them, running their requests, sweeping the idle ones.

    Args:
        index: The host's number in its pool (for messages).
        resident: The host's resident runners by key; a slot's runner is kept there under the slot's key.
        register: Registers a run with the host (``(run id, runner)``), so that a cancel reaches it.
        unregister: Unregisters a run (its id).
        drop: Drops a resident runner by key (its slot bookkeeping through :meth:`forget`, its journal and the
            sandboxes only it held); whether it was there.

    """

    def __init__(self, index: int, resident: dict[str, AgentRunner], register: Callable[[str, AgentRunner], None],
                 unregister: Callable[[str], None], drop: Callable[[str], Awaitable[bool]]) -> None:
        self._index = index
        self._resident = resident
        self._register = register
        self._unregister = unregister
        self._drop = drop
        self._book = SlotBook()  # the slots' bookkeeping (see _slots.py)
        self._store = FileAgentStore()  # their journals (the state directory)
        self._idle_timeout = slot_idle_timeout()
        self._sweeper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._book)

    def __contains__(self, agent_key: object) -> bool:
        return agent_key in self._book

    def info(self, agent_key: str | None, runner: AgentRunner) -> dict[str, Any]:
        """A node slot's counters, revision and journal for ``slot_info`` (``{}``: not a node slot)."""
        entry = self._book.get(agent_key) if agent_key is not None else None
        if entry is None:
            return {}
        return {"revision": entry.revision, "builds": entry.builds, "restores": entry.restores, "runs": entry.runs,
                "deltas": entry.deltas, "snapshots": entry.snapshots, "journal": runner.journal_path()}

    def with_prefix(self, prefixes: Iterable[str]) -> list[str]:
        """The keys of the slots that start with any of ``prefixes``."""
        return self._book.with_prefix(prefixes)

    def forget(self, agent_key: str) -> None:
        """Drop a slot's bookkeeping (the host drops its runner; a key that is no slot is ignored)."""
        self._book.drop(agent_key)

    async def stream(self, request: InvokeRequest, spec: AgentSpec | None
                     ) -> AsyncGenerator[EventItem | ResultItem | SnapshotItem | SlotMissItem, None]:
        """Run a node's request in its resident slot ``request.agent_key``.

        A slot the host does not have and no spec: a ``SlotMissItem("unknown")``. With a spec: the slot is opened
        from it (or, when it exists, restored from it). Results and failed runs' snapshots carry the revision
        their snapshot holds; a run that only appended to the caller's copy's history sends a delta instead of the
        snapshot (:func:`~ray_harness.runtime._slots.node_state`; the baseline is taken at the run's turn).
        """
        key, sync = str(request.agent_key), request.slot or SlotSync()
        runner = self._resident.get(key)
        if runner is not None and key not in self._book:
            raise ValueError(f"agent_key {key!r} is a resident agent of another kind on host {self._index}")
        opened = False
        if runner is None:
            if spec is None:
                yield SlotMissItem(agent_key=key, reason="unknown")
                return
            runner = self._open(key, spec)
            opened = True
            if runner.adopt(request.invocation_id):  # re-sent after the process that ran it died
                logger.info("host=<%d>, slot=<%s>, run=<%s> | slot re-created from its journal", self._index, key,
                            request.invocation_id)
        await register_when_free(self._register, request.invocation_id, runner)
        self._book.enter(key)
        try:
            sent = unpack_snapshot(sync.snapshot) if sync.snapshot is not None else None  # a changed copy's
            start = _copy_start(sync, spec, sent)
            kept = self._book.completed_run(key, request.invocation_id, start)
            if kept is not None:  # a re-send of a completed run (see the module docstring): what it sent, again
                for item in kept.items:
                    yield item
                return
            await _binding.settled(sandboxes.resident_holder(key))
            baseline: list[RunBaseline] = []  # the messages the run starts from, set by prepare at its turn
            prepare = functools.partial(self._prepare, key, runner, request.invocation_id, sync, sent,
                                        None if opened else spec, opened, baseline)
            state = functools.partial(self._state, key, runner.agent, baseline)
            # What the run sends, kept for a re-send once it completed (not when a spec restored the slot).
            items: list[Any] = []
            run = runner.wire_stream(request, prepare, state)
            try:
                async for item in run:
                    if isinstance(item, ResultItem | SnapshotItem):
                        item = item.model_copy(update={"revision": self._book.revision(key)})
                    if start is not None:
                        items.append(item)
                        if isinstance(item, ResultItem):
                            self._book.completed(key, request.invocation_id,
                                                 CompletedRun(start, tuple(items), sync.orchestration))
                    yield item
            finally:
                await run.aclose()  # a closed request's run has ended when it leaves the host's registry
        finally:
            self._unregister(request.invocation_id)
            self._book.leave(key)

    def _open(self, key: str, spec: AgentSpec) -> AgentRunner:
        runner = self._resident[key] = AgentRunner(sandboxes.build(spec, sandboxes.resident_holder(key)),
                                                   mode="queue", store=self._store, key=f"slot:{key}",
                                                   journal="side_effects")
        self._book.open(key)
        self._start_sweeper()
        return runner

    def _prepare(self, key: str, runner: AgentRunner, invocation_id: str, sync: SlotSync, sent: AgentSnapshot | None,
                 spec: AgentSpec | None, opened: bool, baseline: list[RunBaseline]) -> None:
        """At the run's turn: restore what the caller sent, or check it matches the slot; then bump the revision.

        A slot just opened from the caller's spec matches it; an existing one given a spec is restored from it
        (its configuration stays as first shipped), or from the snapshot a changed copy sent (``sent``). When the
        slot now has as many messages as the caller's copy (``sync.messages``), they are the run's ``baseline``:
        its end sends a delta over them if it only appended.
        """
        if key not in self._book:  # released while this request waited: its caller ships the agent again
            raise SlotMiss(SlotMissItem(agent_key=key, reason="unknown"))
        restored = spec is not None or sent is not None
        if restored and not opened:
            runner.drop_result(invocation_id)  # from the caller's copy: a result journaled under this id is not its
        if opened:
            pass
        elif spec is not None:
            runner.agent.restore(spec.build().snapshot())
        elif sent is not None:
            restore_snapshot(runner.agent, sent, copy=False)  # unpickled for this request: the slot may keep its objects
        elif sync.revision != self._book.revision(key):
            raise SlotMiss(SlotMissItem(agent_key=key, reason="stale"))
        self._book.started(key, restored=restored)
        messages = runner.agent.messages
        if sync.messages is not None and sync.messages == len(messages):
            baseline.append(RunBaseline(messages))

    def _state(self, key: str, agent: Any, baseline: list[RunBaseline]) -> AgentSnapshot | SnapshotDelta:
        """A node slot run's state for its caller: a delta over the run's baseline when it only appended."""
        # Not copied: the runner pickles it at once (wire_stream), before the agent runs on; the book only counts it.
        state = node_state(agent, baseline[0] if baseline else None, copy=False)
        self._book.sent(key, state)
        return state

    def _start_sweeper(self) -> None:
        if self._idle_timeout > 0 and (self._sweeper is None or self._sweeper.done()):
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_idle())

    async def _sweep_idle(self) -> None:
        period = max(1.0, min(self._idle_timeout / 4, 30.0))
        while len(self._book):
            await asyncio.sleep(period)
            await self.drop_idle()

    async def drop_idle(self) -> list[str]:
        """Drop the slots idle for the idle timeout (see :mod:`ray_harness.runtime._slots`); their keys."""
        expired = self._book.expired(self._idle_timeout, lambda key: key in self._resident
                                     and self._resident[key].busy)
        for key in expired:
            await self._drop(key)
        if expired:
            logger.debug("host=<%d>, slots=<%d> | idle node slots released", self._index, len(expired))
        return expired
