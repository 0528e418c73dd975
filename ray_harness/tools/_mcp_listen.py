"""Following an MCP server's tool-list changes on a ``subscriptions/listen`` stream (protocol 2026-07-28)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import anyio
from mcp import ClientSession
from mcp.client.subscriptions import ListenNotSupportedError, listen

__all__ = ("follow_tool_changes",)

_RELISTEN_FIRST_DELAY = 1.0  # seconds before opening a dropped subscriptions/listen stream again; doubles
_RELISTEN_MAX_DELAY = 30.0


async def follow_tool_changes(stack: contextlib.AsyncExitStack, session: ClientSession, on_change: Callable[[], None],
                              timeout: float) -> None:
    """Keep a ``subscriptions/listen`` stream open: a 2026-07-28 server announces tool changes only on one.

    Servers on earlier protocol versions push ``notifications/tools/list_changed`` unprompted (seen by the
    session's message handler). The stream is followed by a task of the session, ended with it; when the
    stream drops (an HTTP server restarted) changes may have been missed, so ``on_change`` runs and the
    stream is opened again. Returns once the first attempt is over, so no change after it is missed.
    """
    capabilities = session.server_capabilities
    if capabilities is None or capabilities.tools is None or not capabilities.tools.list_changed:
        return
    first_attempt = asyncio.Event()
    task = asyncio.create_task(_follow(session, on_change, timeout, first_attempt))

    async def end() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    stack.push_async_callback(end)
    await first_attempt.wait()


async def _follow(session: ClientSession, on_change: Callable[[], None], timeout: float,
                  first_attempt: asyncio.Event) -> None:
    delay = _RELISTEN_FIRST_DELAY
    try:
        while True:
            try:
                async with contextlib.AsyncExitStack() as scope:
                    with anyio.fail_after(timeout):  # listen() itself waits for the acknowledgement without limit
                        subscription = await scope.enter_async_context(listen(session, tools_list_changed=True))
                    first_attempt.set()
                    delay = _RELISTEN_FIRST_DELAY
                    async for _ in subscription:
                        on_change()
            except ListenNotSupportedError:
                return
            except Exception:  # refused, dropped, or the session ended: its own calls report failures
                pass
            first_attempt.set()
            on_change()  # changes may have been missed while there was no stream
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RELISTEN_MAX_DELAY)
    finally:
        first_attempt.set()
