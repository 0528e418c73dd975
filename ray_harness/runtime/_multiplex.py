"""Many streams in one: the host interleaves several runs' items, the caller hands each run its own (Ray-free).

A Graph's ready batch puts several nodes on one host at once; one streamed call per node costs a Ray round trip
each (≈1 ms of both processes' CPU per call). :func:`multiplex` runs the streams of one call concurrently and
yields *groups* of tagged entries, whatever piled up while the previous group was being sent;
:class:`Demultiplexer` hands each run's entries back to that run's consumer, in order.

An entry is ``(run_id, kind, payload)``: :data:`ITEM` (one item of the run's stream), :data:`END` (its stream
ended; payload ``None``) or :data:`ERROR` (its stream raised; payload the exception, encoded by the sender).
"""

from __future__ import annotations

import asyncio
import collections
import copy
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from typing import Any

__all__ = ("END", "ERROR", "ITEM", "Demultiplexer", "Entry", "fresh_error", "multiplex")

ITEM, END, ERROR = 0, 1, 2
Entry = tuple[str, int, Any]
"""``(run_id, kind, payload)``: one run's item, end or error."""


async def multiplex(streams: Mapping[str, AsyncIterator[Any]], encode_error: Callable[[BaseException], Any]
                    ) -> AsyncGenerator[list[Entry], None]:
    """Run ``streams`` concurrently; yield groups of their tagged entries until every stream has ended.

    Each stream ends with one ``END`` or ``ERROR`` entry (``encode_error`` makes the payload: it must cross the
    wire even when the exception itself would not). Closing the generator early cancels the streams still going.
    """
    piled: collections.deque[Entry] = collections.deque()
    wakeup = asyncio.Event()

    async def pump(run_id: str, stream: AsyncIterator[Any]) -> None:
        end: Entry | None = None
        try:
            async for item in stream:
                piled.append((run_id, ITEM, item))
                wakeup.set()
            end = (run_id, END, None)
        except Exception as error:
            end = (run_id, ERROR, encode_error(error))
        except asyncio.CancelledError as error:  # cancelled inside the run (not by closing this generator)
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            end = (run_id, ERROR, encode_error(error))
        finally:  # every stream ends once, even one stopped by an exception that is not an error (SystemExit)
            piled.append(end or (run_id, ERROR, encode_error(RuntimeError(f"run {run_id!r} stopped"))))
            wakeup.set()

    tasks = [asyncio.ensure_future(pump(run_id, stream)) for run_id, stream in streams.items()]
    try:
        open_runs = len(tasks)
        while open_runs:
            await wakeup.wait()
            wakeup.clear()
            group = list(piled)
            piled.clear()
            open_runs -= sum(kind != ITEM for _, kind, _ in group)
            yield group
    finally:
        for task in tasks:
            task.cancel()


class Demultiplexer:
    """Hands each run of a multiplexed stream its own entries, as an async generator per run.

    Args:
        run_ids: The runs of the stream.
        abandoned: Called with a run's id when its consumer stops before its end (e.g. to cancel that run).
        decode_error: Turns an ``ERROR`` payload back into the exception to raise in the run's consumer.

    """

    def __init__(self, run_ids: Iterable[str], abandoned: Callable[[str], Any],
                 decode_error: Callable[[Any], BaseException]) -> None:
        self._queues: dict[str, asyncio.Queue[Entry]] = {run_id: asyncio.Queue() for run_id in run_ids}
        self._open = set(self._queues)  # runs whose stream has not ended yet
        self._abandoned = abandoned
        self._decode = decode_error
        self._live = set(self._queues)  # runs whose consumer has not finished or stopped
        self.on_idle: Callable[[], Any] | None = None
        """Called once no consumer is left (the stream may be stopped)."""

    def ends_all(self, group: list[Entry]) -> bool:
        """Whether ``group`` ends every stream still open (the multiplexed stream's last group)."""
        return self._open <= {run_id for run_id, kind, _ in group if kind != ITEM}

    def dispatch(self, group: list[Entry]) -> None:
        """Hand a group's entries to their runs (runs unknown or already ended are skipped)."""
        for entry in group:
            run_id, kind, _ = entry
            if run_id in self._open:
                if kind != ITEM:
                    self._open.discard(run_id)
                self._queues[run_id].put_nowait(entry)

    def fail(self, error: BaseException) -> None:
        """End every stream still open with ``error`` (a copy each: one object raised in many tasks piles up tracebacks)."""
        for run_id in list(self._open):
            self._open.discard(run_id)
            self._queues[run_id].put_nowait((run_id, ERROR, fresh_error(error)))

    @property
    def open(self) -> frozenset[str]:
        """The runs whose stream has not ended yet."""
        return frozenset(self._open)

    async def items(self, run_id: str) -> AsyncGenerator[Any, None]:
        """The items of run ``run_id``'s stream, in order; raises its error."""
        queue, finished = self._queues[run_id], False
        try:
            while True:
                _, kind, payload = await queue.get()
                if kind == ITEM:
                    yield payload
                    continue
                finished = True
                if kind == ERROR:
                    raise payload if isinstance(payload, BaseException) else self._decode(payload)
                return
        finally:
            self.leave(run_id, finished=finished)

    def leave(self, run_id: str, *, finished: bool = False) -> None:
        """Run ``run_id``'s consumer is gone (before its end unless ``finished``: its run is abandoned)."""
        if run_id not in self._live:
            return
        self._live.discard(run_id)
        if not finished and run_id in self._open:
            self._open.discard(run_id)
            self._abandoned(run_id)
        if not self._live and self.on_idle is not None:
            self.on_idle()


def fresh_error(error: BaseException) -> BaseException:
    """Copy ``error`` for one run: one exception object raised in many tasks would pile up their tracebacks."""
    try:
        clone = copy.copy(error)
    except Exception:
        return error
    clone.__cause__ = error.__cause__
    return clone
