"""Worker threads for sync tools: ``await run_in_tool_thread(func, **kwargs)``.

Why not ``asyncio.to_thread``: the loop's default executor has ``min(32, cpus + 4)`` workers — six on a
2-core host, so a host running hundreds of agents could run only six blocking tools at once — and its
``concurrent.futures`` hop costs ≈30–50 µs more per call than a bare ``SimpleQueue`` handing work to an
idle thread (P1's tool round trip). Threads start on demand, up to :data:`MAX_TOOL_THREADS`, and stay
for the life of the process; the caller's context variables travel with the call, as with
``asyncio.to_thread``. A caller that is cancelled stops waiting; the function itself cannot be stopped
(tools read ``ToolContext.cancel_signal`` for that).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ("MAX_TOOL_THREADS", "run_in_tool_thread")

MAX_TOOL_THREADS = 256
"""Upper bound on sync tools running at once in one process; further calls wait for a free thread."""

_Work = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[..., Any],
              dict[str, Any]]


class _ToolThreads:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._waiting = 0  # submitted, not yet picked up

    def submit(self, work: _Work) -> None:
        with self._lock:
            self._waiting += 1
            start = self._waiting > self._idle and self._threads < MAX_TOOL_THREADS
            if start:
                self._threads += 1
        if start:
            threading.Thread(target=self._work, name=f"ray_harness-tool-{self._threads}", daemon=True).start()
        self._queue.put(work)

    def _work(self) -> None:
        # The thread counts itself idle *before* it hands the outcome back: a caller woken by the hand-back may
        # submit again at once (a tool's next call, the next turn's tool), and must find this thread counted as
        # free, not start another one. After the hand-back it goes straight back to the queue: the hand-back's
        # wake-up byte releases the GIL, and every bytecode run after it competes with the woken loop thread for
        # the GIL, each loss a sleep and a wake-up more (≈4.5 sleeps per P1 round trip with the bookkeeping
        # after it, ≈3 with it before).
        lock, get = self._lock, self._queue.get
        with lock:
            self._idle += 1
        while True:
            loop, future, context, func, kwargs = get()
            with lock:
                self._idle -= 1
                self._waiting -= 1
            error: BaseException | None = None
            try:
                value = context.run(func, **kwargs)
            except BaseException as caught:  # handed to the awaiting task, as a thread pool would
                value, error = None, caught
            with lock:
                self._idle += 1
            _deliver(loop, future, value, error)
            del loop, future, context, func, kwargs, value, error  # do not keep the last call's objects alive

    def after_fork(self) -> None:
        # The child has none of the parent's threads.
        self.__init__()  # type: ignore[misc]


def _deliver(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], value: Any,
             error: BaseException | None) -> None:
    try:
        loop.call_soon_threadsafe(_settle, future, value, error)
    except RuntimeError:
        pass  # the loop is closed: nobody waits any more


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return  # the caller was cancelled meanwhile
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


_THREADS = _ToolThreads()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_THREADS.after_fork)


async def run_in_tool_thread(func: Callable[..., Any], /, **kwargs: Any) -> Any:
    """Run ``func(**kwargs)`` on a tool thread and return (or raise) its outcome."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    _THREADS.submit((loop, future, contextvars.copy_context(), func, kwargs))
    return await future
