"""``FakeClock``: advances instantly when slept on."""

from __future__ import annotations

import asyncio

__all__ = ("FakeClock",)


class FakeClock:
    """A clock for tests: ``sleep`` returns at once and moves the time forward.

    Args:
        start: The initial time in seconds.

    Attributes:
        sleeps: Every duration ``sleep`` was called with, in order.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        """The current fake time in seconds."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Record ``seconds``, advance the clock by it and yield to the event loop once."""
        self.sleeps.append(seconds)
        self.advance(seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        """Move the clock forward.

        Raises:
            ValueError: ``seconds`` is negative.
        """
        if seconds < 0:
            raise ValueError("time can't go backwards")
        self._now += seconds
