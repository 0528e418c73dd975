"""Ctrl-C in tests, whatever the runner's own SIGINT disposition.

A shell starts background jobs (``cmd &``, ``nohup``) with SIGINT ignored, children inherit that, and a
Python started with SIGINT ignored never raises ``KeyboardInterrupt``: a Ctrl-C test would then see its
signal dropped. The tests that press Ctrl-C restore what a terminal gives a program.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


def default_sigint() -> None:
    """``preexec_fn`` for a child that must react to SIGINT as if started from a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # at startup Python then installs default_int_handler


@contextlib.contextmanager
def ctrl_c_raises() -> Iterator[None]:
    """While inside, a SIGINT to this process raises ``KeyboardInterrupt`` in the main thread."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
