"""Ctrl-C in tests, whatever the runner's own SIGINT disposition.

A shell starts background jobs (``cmd &``, ``nohup``) with SIGINT ignored, children inherit that, and a
Python started with SIGINT ignored never raises ``KeyboardInterrupt``: a Ctrl-C test would then see its
signal dropped. The tests that press Ctrl-C restore what a terminal gives a program.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


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


def ctrl_c_once_recorded(argv: list[str], env: dict[str, str], output: Path, lines: int) -> tuple[int, str]:
    """Run ``argv``, press Ctrl-C once ``output`` has ``lines`` lines (state, not time); its exit code and stderr."""
    process = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 120
        while not output.exists() or len(output.read_text().splitlines()) < lines:
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, f"{output} never had {lines} lines"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, stderr
