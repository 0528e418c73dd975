"""The first Ray Job on a freshly started cluster/local.sh cluster, submitted as cluster/README.md says.

It used to fail on every fresh cluster ("No module named 'my_pkg'", "dataset file data.jsonl does not
exist"): the worker nodes shared the head's session dir, and when the job's driver connected, a worker
node's runtime-env agent re-extracted the job's working_dir over the directory the driver was running in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration._local_cluster import ROOT, local_cluster

pytestmark = [pytest.mark.ray, pytest.mark.reliability]


@pytest.fixture(scope="module")
def fresh_cluster() -> Iterator[dict[str, Any]]:
    with local_cluster(workers=1) as started:
        yield started


def _project(root: Path) -> Path:
    """A user's project: a package with a target factory and a dataset, nothing of this repository."""
    package = root / "my_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "targets.py").write_text(textwrap.dedent("""
        from ray_harness import Agent
        from ray_harness.testing import ScriptedModel, text

        def build_graph():
            return Agent(ScriptedModel(lambda call: text(f"seen {call.last_text}"), record_calls=False),
                         name="first_job")
    """))
    (root / "data.jsonl").write_text("".join(json.dumps({"prompt": f"row {i}"}) + "\n" for i in range(3)))
    return root


def test_the_first_job_of_a_fresh_cluster_imports_the_project_and_its_results_come_back(
        fresh_cluster: dict[str, Any], tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "token"}
    env.pop("RAY_ADDRESS", None)
    submitted = subprocess.run(
        [sys.executable, "-m", "ray_harness.cli", "submit", "--address", fresh_cluster["dashboard"],
         "--download", "results.jsonl", "--download-dir", str(tmp_path / "back"), "--",
         "eval", "my_pkg.targets:build_graph", "data.jsonl", "--output", "results.jsonl"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False)
    shown = submitted.stdout[-4000:] + submitted.stderr[-4000:]
    assert submitted.returncode == 0, shown
    assert "SUCCEEDED" in submitted.stdout and "rows 3  errors 0" in submitted.stdout, shown
    records = [json.loads(line) for line in (tmp_path / "back" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["output"].strip() for r in records) == ["seen row 0", "seen row 1", "seen row 2"]
    assert not (project / "results.jsonl").exists()  # written on the cluster, brought back by --download


def test_the_graph_eval_example_runs_as_a_ray_job_on_the_cluster(fresh_cluster: dict[str, Any],
                                                                 tmp_path: Path) -> None:
    """examples/graph_eval_on_cluster.py, submitted with ``ray-harness submit`` as its docstring says."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "token"}
    env.pop("RAY_ADDRESS", None)
    env.pop("EXAMPLE_MODEL", None)  # the offline ScriptedModel nodes
    submitted = subprocess.run(
        [sys.executable, "-m", "ray_harness.cli", "submit", "--address", fresh_cluster["dashboard"],
         "--working-dir", "examples", "--download", "graph_eval_results.jsonl",
         "--download-dir", str(tmp_path), "--",
         "eval", "graph_eval_on_cluster:build_graph", "graph_eval_questions.jsonl",
         "--scorer", "graph_eval_on_cluster:names_the_product", "--output", "graph_eval_results.jsonl"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    shown = submitted.stdout[-4000:] + submitted.stderr[-4000:]
    assert submitted.returncode == 0, shown
    assert "SUCCEEDED" in submitted.stdout and "rows 6  errors 0  tokens 2400" in submitted.stdout, shown
    assert "score names_the_product: mean 1.000" in submitted.stdout, shown
    records = [json.loads(line) for line in (tmp_path / "graph_eval_results.jsonl").read_text().splitlines()]
    products = [json.loads(line)["product"] for line in (ROOT / "examples/graph_eval_questions.jsonl").read_text()
                .splitlines() if line.strip()]
    assert len(records) == 6 and all(r["status"] == "completed" for r in records), records
    assert sorted(r["scores"]["names_the_product"] for r in records) == [1.0] * 6
    replies = sorted(str(r["output"]).lower() for r in records)
    assert all(any(p in reply for p in products) and "warranty" in reply for reply in replies), replies
    assert not (ROOT / "examples/graph_eval_results.jsonl").exists()  # written on the cluster, downloaded
