"""A real multi-node Ray cluster on this machine (cluster/local.sh): placement and a node leaving."""

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
def cluster() -> Iterator[dict[str, Any]]:
    with local_cluster(workers=2) as started:
        yield started


def _driver(cluster: dict[str, Any], code: str, timeout: float = 240) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "token", "RAY_ADDRESS": cluster["address"]}
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, timeout=timeout,
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr[-4000:]
    # Ray may print its own log lines after ours (e.g. about the dead node): take our JSON line.
    return json.loads(next(line for line in reversed(completed.stdout.splitlines()) if line.startswith("{")))


def test_rows_run_on_the_node_their_pool_is_pinned_to(cluster: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "pinned.jsonl"
    result = _driver(cluster, f"""
        import json, ray
        from ray_harness import runtime
        from ray_harness.evaluation import evaluate
        from ray_harness.runtime import AgentPool
        runtime.init(namespace="pinned")
        node_of = {{k: n["NodeID"] for n in ray.nodes() if n["Alive"] for k in n["Resources"] if k.startswith("node")
                   and not k.startswith("node:")}}
        pool = AgentPool(size=1, resources={{"node2": 0.01}})
        summary = evaluate("tests.eval_targets:node_agent", [{{"prompt": str(i)}} for i in range(12)],
                           output={str(out)!r}, pool=pool)
        outputs = sorted({{json.loads(line)["output"].strip() for line in open({str(out)!r})}})
        print(json.dumps({{"expected": node_of["node2"], "outputs": outputs, "errors": summary["errors"]}}))
    """)
    assert result["errors"] == 0
    assert result["outputs"] == [result["expected"]]  # every row ran on the pinned node


def test_a_worker_node_leaving_mid_evaluation_loses_no_row(cluster: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "leaving.jsonl"
    pid_file = tmp_path / "raylet.pid"
    result = _driver(cluster, f"""
        import json, os, signal, threading, time, ray
        from ray_harness import runtime
        from ray_harness.evaluation import evaluate
        from ray_harness.runtime import AgentPool
        os.environ["RAY_HARNESS_TEST_DELAY"] = "0.2"
        runtime.init(namespace="leaving")
        pool_a = AgentPool(size=1, resources={{"node1": 0.01}}, max_restarts=-1)
        def kill_node():
            # The victim is the raylet of this cluster that holds the custom resource node1.
            time.sleep(1.5)
            for line in os.popen("pgrep -af raylet/raylet").read().splitlines():
                fields = line.split()
                if (fields[1].endswith("/raylet") and "static_resource_list=node1,1," in line
                        and ":{cluster["address"].split(":")[1]}" in line):
                    os.kill(int(line.split()[0]), signal.SIGKILL)
                    open({str(pid_file)!r}, "w").write(line.split()[0])
        threading.Thread(target=kill_node, daemon=True).start()
        summary = evaluate("tests.eval_targets:slow_node_agent", [{{"prompt": str(i)}} for i in range(80)],
                           output={str(out)!r}, pool=pool_a, concurrency=8)
        indices = sorted(json.loads(line)["index"] for line in open({str(out)!r}))
        print(json.dumps({{"indices": indices, "summary_errors": summary["errors"]}}))
    """)
    # 80 rows, 8 at a time, 0.2 s each: the evaluation outlasts the 1.5 s before the kill.
    assert pid_file.exists(), "the worker node was not killed"
    # Rows that were on the lost node either ran again elsewhere or were recorded with a typed error:
    # none is lost and none is duplicated.
    assert result["indices"] == list(range(80))


def _cli(cluster: dict[str, Any], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "token"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "ray_harness.cli", *args], cwd=ROOT, env=env, timeout=timeout,
                          capture_output=True, text=True, check=False)


def test_cli_submit_runs_a_ray_job_and_status_lists_harness_actors(cluster: dict[str, Any], tmp_path: Path) -> None:
    dashboard = cluster["dashboard"]
    submitted = _cli(cluster, "submit", "--address", dashboard, "--working-dir", str(ROOT), "--",
                     "demo", "--local", "--rows", "3", "--output-dir", str(tmp_path / "job"))
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    assert "SUCCEEDED" in submitted.stdout and "rows 3" in submitted.stdout
    failing = _cli(cluster, "submit", "--address", dashboard, "--working-dir", str(ROOT), "--",
                   "eval", "no_such_module:factory", "missing.jsonl", "--local")
    assert failing.returncode == 1 and "FAILED" in failing.stdout

    _driver(cluster, """
        import json
        from ray_harness import runtime
        from ray_harness.runtime import RemoteAgent
        runtime.init()
        RemoteAgent("tests.eval_targets:echo_agent", name="status-probe", detached=True)
        print(json.dumps({"ok": True}))
    """)
    try:
        status = _cli(cluster, "status", "--address", cluster["address"])
        assert status.returncode == 0, status.stderr[-3000:]
        assert "ray_harness:agent:status-probe" in status.stdout
    finally:
        _driver(cluster, """
            import json
            from ray_harness import runtime
            from ray_harness.runtime import RemoteAgent
            runtime.init()
            RemoteAgent.kill("status-probe")
            print(json.dumps({"ok": True}))
        """)
