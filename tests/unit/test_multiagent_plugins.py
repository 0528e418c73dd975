"""``Graph/Swarm(plugins=[...])`` and ``GraphBuilder.set_plugins``: Strands' ``MultiAgentPlugin``."""

from __future__ import annotations

import asyncio
import io
import pickle
import threading
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent, GraphBuilder, Swarm
from ray_harness.hooks import (
    AfterMultiAgentInvocationEvent,
    AfterNodeCallEvent,
    BeforeModelCallEvent,
    BeforeNodeCallEvent,
    MultiAgentInitializedEvent,
)
from ray_harness.multiagent import Graph
from ray_harness.multiagent.base import MultiAgentBase
from ray_harness.plugins import MultiAgentPlugin, Plugin, hook
from ray_harness.testing import ScriptedModel, text


class NodeLog(MultiAgentPlugin):
    """Records the orchestrator's events, and what ``init_multi_agent`` saw."""

    name = "node-log"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def init_multi_agent(self, orchestrator: MultiAgentBase) -> None:
        # Called with the configured orchestrator, before the plugin's own hooks are registered.
        self.seen.append(f"init {orchestrator.id} hooks={orchestrator.hooks.has_callbacks(BeforeNodeCallEvent)}")

    @hook
    def initialized(self, event: MultiAgentInitializedEvent) -> None:
        self.seen.append("initialized")

    @hook
    def node(self, event: BeforeNodeCallEvent | AfterNodeCallEvent) -> None:
        self.seen.append(f"{type(event).__name__} {event.node_id}")


def _agent(name: str, *steps: Any, **kwargs: Any) -> Agent:
    return Agent(ScriptedModel(*steps), name=name, retry_strategy=None, **kwargs)


def _graph(*plugins: MultiAgentPlugin) -> Graph:
    builder = GraphBuilder()
    builder.add_node(_agent("a", text("x")), "a")
    builder.add_node(_agent("b", text("y")), "b")
    builder.add_edge("a", "b")
    builder.set_graph_id("g")
    return builder.set_plugins(list(plugins)).build(runtime="local")


def test_a_graph_initialises_its_plugins_then_their_hooks_see_every_event() -> None:
    plugin = NodeLog()
    graph = _graph(plugin)
    graph("go")
    assert plugin.seen == ["init g hooks=False", "initialized",
                           "BeforeNodeCallEvent a", "AfterNodeCallEvent a",
                           "BeforeNodeCallEvent b", "AfterNodeCallEvent b"]
    assert graph._plugin_registry.plugins == {"node-log": plugin}


def test_plugin_hooks_are_registered_after_the_hooks_given_in_hooks() -> None:
    order: list[str] = []

    class Later(MultiAgentPlugin):
        name = "later"

        @hook
        def before(self, event: BeforeNodeCallEvent) -> None:
            order.append("plugin before")

        @hook
        def after(self, event: AfterMultiAgentInvocationEvent) -> None:
            order.append("plugin after")

    def before(event: BeforeNodeCallEvent) -> None:
        order.append("hooks= before")

    def after(event: AfterMultiAgentInvocationEvent) -> None:
        order.append("hooks= after")

    builder = GraphBuilder()
    builder.add_node(_agent("a", text("x")), "a")
    builder.set_hook_providers([before, after]).set_plugins([Later()]).build(runtime="local")("go")
    # Registered later: after hooks= in a Before* event, before them in an After* one (reversed, as in Strands).
    assert order == ["hooks= before", "plugin before", "plugin after", "hooks= after"]


async def test_a_swarm_awaits_an_async_init_inside_a_running_loop_and_fires_the_hooks() -> None:
    class AsyncInit(NodeLog):
        name = "async-init"

        async def init_multi_agent(self, orchestrator: MultiAgentBase) -> None:  # type: ignore[override]
            await asyncio.sleep(0)
            self.seen.append(f"async init {orchestrator.id}")

    plugin = AsyncInit()
    swarm = Swarm([_agent("solo", text("done"))], plugins=[plugin], runtime="local", id="s")
    await swarm.invoke_async("go")
    assert plugin.seen == ["async init s", "initialized", "BeforeNodeCallEvent solo", "AfterNodeCallEvent solo"]


class AgentOnly(Plugin):
    name = "agent-only"


@pytest.mark.parametrize(("plugins", "error", "message"), [
    (NodeLog(), TypeError, "plugins must be a list of MultiAgentPlugin objects, got NodeLog"),
    ([NodeLog(), "x"], TypeError, r"plugins\[1\] must be a ray_harness.plugins.MultiAgentPlugin, got str"),
    ([NodeLog], TypeError, r"plugins\[0\] must be .*got the class NodeLog \(pass an instance: NodeLog\(\)\)"),
    ([AgentOnly()], TypeError, r"plugins\[0\] .*an agent Plugin \(pass it to Agent\(plugins=\)"),
    ([NodeLog(), NodeLog()], ValueError, r"plugin_name=<node-log> .*plugins\[0\] and plugins\[1\]"),
])
def test_wrong_plugins_are_named_before_a_swarm_changes_its_members(plugins: Any, error: type[Exception],
                                                                     message: str) -> None:
    member = _agent("solo")
    with pytest.raises(error, match=message):
        Swarm([member], plugins=plugins, runtime="local")
    assert "handoff_to_agent" not in member.tool_names
    with pytest.raises(error, match=message):
        GraphBuilder().set_plugins(plugins)


def test_an_agent_refuses_an_orchestrator_plugin_and_says_where_it_goes() -> None:
    with pytest.raises(TypeError, match=r"plugins\[0\] .*NodeLog, a MultiAgentPlugin \(pass it to Graph or Swarm"):
        _agent("a", plugins=[NodeLog()])


class _BothBody:
    """One object at both levels: an agent hook and a node hook on shared state."""

    name = "both"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def init_agent(self, agent: Agent) -> None:
        self.seen.append(f"init_agent {agent.name}")

    def init_multi_agent(self, orchestrator: MultiAgentBase) -> None:
        self.seen.append(f"init_multi_agent {orchestrator.id}")

    @hook
    def model(self, event: BeforeModelCallEvent) -> None:
        self.seen.append("model")

    @hook
    def node(self, event: BeforeNodeCallEvent) -> None:
        self.seen.append(f"node {event.node_id}")


class Both(_BothBody, Plugin, MultiAgentPlugin):
    pass


class BothTheOtherWay(_BothBody, MultiAgentPlugin, Plugin):
    pass


@pytest.mark.parametrize("kind", [Both, BothTheOtherWay])
def test_a_plugin_of_both_kinds_is_discovered_once_and_works_at_both_levels(
        kind: type[_BothBody], monkeypatch: pytest.MonkeyPatch) -> None:
    from ray_harness.plugins import _base

    scans: list[object] = []
    discover = _base.discover_hooks
    monkeypatch.setattr(_base, "discover_hooks", lambda instance: scans.append(instance) or discover(instance))
    plugin: Any = kind()
    assert len(scans) == 1 and [h.__name__ for h in plugin.hooks] == ["model", "node"]
    swarm = Swarm([_agent("solo", text("done"), plugins=[plugin])], plugins=[plugin], runtime="local", id="s")
    swarm("go")
    assert plugin.seen == ["init_agent solo", "init_multi_agent s", "node solo", "model"]
    assert len(scans) == 1


class _LocksRebuilt(cloudpickle.CloudPickler):  # type: ignore[misc]
    """cloudpickle with locks made anew on loading, as runtime="ray" ships an orchestrator to its host."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type(threading.Lock())):
            return threading.Lock, ()
        return super().reducer_override(obj)


def _shipped(value: Any) -> Any:
    buffer = io.BytesIO()
    _LocksRebuilt(buffer).dump(value)
    return pickle.loads(buffer.getvalue())


def test_a_shipped_graph_fires_the_hooks_of_its_shipped_plugin() -> None:
    plugin = NodeLog()
    graph = _graph(plugin)
    shipped = _shipped(graph)
    assert isinstance(shipped, Graph)
    shipped("go")
    copy = shipped._plugin_registry.plugins["node-log"]
    assert isinstance(copy, NodeLog) and copy is not plugin
    assert plugin.seen == ["init g hooks=False", "initialized"]  # the driver's plugin saw no run
    assert copy.seen[2:] == ["BeforeNodeCallEvent a", "AfterNodeCallEvent a",
                             "BeforeNodeCallEvent b", "AfterNodeCallEvent b"]
    # The shipped registry's callbacks are bound to that same shipped object, not to a copy of their own.
    callbacks = shipped.hooks.get_callbacks_for(BeforeNodeCallEvent(source=shipped, node_id="a"))
    assert {callback.__self__ for callback in callbacks} == {copy}  # type: ignore[attr-defined]


def test_strands_import_paths() -> None:
    import ray_harness
    from ray_harness.plugins import multiagent_plugin

    assert ray_harness.MultiAgentPlugin is MultiAgentPlugin is multiagent_plugin.MultiAgentPlugin
