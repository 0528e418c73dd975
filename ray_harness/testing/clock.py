"""``FakeClock``: advances instantly when slept on."""

from __future__ import annotations

import asyncio

__all__ = ("FakeClock",)


class FakeClock:
    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time can't go backwards")
        self._now += seconds
