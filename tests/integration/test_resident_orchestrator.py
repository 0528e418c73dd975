"""A Graph/Swarm object's orchestrator stays resident on its orchestration host (``runtime._resident``).

Assertions are on results, agents' histories and the host's list of resident copies; the hooks run on the host.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from ray_harness import GraphBuilder, Status
from ray_harness.hooks import BeforeNodeCallEvent, HookProvider, HookRegistry
from ray_harness.testing import text
from tests.multiagent.conftest import make_agent

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


class SkipFromTheThirdNodeCall(HookProvider):
    """Counts node calls in the hook object: from the third on, the node is skipped."""

    def __init__(self) -> None:
        self.calls = 0

    def register_hooks(self, registry: HookRegistry, **_: Any) -> None:
        registry.add_callback(BeforeNodeCallEvent, self.before)

    def before(self, event: BeforeNodeCallEvent) -> None:
        self.calls += 1
        if self.calls >= 3:
            event.cancel_node = "third call"


def two_node_graph(runtime: str, hooks: list[Any] | None = None) -> Any:
    builder = GraphBuilder()
    builder.add_node(make_agent("a", *[text("a done")] * 4), "a")
    builder.add_node(make_agent("b", *[text("b done")] * 4), "b")
    builder.add_edge("a", "b")
    builder.set_failure_policy("continue")  # a skipped node is a result, not the run's exception
    if hooks:
        builder.set_hook_providers(hooks)
    return builder.build(runtime=runtime)


def host_of(graph: Any) -> Any:
    import ray

    from ray_harness.runtime._cluster import current_namespace

    return ray.get_actor(graph._node_runner.orchestration_host_name, namespace=current_namespace())


def resident_key(graph: Any) -> str:
    return graph._node_runner._client.resident  # type: ignore[no-any-return]


async def statuses(graph: Any) -> list[tuple[Status, dict[str, Status]]]:
    outcome = []
    for _ in range(2):
        result = await graph.invoke_async("go")
        outcome.append((result.status, {node: r.status for node, r in result.results.items()}))
    return outcome


async def test_hook_state_carries_over_between_invocations_as_in_process() -> None:
    local = await statuses(two_node_graph("local", [SkipFromTheThirdNodeCall()]))
    graph = two_node_graph("ray", [SkipFromTheThirdNodeCall()])
    try:
        on_ray = await statuses(graph)
        assert resident_key(graph) in await host_of(graph).resident_orchestrations.remote()
    finally:
        graph.shutdown()
    assert on_ray == local
    assert local[0][1] == {"a": Status.COMPLETED, "b": Status.COMPLETED}
    assert local[1] != local[0]  # the hook's third call skipped a node of the second invocation


async def test_the_drivers_edits_between_invocations_reach_the_resident_copy() -> None:
    graph = two_node_graph("ray")
    try:
        await graph.invoke_async("first")
        assert len(graph.nodes["a"].executor.messages) == 2
        graph.nodes["a"].executor.messages.clear()  # the driver's edit: the host's copy must see it
        await graph.invoke_async("second")
        assert [m["role"] for m in graph.nodes["a"].executor.messages] == ["user", "assistant"]
        assert len(graph.nodes["b"].executor.messages) == 4  # untouched: it kept its history
        await graph.invoke_async("third")
        assert len(graph.nodes["a"].executor.messages) == 4
    finally:
        graph.shutdown()


async def test_a_host_without_the_copy_gets_the_graph_shipped_again() -> None:
    graph = two_node_graph("ray")
    try:
        await graph.invoke_async("first")
        host, key = host_of(graph), resident_key(graph)
        assert key in await host.resident_orchestrations.remote()
        assert await host.release_orchestrations.remote([key]) == 1  # as after a restart or the idle timeout
        result = await graph.invoke_async("second")
        assert result.status == Status.COMPLETED
        assert len(graph.nodes["a"].executor.messages) == 4  # the driver's copy was authoritative: nothing lost
        assert key in await host.resident_orchestrations.remote()  # kept again
    finally:
        graph.shutdown()


async def test_a_hook_added_after_the_first_invocation_runs_on_the_host() -> None:
    graph = two_node_graph("ray")
    try:
        assert (await graph.invoke_async("first")).results["b"].status == Status.COMPLETED

        def skip_b(event: BeforeNodeCallEvent) -> None:
            if event.node_id == "b":
                event.cancel_node = "skipped"

        graph.add_hook(skip_b)
        result = await graph.invoke_async("second")
        assert "b" not in result.results or result.results["b"].status != Status.COMPLETED
    finally:
        graph.shutdown()


async def test_shutdown_releases_the_resident_copy() -> None:
    graph = two_node_graph("ray")
    await graph.invoke_async("first")
    host, key = host_of(graph), resident_key(graph)
    assert key in await host.resident_orchestrations.remote()
    graph.shutdown()
    deadline = time.monotonic() + 60  # the release is one fire-and-forget message
    while key in await host.resident_orchestrations.remote():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
