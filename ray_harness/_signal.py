"""``Signal``: a ``threading.Event`` that makes its ``Condition`` only when something sets, clears or waits on it.

Every agent invocation, Graph node run and host run has a cancel signal, and most are only ever asked
``is_set()``, which reads the flag alone. ``threading.Event()`` costs ≈22k instructions, nearly all of it the
``Condition`` (its constructor looks for three ``RLock`` methods on a plain lock and catches an
``AttributeError`` for each); this one ≈2k until it is used. It is a ``threading.Event`` in every other way.
"""

from __future__ import annotations

import threading

__all__ = ("Signal",)

_CONDITION_GUARD = threading.Lock()


class Signal(threading.Event):
    def __init__(self) -> None:  # Event.__init__ without the condition
        self._flag = False

    @property
    def _cond(self) -> threading.Condition:  # what Event's set/clear/wait use
        condition: threading.Condition | None = self.__dict__.get("_condition")
        if condition is None:
            with _CONDITION_GUARD:  # two threads at once (a cancel and a wait) must get the same condition
                condition = self.__dict__.setdefault("_condition", threading.Condition(threading.RLock()))
        return condition
