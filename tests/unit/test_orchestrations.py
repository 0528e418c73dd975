"""``Orchestrations``: the Graph/Swarm runs of one host process, with a fake run (no Ray)."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncGenerator, Callable
from typing import Any

from ray_harness.runtime._orchestration import AbortRequest, Orchestrations
from ray_harness.runtime._placement import current_placement
from ray_harness.runtime._resident import Residents
from ray_harness.runtime._wire import CancelRequest, OrchestratorRequest


class FakeRun:
    """A run that streams until it is cancelled (or released), noting where it ran and on which thread."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.release = asyncio.Event()
        self.cancel_threads: list[int] = []
        self.aborted = False

    def cancel(self) -> None:
        self.cancel_threads.append(threading.get_ident())
        self.cancelled.set()

    def abort(self) -> None:
        self.aborted = True
        self.cancelled.set()


def starter(runs: dict[str, FakeRun], placements: list[str]
            ) -> Callable[[OrchestratorRequest, Callable[[Any], None], Residents], AsyncGenerator[Any, None]]:
    async def start(request: OrchestratorRequest, started: Callable[[Any], None],
                    residents: Residents) -> AsyncGenerator[Any, None]:
        placements.append(current_placement())
        run = runs[request.invocation_id] = FakeRun()
        started(run)
        yield "started"
        cancelled = asyncio.ensure_future(run.cancelled.wait())
        released = asyncio.ensure_future(run.release.wait())
        await asyncio.wait([cancelled, released], return_when=asyncio.FIRST_COMPLETED)
        cancelled.cancel()
        released.cancel()
        yield "cancelled" if run.cancelled.is_set() else "done"

    return start


def request(invocation_id: str) -> OrchestratorRequest:
    return OrchestratorRequest(invocation_id=invocation_id, payload=b"")


async def collect(orchestrations: Orchestrations, invocation_id: str) -> list[Any]:
    return [item async for item in orchestrations.stream(request(invocation_id))]


async def test_a_run_is_listed_while_it_runs_under_placement_orchestrator() -> None:
    runs: dict[str, FakeRun] = {}
    placements: list[str] = []
    orchestrations = Orchestrations(starter(runs, placements))
    items = orchestrations.stream(request("r1"))
    assert await items.__anext__() == "started"
    assert orchestrations.running() == ["r1"]
    runs["r1"].release.set()
    assert [item async for item in items] == ["done"]
    assert orchestrations.running() == []
    assert placements == ["orchestrator"]
    assert current_placement() == "driver"  # the caller's context is untouched


async def test_a_cancel_from_another_thread_reaches_the_run_on_its_loop() -> None:
    runs: dict[str, FakeRun] = {}
    orchestrations = Orchestrations(starter(runs, []))
    items = orchestrations.stream(request("r1"))
    assert await items.__anext__() == "started"
    counted: list[int] = []
    thread = threading.Thread(target=lambda: counted.append(orchestrations.cancel(CancelRequest(invocation_ids=("r1",)))))
    thread.start()
    thread.join()
    assert counted == [1]
    assert [item async for item in items] == ["cancelled"]
    assert runs["r1"].cancel_threads == [threading.get_ident()]  # handed to the run's loop


async def test_a_cancel_before_its_run_starts_is_remembered_and_applied_at_start() -> None:
    runs: dict[str, FakeRun] = {}
    orchestrations = Orchestrations(starter(runs, []))
    assert orchestrations.cancel(CancelRequest(invocation_ids=("early",))) == 0
    assert await collect(orchestrations, "early") == ["started", "cancelled"]
    # Applied once: the same id again is not cancelled.
    items = orchestrations.stream(request("early"))
    assert await items.__anext__() == "started"
    runs["early"].release.set()
    assert [item async for item in items] == ["done"]


async def test_an_abort_reaches_the_runs_abort_not_its_cancel() -> None:
    """The driver's caller stopped reading: the run stops as a closed stream (and still sends its end state)."""
    runs: dict[str, FakeRun] = {}
    orchestrations = Orchestrations(starter(runs, []))
    items = orchestrations.stream(request("r1"))
    assert await items.__anext__() == "started"
    assert orchestrations.cancel(AbortRequest(invocation_ids=("r1",))) == 1
    assert [item async for item in items] == ["cancelled"]
    assert runs["r1"].aborted and runs["r1"].cancel_threads == []


async def test_a_cancel_naming_no_runs_stops_every_run() -> None:
    runs: dict[str, FakeRun] = {}
    orchestrations = Orchestrations(starter(runs, []))
    first, second = orchestrations.stream(request("a")), orchestrations.stream(request("b"))
    assert await first.__anext__() == "started" and await second.__anext__() == "started"
    assert orchestrations.cancel(CancelRequest()) == 2
    assert [item async for item in first] == ["cancelled"]
    assert [item async for item in second] == ["cancelled"]


def test_orchestrations_import_no_ray() -> None:
    assert "ray_harness.runtime._orchestration" in sys.modules
    module = sys.modules["ray_harness.runtime._orchestration"]
    assert "ray" not in vars(module)
