"""``runtime=``: a registered name or a runtime object, chosen by the caller (no Ray needed here)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from ray_harness import Agent, GraphBuilder, Swarm
from ray_harness.multiagent.node_runner import LocalNodeRunner
from ray_harness.testing import ScriptedModel


class _CountingRuntime:
    """A runtime object: Graph/Swarm ask it for their node executor."""

    def __init__(self) -> None:
        self.built: list[LocalNodeRunner] = []

    def node_runner(self) -> LocalNodeRunner:
        executor = LocalNodeRunner()
        self.built.append(executor)
        return executor


def test_a_runtime_object_builds_the_node_executor() -> None:
    runtime = _CountingRuntime()
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(["done"]), name="a"), "a")
    graph = builder.build(runtime=runtime)  # type: ignore[arg-type]
    assert graph("go").completed_nodes == 1
    swarm = Swarm([Agent(ScriptedModel(["done"]), name="b")], runtime=runtime)  # type: ignore[arg-type]
    assert str(swarm("go").status.value) == "completed"
    assert len(runtime.built) == 2


@pytest.mark.parametrize(("runtime", "error"), [("cluster", ValueError), (object(), TypeError)])
def test_an_unknown_runtime_is_a_clear_error(runtime: Any, error: type[Exception]) -> None:
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(["x"]), name="a"), "a")
    with pytest.raises(error, match="runtime"):
        builder.build(runtime=runtime)


def test_choosing_local_never_imports_the_ray_runtime() -> None:
    # In a fresh interpreter: earlier tests of the same session may have imported the runtime already.
    code = ("import sys\n"
            "from ray_harness import Agent, GraphBuilder\n"
            "from ray_harness.testing import ScriptedModel\n"
            "builder = GraphBuilder()\n"
            "builder.add_node(Agent(ScriptedModel(['x']), name='a'), 'a')\n"
            "builder.build(runtime='local')('go')\n"
            "print(sorted(m for m in sys.modules if m.startswith('ray_harness.runtime') or m.split('.')[0] == 'ray'))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def _graph() -> Any:
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(["first"]), name="a"), "a")
    builder.add_node(Agent(ScriptedModel(["second"]), name="b"), "b")
    builder.add_edge("a", "b")
    return builder.build(runtime="local")


def test_run_state_carries_what_a_run_changed_and_nothing_else() -> None:
    ran, fresh = _graph(), _graph()
    ran("go")
    state = ran.run_state()
    assert set(state.fields) == set(type(ran).RUN_FIELDS)
    assert "nodes" not in state.fields and "hooks" not in state.fields  # configuration stays where it is
    fresh.apply_run_state(state)
    assert fresh.state.status.value == "completed"
    assert [node.node_id for node in fresh.state.execution_order] == ["a", "b"]
    assert fresh.nodes["b"].execution_status.value == "completed"
    assert str(fresh.nodes["b"].result.result) == "second\n"


def test_run_state_of_another_shape_is_refused() -> None:
    from ray_harness.multiagent.base import RunState

    graph = _graph()
    with pytest.raises(ValueError, match="unknown fields"):
        graph.apply_run_state(RunState(fields={"edges": []}, nodes={}))
    with pytest.raises(ValueError, match="nodes"):
        graph.apply_run_state(RunState(fields={}, nodes={"zzz": {}}))
