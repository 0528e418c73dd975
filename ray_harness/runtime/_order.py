"""Calls of one handle run in the order the caller made them.

Ray starts an async actor's tasks as they arrive, and arrival is not submission: under load, three calls that one
handle submitted as 0, 1, 2 can start as 1, 0, 2 (Ray's "Actor Task Execution Order": async actors do not keep
submission order). An agent actor promises "calls queue in the order you made them", so every call carries a
:class:`Ticket` — its handle, its number, and the lowest number of that handle still unanswered — and the actor's
:class:`ArrivalGate` lets a call in only after every earlier call of that handle went in.

The lowest unanswered number tells a new actor where a handle's sequence starts, so the very first calls are
ordered too. A restarted actor takes the gate's positions from its journal (:meth:`ArrivalGate.positions`); one
without a journal cannot know them and admits callers it has not seen at once (:meth:`ArrivalGate.lost`). A
predecessor that never arrives (its caller died between tickets) holds the calls behind it for ``patience`` seconds
at most: a safety net for a lost message, not a timing the order depends on.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import NamedTuple

__all__ = ("ArrivalGate", "Ticket", "Tickets")


class Ticket(NamedTuple):
    caller: str
    number: int
    floor: int  # the caller's lowest number still unanswered when this one was issued


class Tickets:
    """The caller's side: numbers its calls (thread-safe) and remembers which are still unanswered."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._caller = uuid.uuid4().hex
        self._next = 0
        self._open: set[int] = set()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def submitting(self) -> Iterator[Ticket]:
        """Issue the ticket for one call, held while the call is submitted so numbers go out in order.

        A submission that raises gives its number back (nothing was sent).
        """
        with self._lock:
            number = self._next
            self._open.add(number)
            try:
                yield Ticket(self._caller, number, min(self._open))
            except BaseException:
                self._open.discard(number)
                raise
            self._next = number + 1

    def answered(self, ticket: Ticket) -> None:
        with self._lock:
            self._open.discard(ticket.number)

    def __getstate__(self) -> dict[str, object]:
        return {"copy": True}  # a copy in another process is another caller (a falsy state would skip setstate)

    def __setstate__(self, state: dict[str, object]) -> None:
        self._reset()


class ArrivalGate:
    """The actor's side (one event loop): admits each caller's tickets in number order."""

    def __init__(self, patience: float = 10.0) -> None:
        self._patience = patience
        self._next: dict[str, int] = {}
        self._waiting: dict[tuple[str, int], asyncio.Event] = {}
        self._trust_floors = True

    def positions(self) -> dict[str, int]:
        """Each caller's next number to admit (kept in the actor's journal)."""
        return dict(self._next)

    def restore(self, positions: dict[str, int]) -> None:
        self._next = dict(positions)

    def lost(self) -> None:
        """Note that the positions are gone (a restart without a journal).

        A retried call's floor is stale then, so a caller not seen since is admitted at once instead of waiting
        for calls that were answered before the restart.
        """
        self._trust_floors = False

    async def admit(self, ticket: Ticket | None) -> None:
        """Return once every earlier call of ``ticket``'s caller was admitted (at once for ``None``).

        Returns without yielding to the loop after the turn is decided, so a caller that goes on to queue on a
        FIFO lock queues there in ticket order too.
        """
        if ticket is None:
            return
        caller, number, floor = ticket
        expected = self._next.setdefault(caller, floor if self._trust_floors else number)
        if number > expected:
            turn = asyncio.Event()
            self._waiting[(caller, number)] = turn
            try:
                async with asyncio.timeout(self._patience):
                    await turn.wait()
            except TimeoutError:
                pass  # the earlier call is lost; do not hold this one forever
            finally:
                self._waiting.pop((caller, number), None)
        following = max(self._next[caller], number + 1)
        self._next[caller] = following
        waiting = self._waiting.get((caller, following))
        if waiting is not None:
            waiting.set()
