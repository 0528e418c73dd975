"""Extensions from a real installed plugin (``tests/plugins/rh_test_plugin``): loaded by entry point in this
process, and in every actor the runtime starts (a ``RemoteAgent``, pooled Graph hosts), with no extra step."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ray_harness import Agent, GraphBuilder, Status, tool
from ray_harness.extensions import ExtensionError, loading, use
from ray_harness.testing import ScriptedModel, text, tool_call
from tests.extension_state import clean_extensions  # noqa: F401 - the autouse fixture
from tests.plugin_fixture import installed_test_plugin  # noqa: F401 - the fixture

pytestmark = pytest.mark.usefixtures("installed_test_plugin")


@tool
def square(x: int) -> int:
    """Square a number."""
    return x * x


def counting_agent(name: str = "agent") -> Agent:
    return Agent(ScriptedModel(tool_call("square", {"x": 3}), text(f"{name} done")), tools=[square], name=name)




def test_entry_point_by_name_and_by_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    handle = use("rh_test_plugin")
    assert handle.name == "rh_test_plugin" and use("rh_test_plugin") is handle
    agent = counting_agent()
    agent("x")
    assert agent.state.get("rh_test_plugin") == {"pid": os.getpid(), "scope": "lead", "model_calls": 2,
                                                 "tool_calls": 1, "tools": ["square"]}
    assert loading.forwarded_names() == ["rh_test_plugin"]
    loading.reset()
    monkeypatch.setenv(loading.ENV_VAR, "rh_test_plugin")
    agent = counting_agent()
    agent("x")  # read when this process first builds an agent chain
    assert agent.state.get("rh_test_plugin")["model_calls"] == 2


def test_each_call_carries_the_callers_list_and_the_callee_adopts_it() -> None:
    from ray_harness.telemetry.propagation import attached, current_carrier

    # No extension: calls carry no list (only the caller's job, when connected to Ray).
    assert loading.carried_names() is None and "ray-harness-extensions" not in (current_carrier() or {})
    handle = use("rh_test_plugin")
    carrier = current_carrier()
    assert carrier is not None and loading.carried_names() == ["rh_test_plugin"]
    # Now play the actor: a process with an in-code install of its own, started before the caller's use().
    loading.reset()
    own = use(lambda registry, config: None)
    with attached(carrier):
        assert [extension.use for extension in loading.installed()] == ["rh_test_plugin", own.name]
    handle.remove()
    loading.adopt([])  # the caller removed it: so does the callee, keeping its own install, and forwards that
    assert [extension.use for extension in loading.installed()] == [own.name]
    assert loading.carried_names() == []
    loading.reset()
    loading.adopt([])  # a process that never had any (a fresh orchestrator) still passes an empty list on
    assert loading.carried_names() == []
    with pytest.raises(ExtensionError, match="unknown extension 'rh_missing'"):
        loading.adopt(["rh_missing"])


def test_a_failing_install_names_the_entry_point() -> None:
    with pytest.raises(ExtensionError, match="extension 'rh_test_plugin_broken' failed to install: RuntimeError"):
        use("rh_test_plugin_broken")


@pytest.mark.ray
def test_the_plugin_runs_inside_a_remote_agent_actor_lead_and_as_a_tool(ray_session: Any) -> None:
    from ray_harness.runtime import RemoteAgent

    use("rh_test_plugin")  # use(name) in the driver: forwarded to the actor it starts
    remote = RemoteAgent(counting_agent("remote"))
    try:
        assert str(remote("x")) == "remote done\n"
        report = remote.state.get("rh_test_plugin")
        assert report["pid"] != os.getpid()
        assert (report["scope"], report["model_calls"], report["tool_calls"]) == ("lead", 2, 1)
        remote_child = RemoteAgent(Agent(ScriptedModel(text("child answer")), name="child"))
        try:
            parent = Agent(ScriptedModel(tool_call("child", {"input": "q"}), text("parent done")), name="parent",
                           tools=[remote_child.as_tool(preserve_context=True)])
            parent("go")
            child_report = remote_child.state.get("rh_test_plugin")
            assert (child_report["scope"], child_report["model_calls"]) == ("subagent", 1)
            assert parent.state.get("rh_test_plugin")["tools"] == ["child"]
        finally:
            remote_child.shutdown()
    finally:
        remote.shutdown()


@pytest.mark.ray
async def test_the_plugin_runs_on_pooled_graph_nodes(ray_session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from ray_harness.runtime._multiagent_pool import default_pool

    monkeypatch.setenv(loading.ENV_VAR, "rh_test_plugin")  # the variable, forwarded to every actor started
    # Hosts get the list when they start: the session's shared pool may predate this test, so it restarts
    # (the next use of the shared pool builds a fresh one, as after any shutdown).
    default_pool().shutdown()
    builder = GraphBuilder()
    builder.add_node(counting_agent("first"), "first")
    builder.add_node(counting_agent("second"), "second")
    builder.add_edge("first", "second")
    graph = builder.build(runtime="ray")
    result = await graph.invoke_async("go")
    assert result.status == Status.COMPLETED
    host_pids = {host["pid"] for host in await default_pool().stats()}
    for name in ("first", "second"):
        report = graph.nodes[name].executor.state.get("rh_test_plugin")
        assert report["pid"] in host_pids and report["pid"] != os.getpid()
        assert (report["scope"], report["model_calls"], report["tool_calls"]) == ("lead", 2, 1)


@pytest.mark.ray
async def test_use_after_hosts_and_actors_exist_reaches_the_chains_they_build_afterwards(ray_session: Any) -> None:
    from ray_harness.runtime import RemoteAgent
    from ray_harness.runtime._multiagent_pool import default_pool, orchestration_pool

    runs: list[str] = []

    async def run_graph() -> Any:
        name = f"node{len(runs)}"  # a new node each time: nothing is left from an earlier run on its host
        runs.append(name)
        builder = GraphBuilder()
        builder.add_node(counting_agent(name), name)
        graph = builder.build(runtime="ray")
        assert (await graph.invoke_async("go")).status == Status.COMPLETED
        return graph.nodes[name].executor.state.get("rh_test_plugin")

    # Fresh hosts: the session's shared pool may have started with an earlier test's variable (this driver,
    # reset, never had an extension, so its calls carry no list that would make them drop it).
    default_pool().shutdown()
    orchestration_pool().shutdown()  # the graph's orchestration host too: it builds no agent, but calls the hosts
    looping = ScriptedModel([tool_call("square", {"x": 3}), text("remote done")], loop=True)
    remote = RemoteAgent(Agent(looping, tools=[square], name="remote"))  # started with no extension
    try:
        assert await run_graph() is None  # the pool's hosts exist now, without the plugin
        await remote.invoke_async("x")
        assert (await remote.get_state_async()).get("rh_test_plugin") is None
        host_pids = {host["pid"] for host in await default_pool().stats()}
        handle = use("rh_test_plugin")  # in the driver, after the hosts and the actor started
        report = await run_graph()
        assert report is not None and report["pid"] in host_pids  # the same hosts, now with the plugin
        assert (report["scope"], report["model_calls"], report["tool_calls"]) == ("lead", 2, 1)
        await remote.invoke_async("x")
        report = (await remote.get_state_async()).get("rh_test_plugin")
        assert report is not None and (report["scope"], report["model_calls"]) == ("lead", 2)
        handle.remove()  # and a removal reaches them as well
        assert await run_graph() is None
    finally:
        remote.shutdown()
