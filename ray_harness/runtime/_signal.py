"""``CancelSignal``: a ``threading.Event`` that also tells an event loop when it is set.

The runner's cancel arrives on the actor's control thread and sets the run's signal. Agents read the
flag at their safe points; a Graph or Swarm running as a pooled row must *react* (call its own
``cancel()``), and polling the flag from hundreds of rows in flight costs a wake-up per row every few
milliseconds. Callbacks registered here run on the loop instead, once, when the signal is set.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from ray_harness._signal import Signal

__all__ = ("CancelSignal",)


class CancelSignal(Signal):
    def __init__(self) -> None:
        super().__init__()  # no Condition until something sets, clears or waits on it (see ray_harness._signal)
        self._callbacks: list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = []
        self._callbacks_guard = threading.Lock()

    def set(self) -> None:
        with self._callbacks_guard:
            super().set()
            callbacks, self._callbacks = self._callbacks, []
        for loop, callback in callbacks:
            _call_soon(loop, callback)

    def on_set(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` on ``loop`` once the signal is set (soon, if it is already). Returns a remover."""
        entry = (loop, callback)
        with self._callbacks_guard:
            if not self.is_set():
                self._callbacks.append(entry)
                return lambda: self._remove(entry)
        _call_soon(loop, callback)
        return lambda: None

    def _remove(self, entry: tuple[asyncio.AbstractEventLoop, Callable[[], None]]) -> None:
        with self._callbacks_guard:
            if entry in self._callbacks:
                self._callbacks.remove(entry)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    try:
        loop.call_soon_threadsafe(callback)
    except RuntimeError:
        pass  # the loop is closed: the run it served is over
