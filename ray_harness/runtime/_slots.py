"""Resident node slots: the host's bookkeeping of them and the digest that tells a changed copy (no Ray here).

A Graph/Swarm agent node on ``runtime="ray"`` lives in one slot of a pooled host under the key
``"<uid>/<node id>"`` (:func:`slot_key`; ``<uid>`` is its node runner's, kept through pickling). The host keeps,
per slot, a :class:`SlotBook` entry: the slot's **revision** (bumped when a run starts or a snapshot is restored
into it, so the revision a result reports names exactly the state its snapshot holds), when it was last used,
how many requests are in flight, how often it was built, restored and run, and how many runs sent their state
back as a delta or as the full snapshot (``slot_info``).

**Idle timeout.** A slot nobody used for ``RAY_HARNESS_SLOT_IDLE_TIMEOUT`` seconds
(:data:`DEFAULT_SLOT_IDLE_TIMEOUT`: 600; ``0`` keeps slots until released) is dropped by its host, even when
its Graph/Swarm was never shut down (a driver that died). The next request for it gets an "unknown slot" answer
and ships the agent again. The host reads the variable when it starts (the driver forwards it to new hosts).

**Deltas.** A run's state goes back to the caller as a :class:`~ray_harness.agent.snapshot.SnapshotDelta` when
the run only appended to the history: at the run's turn the host keeps a :class:`RunBaseline` (the slot's message
objects and their count); at its end :func:`node_state` compares the agent's messages with it — the same
objects, in order, at the front — and sends only what follows, else the full snapshot (a conversation manager
that trimmed, a hook that replaced messages). A hook that edits an earlier message *in place* is not seen: the
caller's copy keeps the message as it was (such edits belong in a new message, or a conversation manager).

**Re-sent runs.** The entry keeps the slot's completed runs of its latest orchestration request (at most
:data:`KEPT_RUNS`) as sent: the copy each started from, the event items it streamed and its result item (with
its state and revision, often the full snapshot: a conversation manager that trims sends no delta). When an
orchestration host dies, its driver sends the run again with the same ids (:mod:`ray_harness.runtime._orchestrator`):
a node's request that names a kept run, from the copy that run started from (the same slot revision, or the same
state sent along by a changed copy, e.g. a history the caller cleared), gets those items again
(:meth:`SlotBook.completed_run`) — the node does not run twice, whatever ran in the slot since. Any other request
runs as usual. The runs of an earlier orchestration request (a node request names its own in
``SlotSync.orchestration``) are dropped when one of a later request completes: its driver had its end before it
started another (a Graph/Swarm runs one invocation at a time), so it never sends them again.

**Digest.** :func:`conversation_digest` hashes what ``reset_on_revisit``, a session restore or a user's edit
changes (messages, agent state, interrupt state): the node runner compares its copy's digest with the one taken
when the copy last matched the slot, and sends its snapshot along only when they differ. Equal digests mean
equal content; unequal ones (a dict built in another key order) only cost a restore that changes nothing. The
messages are hashed as a chain (:class:`MessagesDigest`), so a delta's messages extend the digest without
hashing the history again: a node's history is hashed once per invocation, at its first request. The host takes
the same digest of a snapshot it is sent (:func:`snapshot_digest`) as the copy a kept run started from.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pickle
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray_harness.agent.snapshot import AgentSnapshot, SnapshotDelta

__all__ = ("DEFAULT_SLOT_IDLE_TIMEOUT", "KEPT_RUNS", "SLOT_IDLE_TIMEOUT_ENV", "CompletedRun", "MessagesDigest",
           "RunBaseline", "SlotBook", "SlotEntry", "conversation_digest", "node_state", "slot_idle_timeout", "slot_key",
           "snapshot_digest")

KEPT_RUNS = 8
"""Completed runs a slot keeps as sent, for re-sends after an orchestration host's loss."""

SLOT_IDLE_TIMEOUT_ENV = "RAY_HARNESS_SLOT_IDLE_TIMEOUT"
DEFAULT_SLOT_IDLE_TIMEOUT = 600.0
"""Seconds a resident node slot may stay unused before its host drops it."""


def slot_idle_timeout(value: str | None = None) -> float:
    """The idle timeout in seconds (``value``, else the environment variable, else the default); 0: none.

    Raises:
        ValueError: not a non-negative number (names the variable).
    """
    raw = os.environ.get(SLOT_IDLE_TIMEOUT_ENV) if value is None else value
    if raw is None or raw.strip() == "":
        return DEFAULT_SLOT_IDLE_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError(f"{SLOT_IDLE_TIMEOUT_ENV} must be a number of seconds >= 0, got {raw!r}") from None
    if seconds < 0 or seconds != seconds:
        raise ValueError(f"{SLOT_IDLE_TIMEOUT_ENV} must be a number of seconds >= 0, got {raw!r}")
    return seconds


def slot_key(uid: str, node_id: str) -> str:
    """The resident key of node ``node_id`` of the node runner ``uid``."""
    return f"{uid}/{node_id}"


@dataclass
class SlotEntry:
    """One slot's bookkeeping (see the module docstring)."""

    revision: int = 0
    last_used: float = 0.0
    active: int = 0
    builds: int = 1
    restores: int = 0
    runs: int = 0
    deltas: int = 0
    """Runs whose state went back as a delta (the others: as the full snapshot, counted in ``snapshots``)."""
    snapshots: int = 0
    runs_sent: OrderedDict[str, CompletedRun] = field(default_factory=OrderedDict)
    """The latest orchestration request's completed runs (at most :data:`KEPT_RUNS`) by invocation id, oldest first
    (see "Re-sent runs")."""


@dataclass(frozen=True)
class CompletedRun:
    """A completed run of a slot as it was sent: what a re-send of it gets (see "Re-sent runs")."""

    start: int | str
    """The caller's copy the run started from: the slot revision it matched, or the digest of the snapshot it sent
    (a changed copy)."""
    items: tuple[Any, ...]
    """Its event items and, last, its result item (with the run's state and revision)."""
    orchestration: str | None = None
    """The orchestration request it was part of (``SlotSync.orchestration``; ``None``: a run of its own)."""


class SlotBook:
    """Revisions, use and idle expiry of a host's node slots, by key.

    Args:
        clock: Monotonic seconds (a test passes a fake one).

    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[str, SlotEntry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def open(self, key: str) -> SlotEntry:
        """Start keeping ``key`` (revision 0: its agent was just built from the caller's copy)."""
        entry = self._entries[key] = SlotEntry(last_used=self._clock())
        return entry

    def get(self, key: str) -> SlotEntry | None:
        """The entry of ``key``, if kept."""
        return self._entries.get(key)

    def revision(self, key: str) -> int:
        """The revision of ``key`` (-1 when not kept)."""
        entry = self._entries.get(key)
        return -1 if entry is None else entry.revision

    def enter(self, key: str) -> None:
        """A request for ``key`` arrived (it is not idle until :meth:`leave`)."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.active += 1
            entry.last_used = self._clock()

    def leave(self, key: str) -> None:
        """A request for ``key`` ended."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.active = max(0, entry.active - 1)
            entry.last_used = self._clock()

    def started(self, key: str, *, restored: bool) -> int:
        """A run of ``key`` starts (after restoring a snapshot when ``restored``); return the new revision."""
        entry = self._entries[key]
        entry.revision += 1
        entry.runs += 1
        if restored:
            entry.restores += 1
        return entry.revision

    def completed(self, key: str, invocation_id: str, run: CompletedRun) -> None:
        """The run ``invocation_id`` of ``key`` ended with a result; keep what it sent (see "Re-sent runs")."""
        entry = self._entries.get(key)
        if entry is None:
            return
        kept = entry.runs_sent
        for earlier in [run_id for run_id, other in kept.items()
                        if run.orchestration is None or other.orchestration != run.orchestration]:
            del kept[earlier]
        kept[invocation_id] = run
        kept.move_to_end(invocation_id)
        while len(kept) > KEPT_RUNS:
            kept.popitem(last=False)

    def completed_run(self, key: str, invocation_id: str, start: int | str | None) -> CompletedRun | None:
        """The kept run ``invocation_id`` of ``key`` when it started from the copy ``start`` (a re-send), else None."""
        entry = self._entries.get(key)
        run = None if entry is None or start is None else entry.runs_sent.get(invocation_id)
        return run if run is not None and run.start == start else None

    def sent(self, key: str, state: Any) -> None:
        """A run of ``key`` sends its state back: count a delta or a full snapshot."""
        from ray_harness.agent.snapshot import SnapshotDelta

        entry = self._entries.get(key)
        if entry is None:
            return
        if isinstance(state, SnapshotDelta):
            entry.deltas += 1
        else:
            entry.snapshots += 1

    def drop(self, key: str) -> bool:
        """Forget ``key``; whether it was kept."""
        return self._entries.pop(key, None) is not None

    def with_prefix(self, prefixes: Iterable[str]) -> list[str]:
        """The kept keys starting with any of ``prefixes``."""
        wanted = tuple(prefixes)
        return [key for key in self._entries if wanted and key.startswith(wanted)]

    def expired(self, timeout: float, busy: Callable[[str], bool] = lambda key: False) -> list[str]:
        """The keys idle for ``timeout`` seconds or more, with no request in flight and not ``busy``; none for 0."""
        if timeout <= 0:
            return []
        now = self._clock()
        return [key for key, entry in self._entries.items()
                if entry.active == 0 and now - entry.last_used >= timeout and not busy(key)]


def _encode(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"__bytes__": base64.b64encode(bytes(value)).decode("ascii")}
    return {"__repr__": repr(value)}  # not JSON: an object's repr may differ between copies (a re-sync, no harm)


def _json(value: Any) -> bytes:
    text = json.dumps(value, default=_encode, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def _message_bytes(message: Any) -> bytes:
    """What a message contributes to a digest: its pickle (C, ≈3× faster than its JSON for a long history).

    Equal bytes mean equal content; equal content may still pickle apart (key order, objects shared differently
    inside it), which costs a re-sync, no harm. A message holding an object that does not pickle gives its JSON.
    """
    try:
        return pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    except Exception:
        return b"json:" + _json(message)


class MessagesDigest:
    """A running digest of a message list: :meth:`extend` hashes appended messages only.

    ``count`` is how many messages it covers. Lives in one process (a hash object does not pickle).
    """

    __slots__ = ("_hash", "count")

    def __init__(self, messages: Iterable[Any] = ()) -> None:
        self._hash = hashlib.blake2b(digest_size=16)
        self.count = 0
        self.extend(messages)

    def extend(self, messages: Iterable[Any]) -> None:
        """Cover ``messages`` too (appended after those covered so far).

        What is hashed is each message's own pickle (:func:`_message_bytes`), one after the other: a pickle
        delimits itself, so the digest of a list is the same whether it was covered at once or message by message.
        """
        for message in messages:
            self._hash.update(_message_bytes(message))
            self.count += 1

    def hexdigest(self) -> str:
        """The digest of the messages covered so far."""
        return self._hash.hexdigest()


def conversation_digest(agent: Any, messages: MessagesDigest | None = None) -> str:
    """A digest of the agent's messages, agent state and interrupt state (see the module docstring).

    ``messages``: the running digest of the agent's messages, when the caller keeps one (used when it covers as
    many messages as the agent has; else the messages are hashed here).
    """
    history = agent.messages
    if messages is not None and messages.count == len(history):
        count, hexdigest = messages.count, messages.hexdigest()
    else:
        count, hexdigest = len(history), _history_digest(history)
    return _digest(count, hexdigest, agent.state.to_dict(), agent.interrupt_state.to_dict())


def snapshot_digest(snapshot: AgentSnapshot) -> str:
    """:func:`conversation_digest` of the agent ``snapshot`` holds."""
    history = snapshot.messages
    return _digest(len(history), _history_digest(history), snapshot.state, snapshot.interrupt_state)


def _history_digest(history: list[Any]) -> str:
    # What MessagesDigest(history) holds, hashed in one piece.
    return hashlib.blake2b(b"".join([_message_bytes(message) for message in history]), digest_size=16).hexdigest()


def _digest(count: int, history: str, state: dict[str, Any], interrupt_state: dict[str, Any]) -> str:
    return hashlib.blake2b(_json([count, history, state, interrupt_state]), digest_size=16).hexdigest()


class RunBaseline:
    """A slot's messages when a run started: tells whether the run only appended (see the module docstring)."""

    __slots__ = ("_messages",)

    def __init__(self, messages: list[Any]) -> None:
        self._messages = list(messages)  # the message objects themselves, not copies: compared by identity

    @property
    def count(self) -> int:
        """How many messages the run started from."""
        return len(self._messages)

    @property
    def messages(self) -> list[Any]:
        """The messages the run started from (the objects themselves)."""
        return self._messages

    def only_appended(self, messages: list[Any]) -> bool:
        """Whether ``messages`` start with the very message objects the run started from, in order."""
        base = self._messages
        return len(messages) >= len(base) and all(now is then for now, then in zip(messages, base, strict=False))


def node_state(agent: Any, baseline: RunBaseline | None, *, copy: bool = True) -> AgentSnapshot | SnapshotDelta:
    """What a node run sends back: a ``SnapshotDelta`` over ``baseline`` when the run only appended.

    Else the agent's full ``AgentSnapshot`` (no baseline, or the history was trimmed or replaced). ``copy=False``:
    for a caller that pickles it at once (see :func:`~ray_harness.agent.snapshot.take_snapshot`).
    """
    from ray_harness.agent.snapshot import take_delta, take_snapshot

    if baseline is not None and baseline.only_appended(agent.messages):
        return take_delta(agent, baseline.count, copy=copy)
    return take_snapshot(agent, copy=copy)
