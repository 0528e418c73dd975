"""Cancelling a run from outside the code that started it (what ``ray-harness cancel`` reaches), without Ray."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from ray_harness import Agent, GraphBuilder, Swarm
from ray_harness.multiagent import Status
from ray_harness.runtime._runs import merge_records
from ray_harness.telemetry import metrics, runs
from ray_harness.testing import ScriptedModel, text


async def _until(condition: Any) -> None:
    """Wait for state another thread or task changes (nothing to await: its model call sleeps an hour)."""
    while not condition():  # noqa: ASYNC110
        await asyncio.sleep(0.01)


def test_an_outermost_scope_given_a_stop_is_cancellable_while_open() -> None:
    stopped: list[str] = []
    with runs.run_scope("graph", "g", cancel=lambda: stopped.append("outer")) as run:
        assert run in runs.cancellable_runs()
        with runs.run_scope("graph", "inner", cancel=lambda: stopped.append("inner")) as inner:
            assert inner == run  # a nested run is the outer run: its stop is reached through the outer one's
            assert runs.cancel_run(run)
    assert stopped == ["outer"]
    assert run not in runs.cancellable_runs()
    assert not runs.cancel_run(run)


def test_a_scope_without_a_stop_is_not_cancellable() -> None:
    with runs.run_scope("graph", "g") as run:
        assert run not in runs.cancellable_runs()
        assert not runs.cancel_run(run)


async def test_the_stop_runs_on_the_runs_event_loop() -> None:
    called_on: list[int] = []
    with runs.run_scope("graph", "g", cancel=lambda: called_on.append(threading.get_ident())) as run:
        assert await asyncio.to_thread(runs.cancel_run, run)  # from another thread, as the run reporter calls it
        await _until(lambda: called_on)
    assert called_on == [threading.get_ident()]


class _Started:
    """A responder that says when its model call began, then answers after an hour (unless cancelled)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, call: Any) -> Any:
        self.calls += 1
        return text("too late", delay=3600)


def _open_run() -> str:
    (run,) = runs.cancellable_runs()
    return run


async def test_a_graph_run_cancelled_from_outside_ends_cancelled_with_its_running_nodes() -> None:
    slow_a, slow_b = _Started(), _Started()
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(text("go")), name="entry"), "entry")
    builder.add_node(Agent(ScriptedModel(slow_a), name="a"), "a")
    builder.add_node(Agent(ScriptedModel(slow_b), name="b"), "b")
    builder.add_node(Agent(ScriptedModel(text("never")), name="join"), "join")
    for node in ("a", "b"):
        builder.add_edge("entry", node)
        builder.add_edge(node, "join")
    graph = builder.build(runtime="local")
    running = asyncio.ensure_future(graph.invoke_async("start"))
    await _until(lambda: slow_a.calls and slow_b.calls)
    assert await asyncio.to_thread(runs.cancel_run, _open_run())
    result = await running  # returns, as after graph.cancel(): no exception
    assert result.status == Status.CANCELLED
    assert result.results["entry"].status == Status.COMPLETED
    assert result.results["a"].status == result.results["b"].status == Status.CANCELLED
    assert "join" not in result.results or result.results["join"].status == Status.CANCELLED
    assert not runs.cancellable_runs()


async def test_a_swarm_run_cancelled_from_outside_ends_cancelled() -> None:
    slow = _Started()
    swarm = Swarm([Agent(ScriptedModel(slow), name="solo")], runtime="local")
    running = asyncio.ensure_future(swarm.invoke_async("start"))
    await _until(lambda: slow.calls)
    assert await asyncio.to_thread(runs.cancel_run, _open_run())
    result = await running
    assert result.status == Status.CANCELLED


class _RunEnds(metrics.BaseSink):
    def __init__(self) -> None:
        self.ended: list[tuple[str, str]] = []

    def run_finished(self, run: str, kind: str, name: str, status: str) -> None:
        self.ended.append((kind, status))


async def test_an_evaluation_cancelled_from_outside_keeps_its_finished_rows(tmp_path: Path) -> None:
    from ray_harness.evaluation import evaluate_async

    rows = [{"prompt": "quick 0"}, {"prompt": "quick 1"}, {"prompt": "hold"}]
    output = tmp_path / "records.jsonl"
    sink = metrics.add_sink(_RunEnds())
    try:
        running = asyncio.ensure_future(evaluate_async("tests.cancel_targets:held_on_hold", rows, runtime="local",
                                                       output=str(output), concurrency=3, progress=False))
        await _until(lambda: runs.cancellable_runs() and output.exists() and len(output.read_text().splitlines()) == 2)
        assert await asyncio.to_thread(runs.cancel_run, _open_run())
        summary = await running
    finally:
        metrics.remove_sink(sink)
    assert summary["cancelled"] is True
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted(record["input"]["prompt"] for record in records) == ["quick 0", "quick 1"]  # the held row runs again
    assert sink.ended == [("eval", "cancelled")]  # was "completed": status showed a cancelled evaluation as done


def test_merged_runs_say_whether_they_can_be_cancelled() -> None:
    base = {"nodes_running": {}, "nodes_finished": {}, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0,
            "rows_completed": 0, "rows_failed": 0}
    owner = {**base, "run": "r1", "kind": "graph", "name": "g", "status": "running", "started_at": 1.0,
             "cancellable": True}
    host = {**base, "run": "r1", "input_tokens": 5}  # a node host's record: tokens only
    older = {**base, "run": "r2", "kind": "graph", "name": "h", "status": "running", "started_at": 2.0}
    merged = {run["run"]: run for run in merge_records([host, owner, older], now=3.0)}
    assert merged["r1"]["cancellable"] is True and merged["r1"]["input_tokens"] == 5
    assert merged["r2"]["cancellable"] is False  # published by a process that takes no cancel requests
