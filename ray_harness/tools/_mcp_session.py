"""One live MCP session on its own thread and event loop.

The ``mcp`` package is built on anyio: a ``ClientSession`` and its transport
must be entered and exited by one task. The agent, on the other hand, may
call from any event loop (each synchronous ``agent()`` call runs a fresh one)
or from a thread without a loop. So each session lives in a dedicated daemon
thread that runs its own asyncio loop; callers hand it coroutines with
``run_coroutine_threadsafe`` and wait on the ``concurrent.futures.Future``s
from wherever they are.

Lifecycle: ``start()`` spawns the thread and returns a future that resolves
once the server answered ``initialize`` (or fails with the leaf cause of the
failure). ``stop()`` ends the session; leaving the transport's context ends a
stdio server. When the connection breaks for any reason the runner records
why (``lost``), cancels in-flight calls, and is never reused: the client
starts a new runner for the next call. That includes the server's side ending
while no call is in flight (a stdio server that exited or was killed): the
runner learns it from the receive loop ending, so the next call starts a new
server instead of failing on the dead one.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp import ClientSession
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext

from ray_harness.types.exceptions import RayHarnessError

__all__ = ("Connector", "SessionGone", "SessionRunner", "WatchedDispatcher", "describe_error", "leaf_error")

T = TypeVar("T")
Connector = Callable[[contextlib.AsyncExitStack, Callable[[], None]], Awaitable[ClientSession]]
"""Open the transport and session on the given stack and return the initialized session; the callback is
for a ``WatchedDispatcher``, to be called when the server's side of the connection ends."""


class SessionGone(RayHarnessError, ConnectionError):
    """The session ended before the request was sent: nothing reached the server, so a new session may send it."""


_STOP_JOIN_TIMEOUT = 10.0  # stdio shutdown: close stdin, 2 s grace, SIGTERM, 2 s, SIGKILL
_live: weakref.WeakSet[SessionRunner] = weakref.WeakSet()


class SessionRunner:
    """Owns one MCP session: a daemon thread, its event loop and the task that holds the session open."""

    def __init__(self, label: str, connect: Connector) -> None:
        self.label = label
        self._connect = connect
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._stop_event: asyncio.Event | None = None
        self._stop_requested = False
        self._session: ClientSession | None = None
        self._calls: set[asyncio.Task[Any]] = set()
        self._lost: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"ray_harness-mcp[{label}]", daemon=True)

    # -- control (any thread) --------------------------------------------------------------------------

    def start(self) -> concurrent.futures.Future[None]:
        """Spawn the session thread; the returned future resolves when the session is initialized."""
        _live.add(self)
        self._thread.start()
        return self._ready

    @property
    def ready(self) -> concurrent.futures.Future[None]:
        """Resolves when the session is initialized; fails with the cause when it could not start."""
        return self._ready

    @property
    def lost(self) -> str | None:
        """Why the session can no longer be used, or ``None`` while it is usable."""
        return self._lost

    @property
    def finished(self) -> bool:
        """True once the session thread has ended (every call it owned is over)."""
        return self._thread.ident is not None and not self._thread.is_alive()

    def mark_lost(self, reason: str) -> None:
        """Retire the session after a connection failure seen by a caller; the thread winds down."""
        if self._lost is None:
            self._lost = reason
        self.stop(wait=False)

    def stop(self, *, wait: bool = True) -> None:
        """End the session (idempotent). ``wait`` blocks until the server process is gone (bounded)."""
        self._stop_requested = True
        if self._lost is None:
            self._lost = "the client was closed"
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed: nothing left to stop
                loop.call_soon_threadsafe(self._request_stop)
        if wait and self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(_STOP_JOIN_TIMEOUT)

    def submit(self, work: Callable[[ClientSession], Awaitable[T]]) -> concurrent.futures.Future[T]:
        """Run ``work(session)`` on the session's loop. Raises ``SessionGone`` if the session is gone."""
        loop, session = self._loop, self._session
        if self._lost is not None or loop is None or session is None:
            raise SessionGone(f"MCP server {self.label} is not connected: {self._lost or 'not started'}")

        async def tracked() -> T:
            if self._lost is not None:  # lost while the call was on its way to this loop
                raise SessionGone(f"MCP server {self.label} is not connected: {self._lost}")
            task = asyncio.current_task()
            assert task is not None
            self._calls.add(task)
            try:
                return await work(session)
            finally:
                self._calls.discard(task)

        try:
            return asyncio.run_coroutine_threadsafe(tracked(), loop)
        except RuntimeError:  # the loop closed under us
            raise SessionGone(f"MCP server {self.label} is not connected: {self._lost}") from None

    # -- the session thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            with asyncio.Runner() as runner:
                self._loop = runner.get_loop()
                runner.run(self._main())
        except BaseException as error:  # a thread has no caller to re-raise to; record it instead
            self._fail_start(error)
            if self._lost is None:
                self._lost = describe_error(error)
        finally:
            if self._lost is None:
                self._lost = "the MCP session ended"
            _settle(self._ready, ConnectionError(self._lost))

    async def _main(self) -> None:
        self._main_task = asyncio.current_task()
        self._stop_event = asyncio.Event()
        if self._stop_requested:
            return
        try:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    self._session = await self._connect(stack, self._receiving_ended)
                except BaseException as error:
                    # Report now: unwinding the stack may wait seconds for a stdio server to exit. A
                    # cancellation here is anyio tearing the transport down; its cause arrives as an
                    # ExceptionGroup once the stack is unwound, so that is reported below instead.
                    if not isinstance(error, asyncio.CancelledError):
                        self._fail_start(error)
                    raise
                _settle(self._ready, None)
                await self._stop_event.wait()
        except BaseException as error:  # transport failure (an ExceptionGroup from anyio) or cancellation
            self._fail_start(error)
            if self._lost is None:
                self._lost = describe_error(error)
        finally:
            if self._lost is None:
                self._lost = "the MCP session ended"
            for task in list(self._calls):
                task.cancel()

    def _receiving_ended(self) -> None:
        # Runs on the session loop when the receive loop ends. While connecting, the failing initialize
        # reports the cause; our own stop ends it too, and then lost is already set.
        if self._ready.done() and self._lost is None:
            self.mark_lost("the server closed the connection")

    def _request_stop(self) -> None:
        # Runs on the session loop. Still connecting: cancel the attempt; connected: leave the context.
        if not self._ready.done() and self._main_task is not None:
            self._main_task.cancel()
        elif self._stop_event is not None:
            self._stop_event.set()

    def _fail_start(self, error: BaseException) -> None:
        leaf = leaf_error(error)
        if isinstance(leaf, asyncio.CancelledError):  # never hand a waiter a cancellation that is not its own
            leaf = ConnectionError(f"MCP server {self.label}: the connection attempt was stopped")
        _settle(self._ready, leaf)


class WatchedDispatcher(JSONRPCDispatcher[TransportContext]):
    """The mcp package's dispatcher, calling ``on_end`` when its receive loop ends (the server closed its side).

    Without it a dead stdio server goes unnoticed until the next call fails on it with "Connection closed".
    """

    def __init__(self, read_stream: Any, write_stream: Any, on_end: Callable[[], None]) -> None:
        super().__init__(read_stream, write_stream)
        self._on_end = on_end

    async def run(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().run(*args, **kwargs)
        finally:
            self._on_end()


def _settle(future: concurrent.futures.Future[None], outcome: BaseException | None) -> None:
    """Resolve ``future`` once; a waiter that gave up (cancelled it) or an earlier outcome wins."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


def leaf_error(error: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups, preferring causes to cancellations."""
    if not isinstance(error, BaseExceptionGroup):
        return error
    leaves = [leaf_error(inner) for inner in error.exceptions]
    for leaf in leaves:
        if not isinstance(leaf, asyncio.CancelledError):
            return leaf
    return leaves[0] if leaves else error


def describe_error(error: BaseException) -> str:
    """``Type: message`` of the leaf error (cancellation reads as the session being stopped)."""
    leaf = leaf_error(error)
    if isinstance(leaf, asyncio.CancelledError):
        return "the session was stopped"
    text = str(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


@atexit.register
def _stop_all() -> None:
    # Daemon threads die abruptly at exit; stop sessions first so stdio servers are shut down cleanly.
    for runner in list(_live):
        runner.stop(wait=True)
