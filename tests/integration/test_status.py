"""``ray-harness status --json`` while a graph runs: the run, its nodes done/running/pending, tokens, age."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ray_harness.multiagent import Status

pytestmark = [pytest.mark.ray]
ROOT = Path(__file__).resolve().parents[2]


def _status(gcs_address: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    shown = subprocess.run([sys.executable, "-m", "ray_harness.cli", "status", "--json", "--address", gcs_address],
                           env=env, capture_output=True, text=True, timeout=180, check=False)
    assert shown.returncode == 0, shown.stderr[-3000:]
    return json.loads(shown.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _wait_for_run(gcs_address: str, predicate: Any, name: str = "held_graph") -> dict[str, Any]:
    deadline = time.monotonic() + 240
    while True:
        runs = [run for run in _status(gcs_address)["runs"] if run["name"] == name]
        if runs and predicate(runs[0]):
            assert len(runs) == 1, runs  # one run, whatever its nested graphs and its processes report
            return runs[0]
        assert time.monotonic() < deadline, f"the run never reached the expected state; last seen: {runs}"
        time.sleep(1)


def _in_background(call: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``call()`` in a started thread; the dict gets its ``"result"`` or its ``"error"``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as error:  # surfaced by the caller's assertion
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker, outcome


@contextlib.contextmanager
def _held_graph_running(tmp_path: Path, graph_id: str = "held_graph") -> Iterator[tuple[Any, dict[str, Any]]]:
    """observed_agents.held_graph running in the background: (the graph, its outcome once the block ended).

    At the end of the block the held node is released, the run awaited and the graph shut down.
    """
    from tests.integration.observed_agents import held_graph

    release = tmp_path / "release"
    graph = held_graph(release, graph_id)
    worker, outcome = _in_background(lambda: graph("go"))
    try:
        yield graph, outcome
    finally:
        release.touch()
        worker.join(timeout=240)
        graph.shutdown()


def test_status_json_shows_a_running_graph_with_its_nodes(ray_session: dict[str, Any], tmp_path: Path) -> None:
    with _held_graph_running(tmp_path) as (_, outcome):
        # Each process publishes its own view once a second: the orchestrator's node states can arrive before the
        # hosts' token counts, so wait for both.
        running = _wait_for_run(ray_session["gcs_address"],
                                lambda run: run["nodes_running"] == ["held"] and run["input_tokens"] > 0)
        assert running["kind"] == "graph" and running["status"] == "running"
        assert running["nodes_done"] == {"first": "completed"} and running["nodes_pending"] == 1
        assert running["nodes_total"] == 3
        assert running["input_tokens"] > 0 and running["cost_usd"] >= 0 and running["age_s"] >= 0
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"].status == Status.COMPLETED

    finished = _wait_for_run(ray_session["gcs_address"], lambda run: run["status"] != "running")
    assert finished["status"] == "completed" and finished["nodes_running"] == []
    assert finished["nodes_done"] == {"first": "completed", "held": "completed", "last": "completed"}
    assert finished["run"] == running["run"]


def test_status_json_shows_a_cancelled_graph_and_its_node_as_cancelled(ray_session: dict[str, Any],
                                                                        tmp_path: Path) -> None:
    # graph.cancel() makes the invocation return a CANCELLED result (no exception): status showed it "completed".
    with _held_graph_running(tmp_path, "cancelled_graph") as (graph, outcome):  # the other test's run is listed
        running = _wait_for_run(ray_session["gcs_address"], lambda run: run["nodes_running"] == ["held"],
                                name="cancelled_graph")
        graph.cancel()
        time.sleep(1)  # the held tool blocks a thread: cancel takes effect once it returns
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"].status == Status.CANCELLED

    ended = _wait_for_run(ray_session["gcs_address"],
                          lambda run: run["run"] == running["run"] and run["status"] != "running", name="cancelled_graph")
    assert ended["status"] == "cancelled", ended
    assert ended["nodes_done"] == {"first": "completed", "held": "cancelled"}, ended


def test_status_json_shows_an_evaluation_of_graph_rows_as_one_eval_run(ray_session: dict[str, Any],
                                                                      tmp_path: Path) -> None:
    # Each row's graph runs on a host inside the evaluation's run: it must not turn the run into a "graph", nor
    # report it completed when a row's graph completes while other rows still run.
    from ray_harness.evaluation import evaluate

    target = "tests.integration.observed_agents:gated_row_graph"
    release = tmp_path / "release"
    rows = [{"prompt": "row zero"}, {"prompt": "row one"}, {"prompt": f"hold:{release}"}]
    worker, outcome = _in_background(lambda: evaluate(target, rows, runtime="ray", pool_size=1, progress=False))
    try:
        # The driver publishes the rows, the host the tokens, each once a second: wait for both.
        running = _wait_for_run(ray_session["gcs_address"],
                                lambda run: run["rows_completed"] == 2 and run["input_tokens"] > 0, name=target)
        assert running["kind"] == "eval" and running["status"] == "running", running
        assert running["rows_failed"] == 0
    finally:
        release.touch()
        worker.join(timeout=240)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"]["errors"] == 0

    finished = _wait_for_run(ray_session["gcs_address"], lambda run: run["rows_completed"] == 3, name=target)
    assert finished["kind"] == "eval" and finished["status"] == "completed", finished
    assert finished["run"] == running["run"] and finished["nodes_running"] == []
    # the rows' graph is no node of the evaluation: its nodes are listed under its id
    assert finished["nodes_done"] == {"gated_rows/gate": "completed", "gated_rows/after": "completed"}


def test_status_json_has_the_tokens_of_an_evaluation_whose_hosts_died_when_it_returned(
        ray_session: dict[str, Any], tmp_path: Path) -> None:
    # A Ray Job's driver exits right after its evaluation, and the hosts it started die with it (as here, killed the
    # moment evaluate() returns): the tokens and cost the hosts counted must be published by then, not with their
    # next periodic write (docs/how-to/graph-eval-on-cluster.md showed "tokens 0" after the job).
    import ray

    from ray_harness.evaluation import evaluate
    from ray_harness.runtime import AgentPool

    target = "tests.eval_targets:echo_agent"
    started = time.time()
    pool = AgentPool(size=2, namespace=f"ray_harness_status_{tmp_path.name}")  # fresh hosts, not the session's
    try:
        rows = [{"prompt": f"row {index}"} for index in range(8)]
        summary = evaluate(target, rows, runtime="ray", pool=pool, output=str(tmp_path / "records.jsonl"),
                           progress=False)
        for host in pool.hosts:
            ray.kill(host, no_restart=True)
    finally:
        pool.shutdown()
    assert summary["errors"] == 0 and summary["tokens"] == {"input": 80, "output": 40, "total": 120}, summary

    # Other tests of this session evaluate the same target: this run is the one that ended after `started`.
    deadline = time.monotonic() + 240
    while True:
        runs = [run for run in _status(ray_session["gcs_address"])["runs"] if run["name"] == target
                and (run.get("ended_at") or 0) >= started and run["rows_completed"] == 8]
        if runs and runs[0]["input_tokens"] == 80:
            break
        assert time.monotonic() < deadline, f"the evaluation's tokens never arrived; last seen: {runs}"
        time.sleep(1)
    assert len(runs) == 1, runs
    finished = runs[0]
    assert finished["kind"] == "eval" and finished["status"] == "completed", finished
    assert (finished["input_tokens"], finished["output_tokens"]) == (80, 40), finished
    assert finished["cost_usd"] == summary["cost_usd"]
