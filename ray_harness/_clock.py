"""Time as a seam: retries and timeouts take a ``Clock`` so tests never sleep for real."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ("Clock", "SystemClock")


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
