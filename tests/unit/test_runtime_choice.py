"""``runtime=``: a registered name or a runtime object, chosen by the caller (no Ray needed here)."""

from __future__ import annotations

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
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(["x"]), name="a"), "a")
    builder.build(runtime="local")("go")
    assert "ray_harness.runtime.multiagent" not in sys.modules
