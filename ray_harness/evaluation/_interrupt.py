"""Ctrl-C during a sync ``evaluate()``: stop cleanly, keep what finished, then raise ``KeyboardInterrupt``.

Left to ``asyncio.run``, the first Ctrl-C only cancels the main task, and a cancellation can be lost on the
way (Python 3.11's ``asyncio.wait_for`` swallows one that races with its own timeout; any library code that
catches ``CancelledError`` does too): the evaluation then runs on, or exits 0 with rows missing. So a sync
``evaluate()`` in the main thread takes SIGINT itself for its duration: the first Ctrl-C sets the run's cancel
event (in-flight rows are cancelled, finished rows flushed) and ``evaluate()`` raises ``KeyboardInterrupt``
once that is done; a second Ctrl-C raises at once, as Python's default handler does.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType

__all__ = ["SigintTrap"]


class SigintTrap:
    """Context manager: while active (main thread only), SIGINT sets ``event`` instead of raising."""

    def __init__(self, event: threading.Event | None) -> None:
        self.event = event if event is not None else threading.Event()
        self.fired = False
        self._previous: object = None
        self._installed = False

    def __enter__(self) -> SigintTrap:
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
            self._installed = False

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.fired:
            raise KeyboardInterrupt
        self.fired = True
        self.event.set()
