"""One A2A ``contextId`` is one conversation, kept in the task store.

A new task in a context starts from the conversation its earlier tasks left, on whichever replica it lands (as
Strands' A2A server keeps an agent per context).

The conversation is an ``AgentSnapshot`` in the task store (``contexts/context_<hash>.json``, versioned). A task
of a served Agent restores it into the fresh agent before its run and, once the task is ``COMPLETED``, writes
the agent back. Turns finish in any order: a turn that started from an older version than the one it finds
appends only the messages it added, so concurrent turns in one context are all kept. A turn that ends
``FAILED`` or ``CANCELED`` adds nothing, an interrupted one included: cancelling an ``INPUT_REQUIRED`` task
drops its half-done turn, and the context goes on from the conversation before it (Strands' server keeps the
interrupted agent, which then refuses every new message of the context). An interrupted task remembers where
its turn started (``contexts/turn_<task id>.json``, removed when the task ends) and joins the conversation
when its answer completes it. A Graph or Swarm task starts afresh: their runs are workflows, not
conversations.

Eviction (Strands' A2A server: least recently used beyond 1,000 contexts): ``contexts/index.json`` holds each
context's last use (a counter, not a clock) and its tasks in flight. Beyond ``max_contexts`` contexts, the
least recently used ones without a task in flight (running, or waiting for input) are evicted: their
conversation leaves the store, and a later message in that context starts afresh. A task listed in flight
whose record says it ended, or whose replica died, does not hold its context.

Replicas evict and continue contexts concurrently, so a conversation also lists its tasks in flight, written
(compare-and-swap) when a task restores it. An eviction reads the conversation before its index write commits
and deletes it only if it is unchanged since (``If-Match`` on S3, under its lock file on disk): a task that
started in the context meanwhile, or a turn that joined it, keeps it. A store written before the index existed
is indexed on a replica's first index write: contexts missing from the index join it as used before all the
others, in the order of their last write.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray_harness.serve._store import TaskRecords
from ray_harness.types.exceptions import RayHarnessError

logger = logging.getLogger("ray_harness.serve")

__all__ = ("DEFAULT_MAX_CONTEXTS", "Conversations", "Turn", "check_max_contexts")


DEFAULT_MAX_CONTEXTS = 1000
"""Contexts kept in a task store before the least recently used idle ones are evicted (as in Strands)."""
_INDEX_KEY = "contexts/index.json"
_CHECKS_PER_UPDATE = 16
"""Busy contexts whose tasks one index update reads (a store read each); others count as busy until a later one."""


@dataclass(frozen=True)
class Turn:
    """Where a task's run started: the context, the conversation version it restored and its message count."""

    context_id: str
    version: int
    base: int


def _context_hash(context_id: str) -> str:
    # Context ids come from clients: hashed, so any string names one safe key.
    return hashlib.sha256(context_id.encode()).hexdigest()[:40]


def _context_key(context_id: str) -> str:
    return _hash_key(_context_hash(context_id))


def _hash_key(digest: str) -> str:
    return f"contexts/context_{digest}.json"


def check_max_contexts(value: Any) -> int:
    """``value`` as a ``max_contexts`` setting, else a ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_contexts must be a positive int (contexts kept before the least recently used "
                         f"are evicted), got {value!r}")
    return value


def _turn_key(task_id: str) -> str:
    return f"contexts/turn_{task_id}.json"


def _decode(raw: bytes | None) -> tuple[int, dict[str, Any] | None]:
    if raw is None:
        return 0, None
    data = json.loads(raw)
    return int(data["version"]), data["snapshot"]


def _holders(raw: bytes | None) -> list[str]:
    """The tasks in flight a conversation lists (none in one written before it listed them)."""
    return [] if raw is None else [str(task_id) for task_id in json.loads(raw).get("tasks", [])]


def _encode(version: int, snapshot: dict[str, Any] | None, tasks: list[str] | None = None) -> bytes:
    data = {"version": version, "snapshot": snapshot, **({"tasks": tasks} if tasks else {})}
    return json.dumps(data, separators=(",", ":")).encode()


class _Absent(RayHarnessError):
    """Aborts a compare-and-swap of a conversation that is not in the store (internal)."""


def keeps_conversation(target: Any) -> bool:
    from ray_harness.agent import Agent

    return isinstance(target, Agent)


class Conversations:
    """The conversations of the contexts a replica serves, kept in its task store.

    Args:
        records: The task store.
        max_contexts: Contexts kept before the least recently used idle ones are evicted.
    """

    def __init__(self, records: TaskRecords, *, max_contexts: int = DEFAULT_MAX_CONTEXTS) -> None:
        self.records = records
        self.max_contexts = check_max_contexts(max_contexts)
        self._indexed = False
        """Whether this replica indexed the contexts its store held (once, on its first index write)."""
        records.settle_hooks.append(self._forget)

    async def start(self, target: Any, context_id: str, task_id: str) -> Turn | None:
        """Restore ``context_id``'s conversation into ``target`` (a fresh Agent); None for a Graph/Swarm."""
        if not keeps_conversation(target):
            return None
        # In flight first, then read: an eviction either happened before (a fresh start) or waits for us.
        await self._note(lambda index: _enter(index, _context_hash(context_id), task_id))
        version, stored = await self._hold(_context_key(context_id), task_id)
        if stored is not None:
            from ray_harness.agent.snapshot import AgentSnapshot

            # The factory may name each agent anew: the conversation belongs to the context, not to an agent id.
            snapshot = AgentSnapshot.model_validate({**stored, "agent_id": target.agent_id, "name": target.name})
            await asyncio.to_thread(target.restore, snapshot)
        return Turn(context_id, version, len(target.messages))

    async def _hold(self, key: str, task_id: str) -> tuple[int, dict[str, Any] | None]:
        """Read the conversation and list ``task_id`` in it, in one write.

        An eviction that read the conversation before this write then finds it changed, and keeps it.
        """
        found: list[tuple[int, dict[str, Any] | None]] = []

        def hold(current: bytes | None) -> bytes:
            if current is None:
                raise _Absent(key)  # nothing to keep from eviction: a fresh start
            found[:] = [_decode(current)]
            holders = _holders(current)
            return _encode(*found[0], holders if task_id in holders else [*holders, task_id])

        try:
            await self.records.update_blob(key, hold)
        except _Absent:
            return 0, None
        except Exception:  # the task runs from what is there; only an eviction racing it could miss it
            logger.warning("could not list task %s in its context's conversation", task_id, exc_info=True)
            return _decode(await self.records.read_blob(key))
        return found[0]

    async def park(self, task_id: str, turn: Turn) -> None:
        """The task is interrupted: remember where its turn started, for whichever replica completes it."""
        data = {"contextId": turn.context_id, "version": turn.version, "base": turn.base}
        await self.records.write_blob(_turn_key(task_id), json.dumps(data).encode())

    async def parked(self, task_id: str) -> Turn | None:
        raw = await self.records.read_blob(_turn_key(task_id))
        if raw is None:
            return None
        data = json.loads(raw)
        return Turn(str(data["contextId"]), int(data["version"]), int(data["base"]))

    async def finish(self, target: Any, task_id: str, turn: Turn) -> None:
        """The task completed: its turn joins the conversation of its context."""
        mine = (await asyncio.to_thread(target.snapshot)).model_dump(mode="json")

        def merge(current: bytes | None) -> bytes:
            version, stored = _decode(current)
            holders = [held for held in _holders(current) if held != task_id]
            if version == turn.version or stored is None:
                return _encode(version + 1, mine, holders)
            # Another turn finished since this one started: keep its messages and add only this turn's.
            added = mine["messages"][turn.base:]
            return _encode(version + 1, {**mine, "messages": [*stored["messages"], *added]}, holders)

        await self.records.update_blob(_context_key(turn.context_id), merge)
        await self.records.delete_blob(_turn_key(task_id))
        await self._note(lambda index: _leave(index, _context_hash(turn.context_id), task_id))

    async def _note(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Update the index; a failure costs a context its eviction order, never the task its run."""
        try:
            await self.records.io(self._index, change)
        except Exception:
            logger.warning("could not update the context index of the task store", exc_info=True)

    # -- the index (blocking; run through records.io or in the writing thread) --------------------------

    def _forget(self, task_id: str) -> None:
        """A task ended (any replica, any path): its turn goes, and it no longer holds its context."""
        self.records.repo._delete(_turn_key(task_id))
        self.records.drop_lock(_turn_key(task_id))  # an older store wrote turns with a compare-and-swap
        raw = self.records.repo._read(_INDEX_KEY)
        index = _load_index(raw)
        holding = [digest for digest, entry in index["contexts"].items() if task_id in entry["tasks"]]
        if holding:  # read first: most tasks ended in finish() already, and need no index write
            self._index(lambda current: _leave(current, holding[0], task_id, touch=False))
            self._release(_hash_key(holding[0]), task_id)

    def _release(self, key: str, task_id: str) -> None:
        """Take ``task_id`` off the tasks its conversation lists (it ended without joining it)."""
        if task_id not in _holders(self.records.repo._read(key)):
            return

        def release(current: bytes | None) -> bytes:
            if current is None or task_id not in _holders(current):
                raise _Absent(key)
            return _encode(*_decode(current), [held for held in _holders(current) if held != task_id])

        with contextlib.suppress(_Absent):
            self.records.update_blob_sync(key, release)

    def _index(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Apply ``change`` to the index, evict beyond ``max_contexts``, then delete the evicted conversations.

        Each conversation to evict is read (with a token naming that version) before the index write commits,
        and deleted only if unchanged since: a task that restored it, or a turn that joined it, after this
        replica decided keeps it.
        """
        evicted: list[str] = []
        read: dict[str, str | None] = {}
        stored = None if self._indexed else self.records.blobs.modified("contexts")

        def holders(digest: str) -> list[str]:
            raw, read[digest] = self.records.blobs.read(_hash_key(digest))
            return [task_id for task_id in _holders(raw) if self.records.in_flight(task_id)]

        def update(current: bytes | None) -> bytes:
            index = _load_index(current)
            if stored:
                _adopt(index, stored)
            change(index)
            read.clear()
            evicted[:] = _evict(index, self.max_contexts, self.records.in_flight, holders)
            return json.dumps(index, separators=(",", ":")).encode()

        self.records.update_blob_sync(_INDEX_KEY, update)
        self._indexed = True
        for digest in evicted:
            token, key = read.get(digest), _hash_key(digest)
            if token is not None and not self.records.blobs.delete_if(key, token):
                logger.debug("kept A2A context %s: a task continued it while it was evicted", digest)
                continue
            self.records.drop_lock(key)
            logger.debug("evicted the least recently used A2A context %s (max_contexts=%d)", digest,
                         self.max_contexts)


def _load_index(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        return {"clock": 0, "contexts": {}}
    data: dict[str, Any] = json.loads(raw)
    return data


def _enter(index: dict[str, Any], digest: str, task_id: str) -> None:
    index["clock"] += 1
    entry = index["contexts"].setdefault(digest, {"used": 0, "tasks": []})
    entry["used"] = index["clock"]
    if task_id not in entry["tasks"]:
        entry["tasks"].append(task_id)


def _leave(index: dict[str, Any], digest: str, task_id: str, *, touch: bool = True) -> None:
    entry = index["contexts"].get(digest)
    if entry is None:
        return
    if task_id in entry["tasks"]:
        entry["tasks"].remove(task_id)
    if touch:
        index["clock"] += 1
        entry["used"] = index["clock"]


def _adopt(index: dict[str, Any], stored: dict[str, float]) -> None:
    """Index the conversations in the store (file name -> last write) that the index does not list.

    They were written before the index existed (or while an index write failed): used before every listed one,
    the least recently written first.
    """
    found = {name[len("context_"):-len(".json")]: when for name, when in stored.items()
             if name.startswith("context_") and name.endswith(".json")}
    missing = sorted((when, digest) for digest, when in found.items() if digest not in index["contexts"])
    first = min((entry["used"] for entry in index["contexts"].values()), default=index["clock"] + 1)
    for rank, (_, digest) in enumerate(missing):
        index["contexts"][digest] = {"used": first - len(missing) + rank, "tasks": []}


def _evict(index: dict[str, Any], limit: int, in_flight: Callable[[str], bool],
           holders: Callable[[str], list[str]] | None = None) -> list[str]:
    """Remove the least recently used idle contexts beyond ``limit`` from ``index``; their hashes.

    ``holders(digest)``, when given, reads the tasks in flight a conversation lists itself (the last word on
    an idle-looking context: a replica whose index write failed still listed its task there).
    """
    contexts: dict[str, Any] = index["contexts"]
    evicted: list[str] = []
    checks = _CHECKS_PER_UPDATE
    for digest in sorted(contexts, key=lambda key: contexts[key]["used"]):
        if len(contexts) <= limit:
            break
        entry = contexts[digest]
        if entry["tasks"]:
            if checks <= 0:
                continue  # still counted busy: a later update checks it
            # A task listed here that ended or lost its replica (it never told us) does not hold the context.
            checks -= 1
            entry["tasks"] = [task_id for task_id in entry["tasks"] if in_flight(task_id)]
        if not entry["tasks"] and holders is not None:
            entry["tasks"] = holders(digest)
        if not entry["tasks"]:
            del contexts[digest]
            evicted.append(digest)
    return evicted
