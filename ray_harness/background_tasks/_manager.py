"""The task board of one agent: records, a bounded queue, and the thread whose event loop runs the tasks.

Why a thread of the agent's own: a background task must outlive the invocation that started it (with
``wait_for_completion=False``, and ``agent(...)`` runs each call on an event loop of its own that ends with
it). The thread starts with the first task and ends when no task is queued or running, so an agent with
nothing in the background holds no thread; :meth:`TaskManager.shutdown` cancels everything and joins it.

Records are changed under one lock, from the agent's loop (submit, cancel, remove) and from the runner's
(start, settle); waiters on other loops are woken with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import math
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ray_harness.background_tasks._types import BackgroundTask, BackgroundTaskError, is_terminal, timestamp
from ray_harness.types.content import ToolResult
from ray_harness.types.exceptions import RayHarnessError

__all__ = ("BackgroundTaskNotFoundError", "Run", "TaskManager")

logger = logging.getLogger(__name__)

Run = Callable[[threading.Event], Awaitable[ToolResult]]
"""One task's work: the tool call, given the task's cancel signal."""

_RESTORED = "Background task cannot resume after restoring persisted state"  # Strands' text
_FAILED = "Background task execution failed"
_JOIN_SECONDS = 10.0  # shutdown waits this long for a task that ignores its cancellation, then leaves it


class BackgroundTaskNotFoundError(RayHarnessError, LookupError):
    """No task has this id (it never existed, or its result was delivered)."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"Background task '{task_id}' was not found")
        self.task_id = task_id

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.task_id,))


@dataclass
class _Live:
    """A task's running part: its work, its cancel signal and (once started) its asyncio task."""

    run: Run
    signal: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task[None] | None = None


class TaskManager:
    """Background tasks of one agent: at most ``max_concurrency`` run at once, each for at most ``timeout`` s."""

    def __init__(self, max_concurrency: int, timeout: float) -> None:
        self._max_concurrency = max_concurrency
        self._timeout = timeout
        self._records: dict[str, BackgroundTask] = {}
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[str, _Live] = {}
        self._queue: list[str] = []
        self._running = 0
        self._thread: threading.Thread | None = None  # the latest runner (kept to join it)
        self._accepting = False  # a runner thread was started and has not decided to end yet
        self._loop: asyncio.AbstractEventLoop | None = None  # set while the runner accepts work
        self._wake: asyncio.Event | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    # -- pickling: the records travel, the running work does not ---------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            records = copy.deepcopy(self._records)
        for record in records.values():
            if not is_terminal(record["status"]):
                record["status"], record["last_updated_at"] = "failed", timestamp()
                record["error"] = {"type": "execution_error", "message": _RESTORED}
        return {"_max_concurrency": self._max_concurrency, "_timeout": self._timeout, "_records": records}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    # -- reading ---------------------------------------------------------------------------------------

    def snapshots(self) -> list[BackgroundTask]:
        """Copies of every tracked task, oldest first."""
        with self._lock:
            return copy.deepcopy(list(self._records.values()))

    def get(self, task_id: str) -> BackgroundTask:
        """A copy of one task.

        Raises:
            BackgroundTaskNotFoundError: No tracked task has this id.
        """
        with self._lock:
            return copy.deepcopy(self._require(task_id))

    def has_unfinished(self) -> bool:
        """Whether a task is queued or running."""
        with self._lock:
            return any(not is_terminal(record["status"]) for record in self._records.values())

    @property
    def thread(self) -> threading.Thread | None:
        """The runner thread while it is alive (None when none runs)."""
        thread = self._thread
        return thread if thread is not None and thread.is_alive() else None

    # -- changing --------------------------------------------------------------------------------------

    def submit(self, tool_use_id: str, tool_name: str, run: Run) -> BackgroundTask:
        """Queue ``run`` as a new task (starting the runner thread if none runs) and return its record."""
        now = timestamp()
        task_id = str(uuid.uuid4())
        record: BackgroundTask = {"task_id": task_id, "tool_use_id": tool_use_id, "tool_name": tool_name,
                                  "status": "queued", "created_at": now, "last_updated_at": now}
        with self._lock:
            self._records[task_id] = record
            self._live[task_id] = _Live(run)
            self._queue.append(task_id)
            self._poke()
            return copy.deepcopy(record)

    def cancel(self, task_id: str) -> BackgroundTask:
        """Cancel a queued or running task (a finished one stays as it is); its record after.

        Raises:
            BackgroundTaskNotFoundError: No tracked task has this id.
        """
        with self._lock:
            record = self._require(task_id)
            if not is_terminal(record["status"]):
                self._cancel(task_id, record)
            return copy.deepcopy(record)

    def cancel_all(self) -> None:
        """Cancel every queued or running task (thread-safe; a no-op when there is none)."""
        with self._lock:
            for task_id, record in self._records.items():
                if not is_terminal(record["status"]):
                    self._cancel(task_id, record)

    def remove(self, task_ids: list[str]) -> None:
        """Forget finished tasks (their results were delivered); unknown or unfinished ids are left alone."""
        with self._lock:
            for task_id in task_ids:
                record = self._records.get(task_id)
                if record is not None and is_terminal(record["status"]):
                    del self._records[task_id]

    def shutdown(self) -> None:
        """Cancel every task and wait for the runner thread to end (from any thread but the runner's)."""
        self.cancel_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_SECONDS)
            if thread.is_alive():
                logger.warning("background task runner did not stop within %ss: a task ignores its cancellation",
                               _JOIN_SECONDS)

    async def wait_until_settled(self, stop: threading.Event) -> None:
        """Wait until no task is queued or running, or ``stop`` is set (checked at least every 0.1 s)."""
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            waiter: asyncio.Future[None] = loop.create_future()
            with self._lock:
                if all(is_terminal(record["status"]) for record in self._records.values()):
                    return
                self._waiters.append((loop, waiter))
            try:
                # The poll is for a caller's cancel_signal set directly: agent.cancel() settles the tasks itself.
                await asyncio.wait_for(asyncio.shield(waiter), 0.1)
            except TimeoutError:
                pass
            finally:
                with self._lock, contextlib.suppress(ValueError):
                    self._waiters.remove((loop, waiter))

    # -- internals (called with the lock held) ---------------------------------------------------------

    def _require(self, task_id: str) -> BackgroundTask:
        record = self._records.get(task_id)
        if record is None:
            raise BackgroundTaskNotFoundError(task_id)
        return record

    def _cancel(self, task_id: str, record: BackgroundTask) -> None:
        self._finish(task_id, record, "cancelled", None)
        live = self._live.pop(task_id, None)
        if task_id in self._queue:
            self._queue.remove(task_id)
        if live is None:
            return
        live.signal.set()
        loop = self._loop
        if live.task is not None and loop is not None:
            loop.call_soon_threadsafe(live.task.cancel)

    def _finish(self, task_id: str, record: BackgroundTask, status: Any, error: BackgroundTaskError | None,
                result: ToolResult | None = None) -> None:
        record["status"] = status
        record["last_updated_at"] = timestamp()
        if error is not None:
            record["error"] = error
        if result is not None:
            record["result"] = {"content": copy.deepcopy(list(result.get("content", [])))}
        for loop, waiter in self._waiters:
            with contextlib.suppress(RuntimeError):  # that loop closed: nobody waits there any more
                loop.call_soon_threadsafe(_wake, waiter)
        self._waiters.clear()

    def _poke(self) -> None:
        """New work: start the runner thread, or wake the running one."""
        if not self._accepting:
            self._accepting = True
            self._thread = threading.Thread(target=self._run_thread, name="ray_harness-background-tasks",
                                            daemon=True)
            self._thread.start()
        elif self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    # -- the runner thread -----------------------------------------------------------------------------

    def _run_thread(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        """Start queued tasks while there is room; end when nothing is queued or running."""
        wake = asyncio.Event()
        with self._lock:
            self._loop, self._wake = asyncio.get_running_loop(), wake
        while True:
            with self._lock:
                while self._queue and self._running < self._max_concurrency:
                    self._start(self._queue.pop(0), wake)
                if not self._queue and self._running == 0:
                    self._loop = self._wake = None
                    self._accepting = False  # the next submit starts a new runner
                    return
                wake.clear()
            await wake.wait()

    def _start(self, task_id: str, wake: asyncio.Event) -> None:
        live = self._live[task_id]
        record = self._records[task_id]
        record["status"], record["last_updated_at"] = "working", timestamp()
        self._running += 1
        live.task = asyncio.get_running_loop().create_task(self._execute(task_id, live))

        def done(_: asyncio.Task[None]) -> None:
            with self._lock:
                self._running -= 1
            wake.set()

        live.task.add_done_callback(done)

    async def _execute(self, task_id: str, live: _Live) -> None:
        status, error, result = "completed", None, None
        try:
            async with asyncio.timeout(self._timeout if math.isfinite(self._timeout) else None) as limit:
                result = await live.run(live.signal)
        except asyncio.CancelledError:
            return  # cancelled: the record says so already
        except TimeoutError as timed_out:
            if not limit.expired():
                status, error = "failed", _execution_error(timed_out)
            else:
                live.signal.set()  # a sync tool still running in its thread may stop on it
                status, error = "failed", {"type": "timeout", "message": f"Timed out after {self._timeout}s"}
        except Exception as failure:
            status, error = "failed", _execution_error(failure)
        else:
            if result.get("status") != "success":
                status, error = "failed", {"type": "tool_error", "message": _error_text(result)}
        with self._lock:
            record = self._records.get(task_id)
            self._live.pop(task_id, None)
            if record is not None and record["status"] == "working":
                self._finish(task_id, record, status, error, result)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _execution_error(error: BaseException) -> BackgroundTaskError:
    return {"type": "execution_error", "message": str(error) or _FAILED}


def _error_text(result: ToolResult) -> str:
    for block in result.get("content", []):
        text = block.get("text") if isinstance(block, dict) else None
        if text:
            return str(text).removeprefix("Error: ")
    return "Tool returned an error without a message"
