"""``ExtractionCoordinator``: buffers the agent's messages and saves each store's unsaved ones in the background.

Per store it keeps a high-water mark (the sequence number of the last message saved), so a message reaches a store
at most once per success; one store's saves run one after another (a chain of tasks), different stores' side by
side. A failed save rolls the mark back, so the batch is retried with the next one; a store that keeps failing
backs off and is only probed now and then.

Tasks are never pickled: an agent shipped to a Ray host takes the buffer and the marks, not the saves in flight
(the sync entry point flushes before it returns, so an idle agent has none).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ray_harness.memory.extraction.types import ExtractorContext, MemoryMessageFilter
from ray_harness.memory.types import AddMessagesContext, MemoryStore
from ray_harness.types.content import Message
from ray_harness.types.exceptions import AggregateMemoryError

if TYPE_CHECKING:
    from ray_harness.memory.extraction.resolve_extraction_config import ResolvedExtractionConfig
    from ray_harness.models.base import Model

__all__ = ("BACKOFF_PROBE_INTERVAL", "SAVE_FAILURES_BEFORE_BACKOFF", "ExtractionBinding", "ExtractionCoordinator")

logger = logging.getLogger(__name__)

SAVE_FAILURES_BEFORE_BACKOFF = 10
"""Consecutive failed saves after which a store backs off."""

BACKOFF_PROBE_INTERVAL = 3
"""A backed-off store tries one save request in this many."""


@dataclass
class ExtractionBinding:
    """A store and its resolved extraction config."""

    store: MemoryStore
    config: ResolvedExtractionConfig


@dataclass
class _Buffered:
    seq: int
    message: Message


class ExtractionCoordinator:
    """Saves the recorded messages into the extraction stores, in the background.

    Args:
        bindings: The stores with extraction and their configs (store names are unique: they key the state).
        default_model: The model of extractors without their own (``agent.aux_model``).
    """

    def __init__(self, bindings: list[ExtractionBinding], default_model: Model | None) -> None:
        self._bindings = {binding.store.name: binding for binding in bindings}
        self._default_model = default_model
        self._pending: list[_Buffered] = []
        self._next_seq = 0
        self._marks: dict[str, int] = dict.fromkeys(self._bindings, -1)  # -1: nothing saved yet
        self._failures: dict[str, int] = {}
        self._probes: dict[str, int] = {}
        self._chains: dict[str, asyncio.Task[None]] = {}  # each store's latest save: the next one waits for it
        self._background: set[asyncio.Task[None]] = set()  # held so the loop does not drop them mid-flight

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_chains"], state["_background"] = {}, set()  # tasks belong to this process's loop
        return state

    @property
    def pending(self) -> int:
        """Saves started and not finished (for tests and shutdown checks)."""
        return sum(1 for task in self._chains.values() if not task.done())

    def record(self, message: Message) -> None:
        """Buffer ``message`` (every message the agent adds)."""
        self._pending.append(_Buffered(self._next_seq, message))
        self._next_seq += 1

    def on_message_added(self, event: Any) -> None:
        """The ``MessageAddedEvent`` hook: :meth:`record` the event's message."""
        self.record(event.message)

    def schedule(self, store: MemoryStore) -> None:
        """Start saving ``store``'s unsaved messages and return at once (skipped while it backs off, but probes)."""
        if not self._should_attempt(store.name):
            return
        task = self._enqueue(store.name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def flush(self) -> None:
        """Save every store's remaining messages and wait for all saves, those started meanwhile too; never raises.

        Backoff does not apply: every store gets one more try.
        """
        for name in self._bindings:
            self._enqueue(name)
        await self.settle()

    async def settle(self) -> None:
        """Wait for the saves already started (and those they lead to); start none. Never raises."""
        loop = asyncio.get_running_loop()
        while True:
            waiting = [task for task in self._chains.values() if not task.done() and task.get_loop() is loop]
            if not waiting:
                return
            await asyncio.wait(waiting)

    def _enqueue(self, name: str) -> asyncio.Task[None]:
        task = asyncio.ensure_future(self._run_after(name, self._chains.get(name)))
        self._chains[name] = task
        return task

    async def _run_after(self, name: str, previous: asyncio.Task[None] | None) -> None:
        # A previous save of a loop that has ended (one sync call each) is over or was cancelled: nothing to wait.
        if previous is not None and not previous.done() and previous.get_loop() is asyncio.get_running_loop():
            await asyncio.wait([previous])  # its own failure is its own: logged there, not raised here
        await self._save(name)

    def _should_attempt(self, name: str) -> bool:
        if self._failures.get(name, 0) < SAVE_FAILURES_BEFORE_BACKOFF:
            return True
        self._probes[name] = self._probes.get(name, 0) + 1
        return self._probes[name] % BACKOFF_PROBE_INTERVAL == 0

    async def _save(self, name: str) -> None:
        binding = self._bindings[name]
        mark = self._marks[name]
        fresh = [item for item in self._pending if item.seq > mark]
        if not fresh:
            return
        self._marks[name] = fresh[-1].seq  # claimed now, so a save queued behind this one skips them
        batch = _filtered(fresh, binding.config.filter)
        try:
            if batch:
                await self._write(binding, batch)
                self._failures[name] = 0
                self._probes.pop(name, None)
        except BaseException as error:
            self._marks[name] = mark  # the batch is retried with the next save
            if not isinstance(error, Exception):
                raise  # cancelled (the loop ends): the messages stay unsaved, for the next save
            self._failed(name, error)
        finally:
            self._trim()

    async def _write(self, binding: ExtractionBinding, batch: list[_Buffered]) -> int:
        store, extractor = binding.store, binding.config.extractor
        messages = [item.message for item in batch]
        if extractor is None:
            await store.add_messages(messages, AddMessagesContext(sequence_numbers=[item.seq for item in batch]))
            return len(messages)
        entries = await extractor.extract(messages, ExtractorContext(default_model=self._default_model))
        outcomes = await asyncio.gather(*(store.add(entry.content, entry.metadata) for entry in entries),
                                        return_exceptions=True)
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if failures:
            raise AggregateMemoryError(f"failed to write {len(failures)} of {len(entries)} extracted entries",
                                       failures)
        return len(entries)

    def _failed(self, name: str, error: Exception) -> None:
        failures = self._failures.get(name, 0) + 1
        self._failures[name] = failures
        if failures >= SAVE_FAILURES_BEFORE_BACKOFF:
            logger.error("store=<%s>, failures=<%s>, reason=<%s> | memory store save failing repeatedly",
                         name, failures, error)
        else:
            logger.warning("store=<%s>, reason=<%s> | memory extraction failed", name, error)

    def _trim(self) -> None:
        """Drop the messages every store has saved (a store stuck failing keeps them buffered)."""
        lowest = min(self._marks.values())
        self._pending = [item for item in self._pending if item.seq > lowest]


def _filtered(batch: list[_Buffered], message_filter: MemoryMessageFilter) -> list[_Buffered]:
    """New messages without the excluded blocks; a message left with none is dropped (its number with it)."""
    exclude = set(message_filter.exclude)
    kept: list[_Buffered] = []
    for item in batch:
        content = [block for block in item.message["content"] if next(iter(block), "") not in exclude]
        if content:
            kept.append(_Buffered(item.seq, {**item.message, "content": content}))
    return kept
