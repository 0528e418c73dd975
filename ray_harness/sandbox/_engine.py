"""The execution driver every backend shares.

A backend starts a command and hands back a :class:`RawExecution`: raw
``(stream, bytes)`` output, an exit code, and a way to kill the command's
process tree. :func:`drive` turns it into the public stream of
``StreamChunk`` items and one final ``ExecutionResult``, and owns the policy:

* the timeout is wall-clock from spawn (steady output does not extend it); a
  watchdog task kills the tree even while the consumer is busy elsewhere, then
  ``SandboxTimeoutError`` carries the output seen so far;
* a consumer that cancels or closes the stream early kills the tree;
* retained output is bounded (:class:`RetainedOutput`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Final, TypeVar

from ray_harness.sandbox._output import RetainedOutput
from ray_harness.sandbox.errors import SandboxTimeoutError
from ray_harness.sandbox.types import ExecutionResult, StreamChunk, StreamType

__all__ = (
    "QueuedExecution",
    "RawExecution",
    "ThreadedExecution",
    "check_timeout",
    "drive",
    "signal_exit_code",
    "start_in_thread",
)

logger = logging.getLogger(__name__)

Output = tuple[StreamType, bytes]
T = TypeVar("T")

KILL_GRACE_S: Final = 2.0
"""After a timeout kill, how long to wait for the pipes to close before giving up on them."""

_EOF: Final = object()
_ABANDONED: Final = object()


def check_timeout(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    return float(timeout)


def signal_exit_code(returncode: int) -> int:
    """Map a ``-N`` "killed by signal N" return code to the shell convention ``128 + N``."""
    return 128 - returncode if returncode < 0 else returncode


async def start_in_thread(start: Callable[[], T], undo: Callable[[T], Awaitable[None]]) -> T:
    """Run a blocking ``start`` (it starts a command) in a thread; a cancel meanwhile still stops the command.

    The thread cannot be interrupted: after a cancel it goes on and starts the command all the same, with
    nobody left to supervise it. So a cancel waits for the thread, hands what it started to ``undo`` (which
    kills it), and only then propagates. Further cancels during that wait are absorbed.
    """
    started = asyncio.ensure_future(asyncio.to_thread(start))
    try:
        return await asyncio.shield(started)
    except asyncio.CancelledError:
        cleanup = asyncio.ensure_future(_undo_when_started(started, undo))
        while not cleanup.done():
            try:
                await asyncio.wait({cleanup})
            except asyncio.CancelledError:
                continue
        raise


async def _undo_when_started(started: asyncio.Future[T], undo: Callable[[T], Awaitable[None]]) -> None:
    try:
        value = await started
    except Exception:  # nothing was started
        return
    try:
        await undo(value)
    except Exception:
        logger.warning("stopping a command whose start was cancelled failed", exc_info=True)


class RawExecution(ABC):
    """A started command: raw output, exit code, kill."""

    started_at: float
    """``time.monotonic()`` at spawn: the timeout counts from here."""

    @abstractmethod
    async def next_output(self) -> Output | None:
        """The next piece of output, or ``None`` once both streams are at EOF (or abandoned)."""

    @abstractmethod
    async def wait(self) -> int:
        """The exit code, after the output has ended."""

    @abstractmethod
    async def kill(self) -> None:
        """Kill the command's whole process tree. Idempotent; never raises for a dead process."""

    @abstractmethod
    def abandon(self) -> None:
        """Make ``next_output`` return ``None`` now (a pipe may be held open by an escaped process)."""

    async def close(self) -> None:
        """Release transport resources."""


class QueuedExecution(RawExecution):
    """Output delivered through a bounded queue (the bound back-pressures a fast producer)."""

    def __init__(self, queue_size: int = 64) -> None:
        self.started_at = time.monotonic()
        self._queue: asyncio.Queue[object] = asyncio.Queue(queue_size)
        self._open_streams = 2

    async def next_output(self) -> Output | None:
        while self._open_streams > 0:
            item = await self._queue.get()
            if item is _ABANDONED:
                self._open_streams = 0
            elif item is _EOF:
                self._open_streams -= 1
            else:
                return item  # type: ignore[return-value]
        return None

    async def put_output(self, stream: StreamType, data: bytes) -> None:
        await self._queue.put((stream, data))

    async def put_eof(self) -> None:
        """One stream ended (call once per stream)."""
        await self._queue.put(_EOF)

    def abandon(self) -> None:
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(_ABANDONED)


class ThreadedExecution(QueuedExecution):
    """Output read by a blocking loop in a daemon thread (docker SDK sockets, paramiko channels).

    A dedicated thread, not the default executor: a command may stream for
    minutes, and a few of them must not starve ``asyncio.to_thread`` users.
    """

    def __init__(self) -> None:
        super().__init__()
        self._loop = asyncio.get_running_loop()
        self._stop = threading.Event()
        self.reader_error: BaseException | None = None

    def start_reader(self, name: str) -> None:
        threading.Thread(target=self._reader_main, name=name, daemon=True).start()

    @abstractmethod
    def read_blocking(self) -> None:
        """Read the transport until it ends, calling :meth:`emit`; return early when ``stopping``."""

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def emit(self, stream: StreamType, data: bytes) -> bool:
        """Hand output to the event loop (blocking while the queue is full). ``False``: stop reading."""
        return self._put((stream, data))

    async def close(self) -> None:
        self._stop.set()

    def _reader_main(self) -> None:
        try:
            self.read_blocking()
        except Exception as error:  # the transport broke: wait() reports it
            logger.debug("sandbox output reader failed", exc_info=True)
            self.reader_error = error
        finally:
            self._put(_EOF)
            self._put(_EOF)

    def _put(self, item: object) -> bool:
        coro = self._queue.put(item)
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            coro.close()
            return False
        while True:
            try:
                future.result(timeout=0.2)
                return True
            except concurrent.futures.TimeoutError:
                if self._stop.is_set():
                    future.cancel()
                    return False
            except concurrent.futures.CancelledError:
                return False


class _Deadline:
    def __init__(self) -> None:
        self.expired = False


async def _watchdog(raw: RawExecution, timeout: float, state: _Deadline) -> None:
    await asyncio.sleep(max(0.0, raw.started_at + timeout - time.monotonic()))
    state.expired = True
    await raw.kill()
    await asyncio.sleep(KILL_GRACE_S)
    raw.abandon()


async def drive(
    raw: RawExecution, *, timeout: float | None, max_output_chars: int | None
) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
    """Stream ``raw``'s output as chunks, then yield its ``ExecutionResult`` (see the module docstring)."""
    buffers: dict[StreamType, RetainedOutput] = {
        "stdout": RetainedOutput(max_output_chars),
        "stderr": RetainedOutput(max_output_chars),
    }
    deadline = _Deadline()
    watchdog = asyncio.create_task(_watchdog(raw, timeout, deadline)) if timeout is not None else None
    finished = False
    try:
        while (item := await raw.next_output()) is not None:
            stream, data = item
            text = buffers[stream].feed(data)
            if text:
                yield StreamChunk(text, stream)
        for stream, buffer in buffers.items():
            text = buffer.feed(b"", final=True)
            if text:
                yield StreamChunk(text, stream)
        if not deadline.expired:
            exit_code = await raw.wait()
        if deadline.expired:
            raise SandboxTimeoutError(timeout, buffers["stdout"].value(), buffers["stderr"].value())
        finished = True
        yield ExecutionResult(
            exit_code=exit_code,
            stdout=buffers["stdout"].value(),
            stderr=buffers["stderr"].value(),
            truncated=buffers["stdout"].truncated or buffers["stderr"].truncated,
        )
    finally:
        if watchdog is not None:
            watchdog.cancel()
        try:
            if not finished:
                # Cancelled, closed early, timed out or failed: nothing may outlive the stream.
                await raw.kill()
        finally:
            await raw.close()
