"""Awaiting something against the agent's cancel.

ray_harness does not cancel a running tool's task on ``agent.cancel()``: a tool sees the cancel through
``tool_context.cancel_signal``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from ray_harness.tools.base import until_set

T = TypeVar("T")


async def unless_cancelled(work: Coroutine[Any, Any, T], signal: threading.Event, cancelled: Exception) -> T:
    """``work``'s result; if ``signal`` is set first, ``work`` is cancelled and ``cancelled`` raised."""
    if signal.is_set():
        work.close()  # never started: closing it spares the "never awaited" warning
        raise cancelled
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(until_set(signal))
    try:
        await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise cancelled
    return task.result()
