"""Every script in examples/ runs offline (ScriptedModel) and prints what its docstring promises.

Scripts run as subprocesses, as a user runs them. The ones on Ray get ``RAY_ADDRESS`` of the test session's
Ray, so they join it instead of starting their own.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import missing_service

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _run(script: str, *args: str, ray_address: str | None = None, timeout: float = 240,
         stdin: str | None = None, returncode: int = 0, tmpdir: Path | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    env.pop("RAY_ADDRESS", None)
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=ROOT, env=env, timeout=timeout,
                          capture_output=True, text=True, check=False, input=stdin)
    assert done.returncode == returncode, \
        f"{script} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout if returncode == 0 else done.stderr


@pytest.fixture
def ray_address(ray_session: dict[str, Any]) -> str:
    return str(ray_session["gcs_address"])


def test_every_example_has_a_docstring_and_a_model_option() -> None:
    scripts = sorted(path for path in EXAMPLES.glob("*.py"))
    assert {path.name for path in scripts} >= {
        "quickstart.py", "human_approval_across_processes.py", "swarm_support_desk.py", "docker_sandbox_coder.py",
        "mcp_tools.py", "cancel_fanout.py", "graph_eval_on_cluster.py", "approval.py", "demo.py"}
    for path in scripts:
        source = path.read_text()
        assert ast.get_docstring(ast.parse(source)), f"{path.name} has no module docstring"
        assert '"--model"' in source, f"{path.name} has no --model option"


# -- in-process examples ---------------------------------------------------------------------------------------

def test_quickstart() -> None:
    out = _run("quickstart.py")
    assert "[hook] calling stock({'item': 'apples'})" in out
    assert "[hook] clear_inventory -> error: {'text': 'clear_inventory is not allowed in this shop'}" in out
    assert "[hook] invocation finished: end_turn" in out
    assert "answer: We have 12 apples and no pears." in out
    assert "inventory untouched: True" in out


def test_approval_and_demo_still_run() -> None:
    assert "old.log still exists: False" in _run("approval.py", "--yes")
    assert "[stop_reason=end_turn" in _run("demo.py")


def test_approval_leaves_no_temporary_directory(tmp_path: Path) -> None:
    assert "old.log still exists: False" in _run("approval.py", "--yes", tmpdir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # its work directory was left behind at every run


@pytest.mark.parametrize(("typed", "outcome"), [
    ("y\n", "old.log still exists: False"),
    ("\n", "old.log still exists: True"),  # the default, N
    ("", "old.log still exists: True"),  # no terminal (stdin closed): was an EOFError traceback
])
def test_approval_asks_on_the_terminal(typed: str, outcome: str) -> None:
    out = _run("approval.py", stdin=typed)
    assert "Delete old.log? [y/N] " in out
    assert outcome in out


def test_swarm_support_desk_locally() -> None:
    out = _run("swarm_support_desk.py")
    assert "[handoff] ['triage'] -> ['billing']" in out
    assert "members: triage -> billing -> tech" in out
    assert "status=completed" in out


def test_cancel_fanout_locally() -> None:
    out = _run("cancel_fanout.py", "--runtime", "local")
    assert "all 100 workers are running; cancelling" in out
    assert "graph status=cancelled; node statuses: {'cancelled': 100, 'completed': 1}" in out
    assert "cancel -> result latency:" in out


def test_mcp_tools_with_the_real_time_server() -> None:
    if not os.environ.get("RAY_HARNESS_MCP_TIME_SERVER"):
        try:
            import mcp_server_time  # noqa: F401
        except ImportError:
            missing_service("mcp-server-time is not available: run scripts/ci/mcp_time.sh (its own venv) and "
                            "source /tmp/ray_harness_ci_env, or pip install mcp-server-time")
    out = _run("mcp_tools.py")
    assert "tools from the server: ['time_convert_time', 'time_get_current_time']" in out
    assert '"timezone": "Asia/Tokyo"' in out and "17:30:00+09:00" in out  # 09:30 in Paris in winter


def test_mcp_tools_without_the_server_says_how_to_get_it() -> None:
    """Without mcp-server-time it printed "No module named mcp_server_time" and a long traceback."""
    if importlib.util.find_spec("mcp_server_time") is not None:
        pytest.skip("mcp-server-time is installed in this interpreter")
    env = {key: value for key, value in os.environ.items() if key != "RAY_HARNESS_MCP_TIME_SERVER"}
    done = subprocess.run([sys.executable, str(EXAMPLES / "mcp_tools.py")], cwd=ROOT,
                          env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.startswith("error: the mcp-server-time server is not installed here: `pip install "
                                  "mcp-server-time`, or set RAY_HARNESS_MCP_TIME_SERVER"), done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def _docker_with(image: str) -> None:
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get(image)
        client.close()
    except Exception as error:
        missing_service(f"dockerd with image {image} (run scripts/ci/docker.sh): {error}")


def test_docker_sandbox_coder() -> None:
    image = os.environ.get("RAY_HARNESS_TEST_IMAGE", "rh-busybox:test")
    _docker_with(image)
    out = _run("docker_sandbox_coder.py", "--image", image)
    assert "agent: fib.sh ran in the container and printed: 0 1 1 2 3 5 8 13 21 34" in out
    assert "run again with box.execute: exit 0, last number 34" in out


def test_docker_sandbox_coder_with_an_image_it_cannot_get_says_what_to_do() -> None:
    """Its default image, python:3.12-slim, on an engine that cannot pull: a traceback ending in a 500 error."""
    _docker_with(os.environ.get("RAY_HARNESS_TEST_IMAGE", "rh-busybox:test"))
    image = "ray-harness-test/no-such-image:missing"
    err = _run("docker_sandbox_coder.py", "--image", image, returncode=2)
    assert err.startswith(f"error: no container from {image}: "), err
    assert f"`docker pull {image}`" in err and "Traceback" not in err


# -- examples on the session's Ray -----------------------------------------------------------------------------

@pytest.mark.ray
def test_human_approval_across_processes(ray_address: str) -> None:
    out = _run("human_approval_across_processes.py", ray_address=ray_address)
    lines = out.splitlines()
    first = next(line for line in lines if "stop_reason=interrupt" in line)
    second = next(line for line in lines if "stop_reason=end_turn" in line)
    assert first.split("]")[0] != second.split("]")[0]  # two different driver processes
    assert "waiting for a human: refund-approval: Refund $42.50 on order A-1001?" in out
    assert "answer: Done: refunded $42.50 on order A-1001." in out


@pytest.mark.ray
def test_human_approval_rejected(ray_address: str) -> None:
    out = _run("human_approval_across_processes.py", "--reject", ray_address=ray_address)
    assert "answer: Done: refund of order A-1001 rejected by a human." in out


@pytest.mark.ray
def test_swarm_support_desk_on_ray(ray_address: str) -> None:
    out = _run("swarm_support_desk.py", "--runtime", "ray", ray_address=ray_address)
    assert "members: triage -> billing -> tech" in out
    assert "status=completed" in out


@pytest.mark.ray
def test_cancel_fanout_on_ray(ray_address: str) -> None:
    out = _run("cancel_fanout.py", ray_address=ray_address)
    assert "graph status=cancelled; node statuses: {'cancelled': 100, 'completed': 1}" in out
    assert "(ray runtime)" in out


@pytest.mark.ray
@pytest.mark.parametrize("option", [["--rows", "-1"], ["--concurrency", "0"]])
def test_graph_eval_on_cluster_refuses_bad_counts_before_starting_ray(option: list[str]) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / "graph_eval_on_cluster.py"), *option], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2 and f"argument {option[0]}: must be at least 1" in done.stderr
    assert "Traceback" not in done.stderr


def test_graph_eval_on_cluster(ray_address: str, tmp_path: Path) -> None:
    output = tmp_path / "results.jsonl"
    out = _run("graph_eval_on_cluster.py", "--output", str(output), ray_address=ray_address)
    assert "rows 6  errors 0  tokens 2400" in out
    assert "score names_the_product: mean 1.00 over 6 rows" in out
    assert len(output.read_text().splitlines()) == 6


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_serve_support_agent_demo_prints_only_its_own_lines_in_order() -> None:
    # As a newcomer runs it: its own local Ray (no RAY_ADDRESS). Ray Serve's logs stay out of the terminal,
    # "serving at" comes before the requests, and stopping the server prints no "graceful_shutdown failed".
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, str(EXAMPLES / "serve_support_agent.py"), "demo"], cwd=ROOT, env=env,
                          timeout=540, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    serving = re.fullmatch(r"serving at http://127\.0\.0\.1:\d+/ \(2 replicas, tasks in (\S+)\)", lines[0])
    asked = re.fullmatch(r"task (\S+): TASK_STATE_INPUT_REQUIRED", lines[1])
    assert serving and asked, lines
    assert lines[2] == "  Input required: approve_refund"
    [interrupt] = ast.literal_eval(lines[3].strip())["interrupts"]
    assert (interrupt["name"], interrupt["reason"]) == ("approve_refund", "Refund order 42?")
    assert lines[4:] == [f"task {asked[1]}: TASK_STATE_COMPLETED: Done: refunded order 42.", "server stopped"]
    assert not Path(serving[1]).parent.exists()  # its work directory (task store, server log) is removed

