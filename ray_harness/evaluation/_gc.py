"""A higher young-generation GC threshold while local evaluations run in this process.

Rows in flight keep their objects alive for a model call or more, so with Python's default threshold (700) they
survive young collections, reach the oldest generation and set off full collections over every row in flight:
1,000 three-node chain rows under ``evaluate(..., runtime="local")`` spent about a third of their CPU collecting.
Ray hosts raise the threshold for good (``runtime._host._tune_gc``); a driver is the user's process, so here it is
raised only while at least one local evaluation runs, and put back afterwards unless something else changed it
meanwhile. ``RAY_HARNESS_LOCAL_GC_TUNING=0`` leaves the process's settings alone. Objects freed by reference
counting (a finished row) are not affected; unreachable cycles wait for up to :data:`YOUNG` new containers.
"""

from __future__ import annotations

import gc
import os
import threading

__all__ = ("YOUNG", "GcTuning")

YOUNG = 300_000
"""The young threshold while local evaluations run (as on Ray hosts)."""

_MIDDLE = 20
_Threshold = tuple[int, int, int]


class _Shared:
    """The one raise all local evaluations of the process share."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0  # local evaluations running
        self.saved: _Threshold | None = None  # the threshold to put back (None: nothing was changed)
        self.raised: _Threshold | None = None  # the threshold set, to see whether someone changed it since


_shared = _Shared()


class GcTuning:
    """Enter/leave the raised threshold; nested and concurrent evaluations share one raise."""

    def __init__(self) -> None:
        self._entered = False

    def enter(self) -> None:
        if self._entered or os.environ.get("RAY_HARNESS_LOCAL_GC_TUNING", "1").lower() in ("0", "false", "no"):
            return
        shared = _shared
        with shared.lock:
            self._entered = True
            shared.active += 1
            if shared.active > 1:
                return  # raised by a running evaluation already
            young, middle, old = gc.get_threshold()
            if young == 0 or young >= YOUNG:  # collection off, or already as high: not ours to change
                shared.saved = shared.raised = None
                return
            shared.saved, shared.raised = (young, middle, old), (YOUNG, max(middle, _MIDDLE), old)
            gc.set_threshold(*shared.raised)

    def leave(self) -> None:
        if not self._entered:
            return
        shared = _shared
        with shared.lock:
            self._entered = False
            shared.active -= 1
            saved, raised = shared.saved, shared.raised
            if shared.active or saved is None:
                return
            shared.saved = shared.raised = None
            if gc.get_threshold() == raised:  # someone else's setting since then stays
                gc.set_threshold(*saved)
