"""Helpers for the multi-agent tests on Ray: a cross-process timeline and tools that report where they ran.

Everything is importable by module path: host actors unpickle these by reference.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray_harness import tool
from ray_harness.testing import Step, text
from tests.multiagent.conftest import Timeline, wait_for_starts


def _read_marks(path: str) -> list[tuple[str, str, float]]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [(name, kind, float(at)) for name, kind, at in (json.loads(line) for line in lines if line)]


def _mark(path: str, name: str, kind: str) -> None:
    # One short append per line: atomic enough on a local filesystem for concurrent writers.
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps([name, kind, time.monotonic()]) + "\n")


class FileTimeline(Timeline):
    """``Timeline`` whose marks go to a file, so model calls in host processes record them too.

    ``time.monotonic()`` is the system-wide monotonic clock on Linux, so marks from different
    processes compare.
    """

    def __init__(self, path: Path) -> None:  # no super().__init__(): ``marks`` is read from the file
        self.path = str(path)
        Path(self.path).touch()

    @property  # type: ignore[override]
    def marks(self) -> list[tuple[str, str, float]]:
        return _read_marks(self.path)

    def step(self, name: str, answer: str | None = None, delay: float = 0.2,
             wait_for: tuple[str, ...] = ()) -> Callable[[Any], Any]:
        path = self.path

        async def respond(call: Any) -> Step:
            _mark(path, name, "start")
            await wait_for_starts(lambda: _read_marks(path), name, wait_for)
            await asyncio.sleep(delay)
            _mark(path, name, "end")
            return text(answer or f"{name} done")

        return respond


@tool
def where() -> int:
    """The process id the tool runs in."""
    return os.getpid()


@tool
def burn(milliseconds: int) -> str:
    """Burn CPU in pure Python for ``milliseconds`` of wall time (holds the GIL)."""
    deadline = time.perf_counter() + milliseconds / 1000
    spins = 0
    while time.perf_counter() < deadline:
        spins += 1
    return f"burned {spins}"



class ModelCallCounter:
    """A hook provider that counts its agent's model calls in itself and shows the count in the agent's state.

    On ``runtime="ray"`` it lives in the node's slot: the count carries over invocations as in-process.
    """

    def __init__(self) -> None:
        self.calls = 0

    def register_hooks(self, registry: Any, **kwargs: Any) -> None:
        from ray_harness.hooks import AfterModelCallEvent

        registry.add_callback(AfterModelCallEvent, self._counted)

    def _counted(self, event: Any) -> None:
        self.calls += 1
        event.agent.state.set("model_calls", self.calls)
