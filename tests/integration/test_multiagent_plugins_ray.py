"""A Graph's ``MultiAgentPlugin`` on ``runtime="ray"``: shipped with the graph, its hooks run on the orchestration host.

The plugin class is defined in the test, so cloudpickle ships it by value (as a script's class); what its hooks
write to ``invocation_state`` comes back with the run's end state.
"""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness import GraphBuilder, Status
from ray_harness.hooks import AfterNodeCallEvent
from ray_harness.multiagent.base import MultiAgentBase
from ray_harness.plugins import MultiAgentPlugin, hook
from ray_harness.testing import text
from tests.multiagent.conftest import make_agent

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


async def test_a_graph_plugin_is_shipped_and_its_hooks_run_on_the_orchestration_host() -> None:
    class NodeTrail(MultiAgentPlugin):
        name = "node-trail"

        def __init__(self) -> None:
            super().__init__()
            self.finished: list[str] = []

        def init_multi_agent(self, orchestrator: MultiAgentBase) -> None:
            self.finished.append("init")  # in the driver, where the graph is built

        @hook
        def done(self, event: AfterNodeCallEvent) -> None:
            self.finished.append(event.node_id)  # on the host: the shipped copy
            event.invocation_state["trail"] = list(self.finished)

    plugin = NodeTrail()
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("x")), "a")
    builder.add_node(make_agent("b", text("y")), "b")
    builder.add_edge("a", "b")
    graph = builder.set_plugins([plugin]).build(runtime="ray")
    result = await graph.invoke_async("t")
    assert result.status == Status.COMPLETED
    trail: Any = graph._invocation_state["trail"]  # the end state came back from the orchestration host
    assert trail == ["init", "a", "b"]  # the shipped plugin kept its state between the two hooks
    assert plugin.finished == ["init"]  # the driver's plugin saw no node


async def test_an_unpicklable_graph_plugin_is_named_in_the_error(tmp_path: Any) -> None:
    class FileLog(MultiAgentPlugin):
        name = "file-log"

        def __init__(self, handle: Any) -> None:
            super().__init__()
            self.handle = handle  # an open file: it does not pickle

        @hook
        def done(self, event: AfterNodeCallEvent) -> None:
            self.handle.write(event.node_id)

    with open(tmp_path / "log.txt", "w", encoding="utf-8") as handle:  # noqa: ASYNC230 - never written here
        builder = GraphBuilder()
        builder.add_node(make_agent("a", text("x")), "a")
        graph = builder.set_plugins([FileLog(handle)]).build(runtime="ray")
        with pytest.raises(TypeError, match=r"plugin 'file-log' \(FileLog: .*runtime='local'"):
            await graph.invoke_async("t")
