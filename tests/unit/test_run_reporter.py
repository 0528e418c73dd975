from __future__ import annotations

import json
import types
from typing import Any

import pytest

from ray_harness.runtime._runs import _node_entry, merge_records, published
from ray_harness.telemetry import metrics, runs
from ray_harness.telemetry.propagation import attached


def _record(run: str, status: str = "completed") -> dict[str, Any]:
    return {"run": run, "nodes_started": ["a", "b"], "nodes_finished": {"a": "completed"}, "input_tokens": 3,
            "cost_usd": 0.5, "status": status, "name": "g\u00e9", "updated_at": 12.5}


def test_published_is_the_json_of_every_record() -> None:
    runs = {f"r{i}": _record(f"r{i}") for i in range(3)}
    encoded: dict[str, str] = {}
    text = published(1700000000.123, runs, encoded)
    assert text == json.dumps({"updated_at": 1700000000.123, "runs": list(runs.values())})
    assert set(encoded) == set(runs)
    assert published(2.0, {}, {}) == json.dumps({"updated_at": 2.0, "runs": []})


def test_published_reuses_the_encoding_of_an_unchanged_record() -> None:
    runs = {"old": _record("old"), "new": _record("new", "running")}
    encoded = {"old": json.dumps({"run": "old", "status": "as published before"})}
    text = published(3.0, runs, encoded)
    assert json.loads(text)["runs"] == [{"run": "old", "status": "as published before"}, runs["new"]]
    runs["new"]["status"] = "completed"
    encoded.pop("new")  # what RunReporter does when a record changes
    assert json.loads(published(4.0, runs, encoded))["runs"][1]["status"] == "completed"


def test_the_nodes_of_an_inner_run_are_recorded_apart_from_the_runs_own() -> None:
    own: tuple[dict[str, int], dict[str, str]] = ({}, {})
    inner: tuple[dict[str, int], dict[str, str]] = ({}, {})
    record = {"run": "r", "name": "outer", "nodes_running": own[0], "nodes_finished": own[1],
              "inner_running": inner[0], "inner_finished": inner[1]}  # "name": what run_started recorded here
    with runs.run_scope("graph", "outer"):
        assert _node_entry(record, "a") == ("a", *own)
        with runs.run_scope("swarm", "inner"):  # a swarm as a node: its members are no nodes of the graph
            assert _node_entry(record, "m") == ("inner/m", *inner)
        assert _node_entry(record, "b") == ("b", *own)
    with runs.run_scope("graph", "per_row"):  # a host's row graph: this process never saw the run's own scope
        assert _node_entry({**record, "name": None}, "gate") == ("per_row/gate", *inner)


def test_a_merged_run_lists_inner_nodes_but_counts_only_its_own_as_pending() -> None:
    own = {"run": "r", "kind": "graph", "name": "outer", "status": "running", "nodes_total": 3, "started_at": 1.0,
           "nodes_running": {"b": 1}, "nodes_finished": {"a": "completed"},
           "inner_running": {"inner/m": 2}, "inner_finished": {"inner/n": "completed"},
           "input_tokens": 5, "output_tokens": 1, "cost_usd": 0.0, "rows_completed": 0, "rows_failed": 0}
    [run] = merge_records([own], now=2.0)
    assert run["nodes_done"] == {"a": "completed", "inner/n": "completed"}
    assert run["nodes_running"] == ["b", "inner/m"]
    assert run["nodes_pending"] == 1  # c: neither done nor running


def test_a_run_record_names_the_job_of_the_driver_that_started_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run started by a call from another driver (a detached graph's orchestrator, shared hosts) is that
    driver's; a run this process starts itself is its own job's (``ray-harness status`` shows the ``job``)."""
    from ray_harness.runtime import _runs

    context = types.SimpleNamespace(get_worker_id=lambda: "worker-1")
    monkeypatch.setattr(_runs, "ray", types.SimpleNamespace(get_runtime_context=lambda: context,
                                                            is_initialized=lambda: False))  # no Ray: nothing sent
    monkeypatch.setattr(_runs, "job_id", lambda: "driver-1")  # the job of this process (an actor's creator)
    reporter: Any = metrics.add_sink(_runs.RunReporter())
    try:
        with attached({"ray-harness-tags": json.dumps({"job": "driver-2"})}), runs.run_scope("graph", "theirs") as run:
            pass
        with runs.run_scope("graph", "mine") as own:
            pass
    finally:
        metrics.remove_sink(reporter)
    assert reporter._runs[run]["job"] == "driver-2" and reporter._runs[own]["job"] == "driver-1"
