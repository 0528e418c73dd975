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
