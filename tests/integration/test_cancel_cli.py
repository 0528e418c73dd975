"""``ray-harness cancel`` from another process, against the session's Ray: a graph and an evaluation run in this
driver (in a thread, as a user's script runs them) and are cancelled by ``python -m ray_harness.cli cancel``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ray_harness.multiagent import Status

pytestmark = [pytest.mark.ray]
ROOT = Path(__file__).resolve().parents[2]


def _cli(gcs_address: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "ray_harness.cli", *args, "--address", gcs_address],
                          env=env, capture_output=True, text=True, timeout=240, check=False)


def _in_background(call: Any) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as error:  # surfaced by the caller's assertion
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker, outcome


def _wait_for_run(predicate: Any, name: str) -> dict[str, Any]:
    """The run named ``name`` once ``predicate`` holds for it (as ``status`` sees it: this driver is connected)."""
    from ray_harness.runtime._runs import runs_snapshot

    deadline = time.monotonic() + 240
    while True:
        runs = [run for run in runs_snapshot() if run["name"] == name]
        if runs and predicate(runs[0]):
            return runs[0]
        assert time.monotonic() < deadline, f"the run never reached the expected state; last seen: {runs}"
        time.sleep(0.5)


def test_cancel_stops_every_node_of_a_graph_run_and_the_driver_gets_the_cancelled_result(
        ray_session: dict[str, Any]) -> None:
    from tests.cancel_targets import wide_graph

    gcs = ray_session["gcs_address"]
    graph = wide_graph("cancel_cli_graph")
    worker, outcome = _in_background(lambda: graph("go"))
    try:
        slow = {f"slow{index}" for index in range(4)}
        running = _wait_for_run(lambda run: set(run["nodes_running"]) == slow, "cancel_cli_graph")
        assert running["cancellable"] is True and running["status"] == "running"

        cancelled = _cli(gcs, "cancel", running["run"])
        assert cancelled.returncode == 0, cancelled.stderr[-3000:]
        assert f"cancelled run {running['run']} (graph 'cancel_cli_graph'): nodes " in cancelled.stdout
        worker.join(timeout=240)
        assert not worker.is_alive()
    finally:
        if worker.is_alive():
            graph.cancel()
            worker.join(timeout=240)
        graph.shutdown()
    # The driver's graph(...) returned as after graph.cancel(): a CANCELLED result, no exception.
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert result.status == Status.CANCELLED
    assert result.results["entry"].status == Status.COMPLETED
    assert {node: result.results[node].status for node in slow} == dict.fromkeys(slow, Status.CANCELLED)
    assert "join" not in result.results or result.results["join"].status == Status.CANCELLED
    assert graph.state.status == Status.CANCELLED

    ended = _wait_for_run(lambda run: run["run"] == running["run"] and run["status"] != "running", "cancel_cli_graph")
    assert ended["status"] == "cancelled"
    assert {node: ended["nodes_done"][node] for node in slow} == dict.fromkeys(slow, "cancelled")

    # Again: the run ended; and an id no run has. Nothing is sent; both are said, with the runs there are.
    again = _cli(gcs, "cancel", running["run"], "nosuchrun")
    assert again.returncode == 1
    assert f"run {running['run']} (graph 'cancel_cli_graph') already ended: cancelled" in again.stderr
    assert "no run 'nosuchrun' on this cluster; the runs it knows:" in again.stderr
    assert running["run"] in again.stderr.split("the runs it knows:")[1]


def test_cancel_stops_an_evaluation_and_its_finished_rows_stay_written(ray_session: dict[str, Any],
                                                                      tmp_path: Path) -> None:
    from ray_harness.evaluation import evaluate

    gcs = ray_session["gcs_address"]
    target = "tests.cancel_targets:held_on_hold"
    output = tmp_path / "records.jsonl"
    rows = [{"prompt": "quick 0"}, {"prompt": "quick 1"}, {"prompt": "hold"}, {"prompt": "hold"}]
    started = time.time()
    worker, outcome = _in_background(lambda: evaluate(target, rows, runtime="ray", pool_size=1, output=str(output),
                                                      progress=False))
    try:
        running = _wait_for_run(lambda run: (run["started_at"] or 0) >= started and run["rows_completed"] == 2
                                and run["status"] == "running", target)
        cancelled = _cli(gcs, "cancel", running["run"])
        assert cancelled.returncode == 0, cancelled.stderr[-3000:]
        assert f"cancelled run {running['run']} (eval '{target}'): 2 row(s) done, 0 failed" in cancelled.stdout
        worker.join(timeout=240)
        assert not worker.is_alive()
    finally:
        if worker.is_alive():
            from ray_harness.telemetry.runs import cancel_run

            cancel_run(running["run"])
            worker.join(timeout=240)
    assert "error" not in outcome, outcome.get("error")
    summary = outcome["result"]
    assert summary["cancelled"] is True
    prompts = sorted(line for line in output.read_text().splitlines() if "quick" in line)
    assert len(prompts) == 2 and "hold" not in output.read_text()  # the held rows run again on resume


def test_cancel_stops_a_swarm_run(ray_session: dict[str, Any]) -> None:
    from tests.cancel_targets import slow_swarm

    swarm = slow_swarm("cancel_cli_swarm")
    worker, outcome = _in_background(lambda: swarm("go"))
    try:
        running = _wait_for_run(lambda run: run["nodes_running"] == ["solo"], "cancel_cli_swarm")
        cancelled = _cli(ray_session["gcs_address"], "cancel", running["run"][:8])  # a prefix is enough
        assert cancelled.returncode == 0, cancelled.stderr[-3000:]
        assert f"cancelled run {running['run']} (swarm 'cancel_cli_swarm'): nodes cancelled solo" in cancelled.stdout
        worker.join(timeout=240)
        assert not worker.is_alive()
    finally:
        if worker.is_alive():
            swarm.cancel()
            worker.join(timeout=240)
        swarm.shutdown()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"].status == Status.CANCELLED
