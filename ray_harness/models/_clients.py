"""A provider client created lazily, once per event loop, and closed with that loop.

Async HTTP clients (httpx connection pools) belong to the event loop that
opened their connections; ``Agent.__call__`` runs every invocation on a fresh
loop, so a client cached across loops would reuse dead connections. The cache
is keyed weakly by loop and is never pickled: a model ships into a Ray actor
as configuration and builds its client there on first use.

Closing rides on the loop's async-generator bookkeeping: each client has a
parked "keeper" generator whose ``finally`` closes it, and ``asyncio.run`` /
``asyncio.Runner`` close every live async generator before closing the loop
(``loop.shutdown_asyncgens()``). A long-lived loop keeps its client for reuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, TypeVar

__all__ = ("LoopClientCache",)

ClientT = TypeVar("ClientT")


class LoopClientCache(Generic[ClientT]):
    """Holds one client per running event loop, built by ``factory`` on first use and closed by ``close``."""

    def __init__(self, factory: Callable[[], ClientT], close: Callable[[ClientT], Awaitable[Any]]) -> None:
        self._factory = factory
        self._close = close
        self._entries: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[ClientT, AsyncGenerator[None, None]]]
        self._entries = weakref.WeakKeyDictionary()

    async def get(self) -> ClientT:
        loop = asyncio.get_running_loop()
        entry = self._entries.get(loop)
        if entry is not None:
            return entry[0]
        client = self._factory()
        keeper = self._keeper(client)
        await keeper.__anext__()  # first iteration registers the generator with this loop's shutdown
        self._entries[loop] = (client, keeper)
        return client

    async def _keeper(self, client: ClientT) -> AsyncGenerator[None, None]:
        try:
            yield
            yield  # never resumed: the loop's shutdown closes the generator at the first yield
        finally:
            with contextlib.suppress(Exception):
                await self._close(client)
