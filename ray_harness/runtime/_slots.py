"""Resident node slots: the host's bookkeeping of them and the digest that tells a changed copy (no Ray here).

A Graph/Swarm agent node on ``runtime="ray"`` lives in one slot of a pooled host under the key
``"<uid>/<node id>"`` (:func:`slot_key`; ``<uid>`` is its node runner's, kept through pickling). The host keeps,
per slot, a :class:`SlotBook` entry: the slot's **revision** (bumped when a run starts or a snapshot is restored
into it, so the revision a result reports names exactly the state its snapshot holds), when it was last used,
how many requests are in flight, and how often it was built, restored and run (``slot_info``).

**Idle timeout.** A slot nobody used for ``RAY_HARNESS_SLOT_IDLE_TIMEOUT`` seconds
(:data:`DEFAULT_SLOT_IDLE_TIMEOUT`: 600; ``0`` keeps slots until released) is dropped by its host, even when
its Graph/Swarm was never shut down (a driver that died). The next request for it gets an "unknown slot" answer
and ships the agent again. The host reads the variable when it starts (the driver forwards it to new hosts).

**Digest.** :func:`conversation_digest` hashes what ``reset_on_revisit``, a session restore or a user's edit
changes (messages, agent state, interrupt state): the node runner compares its copy's digest with the one taken
when the copy last matched the slot, and sends its snapshot along only when they differ. Equal digests mean
equal content; unequal ones (a dict built in another key order) only cost a restore that changes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ("DEFAULT_SLOT_IDLE_TIMEOUT", "SLOT_IDLE_TIMEOUT_ENV", "SlotBook", "SlotEntry", "conversation_digest",
           "slot_idle_timeout", "slot_key")

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


def conversation_digest(agent: Any) -> str:
    """A digest of the agent's messages, agent state and interrupt state (see the module docstring)."""
    payload = [agent.messages, agent.state.to_dict(), agent.interrupt_state.to_dict()]
    text = json.dumps(payload, default=_encode, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
