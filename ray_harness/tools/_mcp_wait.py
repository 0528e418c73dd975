"""Waiting, from the caller's event loop, on work handed to a session's thread (see ``_mcp_session``).

A wait watches the agent's cancel signal and the session's health as well as the work itself, and bounds
it by a timeout in seconds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from datetime import timedelta
from typing import TypeVar

from ray_harness.tools._mcp_errors import MCPCallCancelled
from ray_harness.tools._mcp_session import SessionRunner

__all__ = ("settled", "timeout_seconds", "wait_for_call")

T = TypeVar("T")
_POLL_SECONDS = 0.05  # how often a waiting call looks at the cancel signal and the session's health


def timeout_seconds(timeout: timedelta | float | None, what: str) -> float | None:
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if not seconds > 0:
        raise ValueError(f"{what} must be positive, got {timeout!r}")
    return seconds


async def wait_for_call(future: concurrent.futures.Future[T], runner: SessionRunner,
                        cancel_signal: threading.Event | None) -> T:
    """Await a call on the session thread while watching the cancel signal and the session's health."""
    waiter = asyncio.wrap_future(future)
    try:
        while not waiter.done():
            if cancel_signal is not None and cancel_signal.is_set():
                # Cancelling the session-side task makes the mcp dispatcher send notifications/cancelled.
                future.cancel()
                raise MCPCallCancelled("the agent was cancelled during the MCP call")
            if runner.finished and not future.done():
                raise ConnectionError(f"MCP server {runner.label} connection lost: {runner.lost}")
            await asyncio.wait({waiter}, timeout=_POLL_SECONDS)
    except BaseException:
        future.cancel()
        if waiter.done() and not waiter.cancelled():
            waiter.exception()  # mark retrieved: the outcome is superseded by ours
        raise
    if waiter.cancelled():  # the session ended and cancelled its in-flight calls
        raise ConnectionError(f"MCP server {runner.label} connection lost: {runner.lost}")
    return waiter.result()


async def settled(future: concurrent.futures.Future[None], timeout: float,
                  cancel_signal: threading.Event | None = None) -> None:
    """Wait for a future other callers may share; unlike ``wrap_future``, giving up never cancels it.

    Raises ``MCPCallCancelled`` as soon as ``cancel_signal`` is set, ``TimeoutError`` after ``timeout``.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def resolve() -> None:
        if not done.done():
            done.set_result(None)

    def wake(_: concurrent.futures.Future[None]) -> None:
        with contextlib.suppress(RuntimeError):  # our loop is gone: nobody is waiting any more
            loop.call_soon_threadsafe(resolve)

    future.add_done_callback(wake)
    async with asyncio.timeout(timeout):
        while not done.done():
            if cancel_signal is not None and cancel_signal.is_set():
                raise MCPCallCancelled("the agent was cancelled while the MCP server was starting")
            await asyncio.wait({done}, timeout=_POLL_SECONDS if cancel_signal is not None else None)
    future.result()
