"""Evaluations on a pool of Ray host actors (the product's main job)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ray_harness.evaluation import evaluate

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@pytest.fixture(scope="module")
def pool(ray_session: dict[str, Any]) -> Iterator[Any]:
    from ray_harness.runtime import AgentPool

    created = AgentPool(size=2)
    yield created
    # Shut down here, not whenever the garbage collector frees the pool: its hosts carry the shared host
    # names, and a late collection would kill hosts that a later module's pool looked up by name.
    created.shutdown()


def exact(row: dict, result: object) -> float:
    return 1.0 if str(result).strip() == f"echo: {row['prompt']}" else 0.0


def test_agent_rows_on_pooled_hosts(tmp_path: Path, pool: Any) -> None:
    rows = [{"prompt": f"p{i}"} for i in range(200)]
    rows[7]["prompt"] = "boom"
    out = tmp_path / "r.jsonl"
    summary = evaluate("tests.eval_targets:echo_agent", rows, scorers=[exact], concurrency=32, output=str(out),
                       pool=pool)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["index"] for r in records) == list(range(200))
    assert summary["rows"] == 200 and summary["errors"] == 1
    failed = next(r for r in records if r["index"] == 7)
    assert failed["error"]["type"] == "RuntimeError" and "boom" in failed["error"]["message"]
    assert summary["exact"] == pytest.approx(199 / 199)  # the errored row is not scored
    assert summary["tokens"]["total"] == 199 * 15


def test_graph_rows_and_throttling_on_pooled_hosts(tmp_path: Path, pool: Any) -> None:
    summary = evaluate("tests.eval_targets:chain_graph", [{"prompt": f"g{i}"} for i in range(20)],
                       output=str(tmp_path / "g.jsonl"), pool=pool, concurrency=8)
    assert summary["rows"] == 20 and summary["errors"] == 0
    records = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert {r["status"] for r in records} == {"completed"}
    throttled = evaluate("tests.eval_targets:throttled_agent", [{"prompt": f"t{i}"} for i in range(20)],
                         output=str(tmp_path / "t.jsonl"), pool=pool, concurrency=8)
    assert throttled["rows"] == 20 and throttled["errors"] == 0


def test_demo_command_on_ray(tmp_path: Path) -> None:
    from ray_harness.cli import main

    assert main(["demo", "--rows", "8", "--output-dir", str(tmp_path)]) == 0
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(records) == 8 and all(r["status"] == "completed" for r in records)


def test_consecutive_evaluations_with_default_pools_lose_no_rows(tmp_path: Path) -> None:
    # Each call builds its own default pool on the shared host names; none may get a host being torn down.
    for run in range(3):
        out = tmp_path / f"run{run}.jsonl"
        summary = evaluate("tests.eval_targets:echo_agent", [{"prompt": f"r{run}-{i}"} for i in range(10)],
                           output=str(out), pool_size=2)
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["error"] for r in records] == [None] * 10, f"run {run}"
        assert summary["errors"] == 0


def test_a_pool_after_shutdown_gets_fresh_hosts() -> None:
    from ray_harness.runtime import AgentPool

    # Its own namespace: shutting down kills the hosts of every pool of the namespace (the module's pool too).
    first = AgentPool(size=1, namespace="ray_harness_tests_fresh_hosts")
    pid = first.run_sync("tests.eval_targets:pid_agent", "x").message["content"][0]["text"]
    first.shutdown()
    second = AgentPool(size=1, namespace="ray_harness_tests_fresh_hosts")  # waits until the killed host gave up its name
    again = second.run_sync("tests.eval_targets:pid_agent", "x").message["content"][0]["text"]
    assert again != pid
    second.shutdown()


def test_failed_rows_on_hosts_record_what_they_spent(tmp_path: Path, pool: Any) -> None:
    out = tmp_path / "spent.jsonl"
    summary = evaluate("tests.eval_targets:long_agent", [{"prompt": f"l{i}"} for i in range(4)], output=str(out),
                       pool=pool)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["error"]["type"] for r in records} == {"MaxTokensReachedException"}
    assert [r["usage"]["totalTokens"] for r in records] == [15] * 4 and summary["tokens"]["total"] == 60
