"""The Ray tasks that run graph/swarm nodes and evaluation rows are named after them (the dashboard's task view).

The state API lives in the dashboard, which the shared test Ray runs without: the run happens in a driver
subprocess that starts its own local Ray with a dashboard, and reads the task names back through
``ray.util.state.list_tasks``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from tests.integration._local_cluster import ROOT

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

_DRIVER = """
    import json, sys, time
    import ray
    from ray.util.state import list_tasks
    from ray_harness import runtime
    from ray_harness.evaluation import evaluate
    from tests.integration import observed_agents

    runtime.init(address="local", num_cpus=2, include_dashboard=True, dashboard_port=int(sys.argv[1]))
    # Both stay up until their names are seen: a caller's actor (the graph's orchestrator) reports the tasks it
    # submitted, names included, to the state API a moment later, and a killed one never does.
    graph = observed_agents.observed_graph()
    graph("name the graph's nodes")
    swarm = observed_agents.observed_swarm()
    swarm("name the swarm's member")
    evaluate("tests.integration.observed_agents:metered", [{"prompt": "row zero"}, {"prompt": "row one"}],
             runtime="ray", progress=False)

    gcs = ray.get_runtime_context().gcs_address  # other Ray instances run on this machine: name ours
    node = "ray_harness.node:observed/research"
    deadline = time.monotonic() + 180
    while True:  # task events reach the state API a few seconds after the tasks ran
        exact = [t.name for t in list_tasks(address=gcs, filters=[("name", "=", node)], limit=100)]
        names = sorted({t.name for t in list_tasks(address=gcs, limit=10_000) if t.name.startswith("ray_harness.")})
        rows = [n for n in names if n.startswith("ray_harness.row:")]
        if (exact and "ray_harness.node:observed_swarm/solo" in names and len(names) >= 6
                and f"ray_harness.graph:{graph.id}" in names and f"ray_harness.swarm:{swarm.id}" in names
                and sorted(i for n in rows for i in n.rpartition("/")[2].split(",")) == ["0", "1"]) \\
                or time.monotonic() > deadline:
            break
        time.sleep(1)
    graph.shutdown()
    swarm.shutdown()
    print(json.dumps({"exact": exact, "names": names, "graph": graph.id, "swarm": swarm.id}))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_node_and_row_tasks_are_named_in_the_state_api() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(_DRIVER), str(_free_port())], cwd=ROOT,
                               env=env, timeout=500, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr[-4000:]
    seen = json.loads(next(line for line in reversed(completed.stdout.splitlines()) if line.startswith("{")))
    assert seen["exact"], seen  # found by an exact name filter, as an operator would
    names = set(seen["names"])
    assert {"ray_harness.node:observed/research", "ray_harness.node:observed/write",
            "ray_harness.node:observed_swarm/solo"} <= names, names
    # each invocation of an orchestrator is the task named after it, on its orchestration host
    assert {f"ray_harness.graph:{seen['graph']}", f"ray_harness.swarm:{seen['swarm']}"} <= names, names
    rows = [name for name in names if name.startswith("ray_harness.row:")]
    assert rows and all(name.startswith("ray_harness.row:tests.integration.observed_agents:metered/")
                        for name in rows), names
    ids = sorted(i for name in rows for i in name.rpartition("/")[2].split(","))
    assert ids == ["0", "1"], rows  # each row named once, by its index


def test_task_name_from_the_carriers_of_one_call() -> None:
    """How one call's name is made from the runs it carries (no Ray started)."""
    from ray_harness.runtime._telemetry import task_name
    from ray_harness.telemetry.propagation import attached, current_carrier
    from ray_harness.telemetry.runs import current_tags, row_scope, run_scope

    def carried(row: str) -> dict[str, object]:
        with run_scope("eval", "e"), row_scope(row):
            return {"trace_context": current_carrier()}

    assert task_name() == "" and task_name(None, {"trace_context": None}) == ""
    assert task_name(carried("3")) == "ray_harness.row:e/3"
    assert task_name(*(carried(str(i)) for i in (3, 4, 9))) == "ray_harness.row:e/3,4,9"
    many = task_name(*(carried(str(i)) for i in range(200)))
    shown, _, rest = many.rpartition(",+")
    assert len(many) <= 120 and shown.split("/")[1].split(",") == [str(i) for i in range(200 - int(rest))]
    # The label is not a metric tag, and attaching a carrier leaves it out of the trace context.
    options = carried("5")
    with attached(options["trace_context"]):  # type: ignore[arg-type]
        assert "row" not in current_tags() and current_tags()["eval"] == "e"
