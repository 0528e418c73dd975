"""Tool executors: how one batch of tool uses runs (concurrently or in order).

An executor receives a ``run_one(tool_use)`` async generator factory (which
does hooks, middleware and the tool itself) and merges the events. Results are
collected by the loop and put back in toolUse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable
from typing import Any

from typing_extensions import override

from ray_harness.types.content import ToolUse

__all__ = ("ConcurrentToolExecutor", "SequentialToolExecutor", "ToolExecutor", "ToolInterruptedMarker")

RunOne = Callable[[ToolUse], AsyncGenerator[Any, None]]
_DONE = object()


class ToolInterruptedMarker:
    """Base of the event ``run_one`` yields when its tool paused on an interrupt (the loop defines it)."""


class ToolExecutor(ABC):
    """How one batch of tool calls runs; results are always yielded in ``toolUse`` order."""

    @abstractmethod
    def execute(self, tool_uses: list[ToolUse], run_one: RunOne, cancel_signal: threading.Event,
                skip: Callable[[ToolUse], AsyncGenerator[Any, None]]) -> AsyncGenerator[Any, None]:
        """Run ``tool_uses``; ``skip(tool_use)`` produces the cancelled result for tools not started."""


class SequentialToolExecutor(ToolExecutor):
    """One tool at a time, in order; cancel is checked before each tool.

    A tool that pauses on an interrupt stops the batch: the later tools neither run nor raise their own
    interrupts until it is resumed (they have no result yet, so the resume runs them after it).
    """

    @override
    async def execute(self, tool_uses: list[ToolUse], run_one: RunOne, cancel_signal: threading.Event,
                      skip: Callable[[ToolUse], AsyncGenerator[Any, None]]) -> AsyncGenerator[Any, None]:
        for tool_use in tool_uses:
            source = skip(tool_use) if cancel_signal.is_set() else run_one(tool_use)
            interrupted = False
            async with contextlib.aclosing(source) as events:
                async for event in events:
                    interrupted = interrupted or isinstance(event, ToolInterruptedMarker)
                    yield event
            if interrupted:
                return


class ConcurrentToolExecutor(ToolExecutor):
    """Every tool of the batch at once (the default); events are merged as they arrive."""

    @override
    async def execute(self, tool_uses: list[ToolUse], run_one: RunOne, cancel_signal: threading.Event,
                      skip: Callable[[ToolUse], AsyncGenerator[Any, None]]) -> AsyncGenerator[Any, None]:
        if len(tool_uses) == 1:
            async with contextlib.aclosing(run_one(tool_uses[0])) as events:
                async for event in events:
                    yield event
            return
        queue: asyncio.Queue[Any] = asyncio.Queue()

        async def pump(tool_use: ToolUse) -> None:
            try:
                async with contextlib.aclosing(run_one(tool_use)) as events:
                    async for event in events:
                        await queue.put(event)
            except BaseException as error:  # surfaced to the consumer below
                await queue.put(_Failure(error))
            finally:
                await queue.put(_DONE)

        tasks = [asyncio.create_task(pump(tool_use)) for tool_use in tool_uses]
        remaining = len(tasks)
        try:
            while remaining:
                event = await queue.get()
                if event is _DONE:
                    remaining -= 1
                elif isinstance(event, _Failure):
                    raise event.error
                else:
                    yield event
        finally:
            # Only unfinished tasks are awaited: a close that need not wait must not suspend, or at
            # asyncio.run's end (which closes every live generator at once) our callers' generators
            # would be "already running" when their turn comes: six logged RuntimeErrors after a
            # `break` out of stream_async.
            pending = [task for task in tasks if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error
