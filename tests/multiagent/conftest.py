"""Multi-agent tests run without Ray: ``import ray`` fails here.

Behaviour tests take the ``runtime`` fixture ("local" here). The same test
functions run with ``runtime="ray"`` from
``tests/integration/test_multiagent_ray.py``, on the integration session's Ray.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, Step, text


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    # Also when an integration test of the same session already imported the Ray executor.
    monkeypatch.setitem(sys.modules, "ray_harness.runtime.multiagent", None)


@pytest.fixture(params=["local"])
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_agent(name: str, *steps: Any, **kwargs: Any) -> Agent:
    return Agent(ScriptedModel(*steps), name=name, **kwargs)


async def wait_for_starts(read_marks: Callable[[], list[tuple[str, str, float]]], me: str,
                          others: tuple[str, ...], timeout: float = 120) -> None:
    """Wait until every step in ``others`` has started: concurrency proven by state, not by elapsed time.

    Steps run one after the other never see each other start, so the wait fails the step (and the test).
    """
    deadline = time.monotonic() + timeout
    while not all(any(n == other and k == "start" for n, k, _ in read_marks()) for other in others):
        if time.monotonic() > deadline:
            raise AssertionError(f"{me} waited in vain for {others} to start: they did not run concurrently")
        await asyncio.sleep(0.01)


class Timeline:
    """Records when scripted model calls start and end, to prove what ran concurrently.

    ``step(..., wait_for=("B",))`` makes a step wait (after its start) until step B has started too.
    """

    def __init__(self) -> None:
        self.marks: list[tuple[str, str, float]] = []

    def step(self, name: str, answer: str | None = None, delay: float = 0.2,
             wait_for: tuple[str, ...] = ()) -> Callable[[Any], Any]:
        async def respond(call: Any) -> Step:
            self.marks.append((name, "start", time.monotonic()))
            await wait_for_starts(lambda: self.marks, name, wait_for)
            await asyncio.sleep(delay)
            self.marks.append((name, "end", time.monotonic()))
            return text(answer or f"{name} done")

        return respond

    def at(self, name: str, kind: str) -> float:
        return next(t for n, k, t in self.marks if n == name and k == kind)

    def starts(self, name: str) -> int:
        return sum(1 for n, k, _ in self.marks if n == name and k == "start")


@pytest.fixture
def timeline() -> Timeline:
    return Timeline()


class JsonFileStore:
    """The two methods a multi-agent session store needs, on a JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writes = 0

    def write_multi_agent_json(self, data: dict[str, Any]) -> None:
        self.path.write_text(json.dumps(data))
        self.writes += 1

    def read_multi_agent_json(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        return json.loads(self.path.read_text())  # type: ignore[no-any-return]
