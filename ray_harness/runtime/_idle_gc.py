"""Young-generation garbage collection of a host process at the moments it runs nothing.

A host collects its youngest generation after 300,000 net new containers (``_host._tune_gc``). Such a
collection walks every young object still alive; with an evaluation's 500 rows in flight (≈350 containers
each) it took 140–220 ms in the P2 benchmark's hosts, during which the host's event loop, and so every row on
it, stands still. Rows free their objects by reference counting, so the count falls back when they finish, but
not to zero (10,000–30,000 were left after each evaluation), and now and then a burst crosses the threshold.
Part of each collection's cost was what the first rows imported (a target's module and its dependencies:
≈64,000 objects for the benchmark's), young since the start-up ``gc.freeze()`` until a collection promotes it.

:class:`IdleCollector` counts the invocations running in the process and, when the last one ends and the young
generation holds at least :data:`MIN_YOUNG` objects, collects that generation :data:`IDLE_DELAY_S` later if the
process is still idle then (by then the finished runs' results were sent back and freed): with nothing in flight
few young objects are alive, the first such collection promotes the imported modules' objects, and the next
burst of rows starts from an empty young generation. Enabled only in host processes (by ``_host._tune_gc``);
elsewhere begin/end count and never collect.
"""

from __future__ import annotations

import asyncio
import gc
import threading

__all__ = ("IDLE_DELAY_S", "MIN_YOUNG", "IdleCollector", "idle_collector")

MIN_YOUNG = 20_000
"""Below this many net new containers an idle moment is not worth a collection (calls one by one)."""

IDLE_DELAY_S = 0.1
"""How long the process must stay idle before the collection (a batch's results are sent back meanwhile)."""


class IdleCollector:
    def __init__(self, delay_s: float = IDLE_DELAY_S) -> None:
        self.enabled = False
        self.collections = 0
        self._delay_s = delay_s
        self._scheduled = False
        self._running = 0
        self._guard = threading.Lock()  # invocations of other concurrency groups run on other threads

    def enable(self) -> None:
        self.enabled = True

    def begin(self) -> None:
        with self._guard:
            self._running += 1

    def end(self) -> None:
        with self._guard:
            self._running -= 1
            if self._running or not self.enabled or self._scheduled:
                return
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # not on a loop: nothing to schedule the collection on
                return
            self._scheduled = True
        loop.call_later(self._delay_s, self._collect_if_idle)

    def _collect_if_idle(self) -> None:
        with self._guard:
            self._scheduled = False
            if self._running:
                return
        if gc.isenabled() and gc.get_count()[0] >= MIN_YOUNG:
            gc.collect(0)
            self.collections += 1


idle_collector = IdleCollector()
"""The process's collector (the runner brackets every invocation with it)."""
