"""``Agent(plugins=[...])``: Strands' plugins — ``@hook`` / ``@tool`` methods, ``init_agent``, names."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any, Union

import cloudpickle
import pytest

from ray_harness import Agent, HookProvider, HookRegistry, tool
from ray_harness.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AgentInitializedEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
)
from ray_harness.plugins import Plugin, hook
from ray_harness.testing import ScriptedModel, text, tool_call


class Recorder(Plugin):
    """Records the hooks that fired; its tool reads the record."""

    name = "recorder"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    @hook
    def before_model(self, event: BeforeModelCallEvent) -> None:
        self.seen.append("before_model")

    @hook
    def around_invocation(self, event: BeforeInvocationEvent | AfterInvocationEvent) -> None:
        self.seen.append(type(event).__name__)

    @tool
    def hooks_seen(self, prefix: str = "") -> str:
        """The hooks that fired so far.

        Args:
            prefix: Put before the answer.
        """
        return prefix + ",".join(self.seen)


def _agent(*steps: Any, **kwargs: Any) -> Agent:
    return Agent(ScriptedModel(*steps), retry_strategy=None, **kwargs)


# -- discovery -------------------------------------------------------------------------------------------


class Parent(Plugin):
    name = "parent"

    @hook
    def first(self, event: BeforeModelCallEvent) -> None: ...

    @hook
    def second(self, event: BeforeModelCallEvent) -> None: ...

    @hook
    def dropped(self, event: BeforeModelCallEvent) -> None: ...

    @tool
    def parent_tool(self) -> str:
        """A parent's tool."""
        return "parent"

    @tool
    def shared_tool(self) -> str:
        """Overridden below."""
        return "parent"


class Child(Parent):
    name = "child"

    @hook
    def own(self, event: BeforeModelCallEvent) -> None: ...

    @hook
    def first(self, event: BeforeModelCallEvent) -> None: ...  # overrides: keeps the parent's place

    def dropped(self, event: BeforeModelCallEvent) -> None: ...  # overridden without @hook: not a hook

    @tool
    def shared_tool(self) -> str:
        """The child's version."""
        return "child"


def test_hooks_are_found_in_declaration_order_parents_first_overrides_replacing() -> None:
    plugin = Child()
    assert [h.__name__ for h in plugin.hooks] == ["first", "second", "own"]
    assert all(h.__self__ is plugin for h in plugin.hooks)  # type: ignore[attr-defined]
    assert plugin.hooks[0].__func__ is Child.__dict__["first"]  # type: ignore[attr-defined]
    assert [t.tool_name for t in plugin.tools] == ["parent_tool", "shared_tool"]
    assert plugin.tools[1]() == "child"


def test_hooks_run_in_discovery_order() -> None:
    order: list[str] = []

    class Ordered(Plugin):
        name = "ordered"

        @hook
        def b(self, event: BeforeModelCallEvent) -> None:
            order.append("b")

        @hook
        def a(self, event: BeforeModelCallEvent) -> None:
            order.append("a")

    _agent(text("hi"), plugins=[Ordered()])("go")
    assert order == ["b", "a"]


def test_discovery_reads_no_property() -> None:
    reads: list[str] = []

    class Touchy(Plugin):
        name = "touchy"

        @property
        def expensive(self) -> str:
            reads.append("expensive")
            return "computed"

        @hook
        def on_model(self, event: BeforeModelCallEvent) -> None: ...

    assert [h.__name__ for h in Touchy().hooks] == ["on_model"]
    assert reads == []


def test_discovery_runs_once_under_multiple_inheritance() -> None:
    class Mixin(Plugin):
        name = "mixin"

        def __init__(self) -> None:
            Plugin.__init__(self)
            self.before = list(self.hooks)

    class Both(Mixin, Recorder):
        name = "both"

        def __init__(self) -> None:
            Mixin.__init__(self)
            Recorder.__init__(self)

    plugin = Both()
    assert plugin.hooks == plugin.before
    assert [h.__name__ for h in plugin.hooks] == ["before_model", "around_invocation"]


def test_a_plugin_whose_init_skips_super_still_has_its_hooks_and_tools() -> None:
    class NoSuper(Recorder):
        name = "no-super"

        def __init__(self) -> None:  # no super().__init__(): the point of the test
            self.seen = []

    plugin = NoSuper()
    agent = _agent(tool_call("hooks_seen", {}), text("done"), plugins=[plugin])
    agent("go")
    assert plugin.seen[:2] == ["BeforeInvocationEvent", "before_model"]


# -- @hook -----------------------------------------------------------------------------------------------


def test_a_union_hook_is_registered_for_each_event() -> None:
    seen: list[str] = []

    class Unions(Plugin):
        name = "unions"

        @hook
        def pipe(self, event: BeforeModelCallEvent | AfterModelCallEvent) -> None:
            seen.append("pipe:" + type(event).__name__)

        @hook()  # Strands' @hook() form
        def typing_union(self, event: Union[BeforeToolCallEvent, AfterInvocationEvent]) -> None:  # noqa: UP007
            seen.append("union:" + type(event).__name__)

    assert Unions.pipe._hook_event_types == [BeforeModelCallEvent, AfterModelCallEvent]  # type: ignore[attr-defined]
    _agent(tool_call("hooks_seen", {}), text("done"), plugins=[Unions(), Recorder()])("go")
    assert seen == ["pipe:BeforeModelCallEvent", "pipe:AfterModelCallEvent", "union:BeforeToolCallEvent",
                    "pipe:BeforeModelCallEvent", "pipe:AfterModelCallEvent", "union:AfterInvocationEvent"]


def test_hook_names_what_it_cannot_infer() -> None:
    with pytest.raises(ValueError, match=r"Bare.on_model.*annotate its first parameter"):
        class Bare(Plugin):
            @hook
            def on_model(self, event) -> None: ...  # type: ignore[no-untyped-def]

    with pytest.raises(ValueError, match=r"WithNone.on_model.*not a hook event class"):
        class WithNone(Plugin):
            @hook
            def on_model(self, event: BeforeModelCallEvent | None) -> None: ...

    with pytest.raises(ValueError, match=r"Wrong.on_model.*not a hook event class"):
        class Wrong(Plugin):
            @hook
            def on_model(self, event: str) -> None: ...


def test_a_classmethod_hook_skips_cls_as_in_strands() -> None:
    seen: list[str] = []

    class Classy(Plugin):
        name = "classy"

        @classmethod
        @hook
        def on_model(cls, event: BeforeModelCallEvent) -> None:
            seen.append(cls.__name__)

    _agent(text("hi"), plugins=[Classy()])("go")
    assert seen == ["Classy"]


async def test_async_hooks_are_awaited() -> None:
    awaited: list[str] = []

    class Async(Plugin):
        name = "async"

        @hook
        async def on_model(self, event: BeforeModelCallEvent) -> None:
            await asyncio.sleep(0)
            awaited.append(self.name)

    await _agent(text("hi"), plugins=[Async()]).invoke_async("go")
    assert awaited == ["async"]


# -- init_agent --------------------------------------------------------------------------------------------


class Setup(Recorder):
    name = "setup"

    def init_agent(self, agent: Agent) -> None:
        self.agent = agent
        self.seen.append(f"init_agent:{agent.name}:{sorted(agent.tool_registry.names)}")
        agent.add_hook(self.added_in_init)
        agent.state.set("set_up", True)

    def added_in_init(self, event: BeforeModelCallEvent) -> None:
        self.seen.append("added_in_init")

    @hook
    def initialized(self, event: AgentInitializedEvent) -> None:
        self.seen.append("AgentInitializedEvent")


def test_init_agent_runs_before_the_decorated_hooks_and_tools_join() -> None:
    plugin = Setup()
    agent = _agent(text("hi"), name="builder", plugins=[plugin])
    assert plugin.agent is agent and agent.state.get("set_up") is True
    assert plugin.seen == ["init_agent:builder:[]", "AgentInitializedEvent"]
    agent("go")
    assert plugin.seen[2:5] == ["BeforeInvocationEvent", "added_in_init", "before_model"]  # registration order


class AsyncSetup(Recorder):
    name = "async-setup"

    async def init_agent(self, agent: Agent) -> None:
        self.seen.append("async init_agent")
        agent.state.set("async", True)


def test_async_init_agent_runs_to_its_end_from_sync_code() -> None:
    plugin = AsyncSetup()
    agent = _agent(text("hi"), plugins=[plugin])
    assert plugin.seen == ["async init_agent"] and agent.state.get("async") is True


async def test_async_init_agent_runs_to_its_end_inside_a_running_loop() -> None:
    plugin = AsyncSetup()
    agent = _agent(text("hi"), plugins=[plugin])
    assert plugin.seen == ["async init_agent"] and agent.state.get("async") is True


# -- tools ----------------------------------------------------------------------------------------------------


def test_plugin_tools_are_offered_to_and_called_by_the_model() -> None:
    plugin = Recorder()
    model = ScriptedModel(tool_call("hooks_seen", {"prefix": "> "}), text("done"))
    agent = Agent(model, retry_strategy=None, plugins=[plugin])
    agent("go")
    spec = agent.tool_registry.get("hooks_seen").tool_spec  # type: ignore[union-attr]
    assert set(spec["inputSchema"]["json"]["properties"]) == {"prefix"}  # no `self`
    assert [s["name"] for s in model.calls[0].tool_specs] == ["hooks_seen"]
    result = agent.messages[2]["content"][0]["toolResult"]
    assert result["status"] == "success"
    assert result["content"] == [{"text": "> BeforeInvocationEvent,before_model"}]


def test_a_plugin_tool_named_like_an_agent_tool_is_refused() -> None:
    @tool
    def hooks_seen() -> str:
        """Clashes with the plugin's tool."""
        return ""

    with pytest.raises(ValueError, match="'hooks_seen' is already registered"):
        _agent(tools=[hooks_seen], plugins=[Recorder()])


# -- names and errors -------------------------------------------------------------------------------------------


def test_two_plugins_with_one_name_are_refused_before_either_is_initialised() -> None:
    first, second = Setup(), Setup()
    with pytest.raises(ValueError, match=r"plugin_name=<setup> \| plugin already registered \(plugins\[0\] and "
                                         r"plugins\[1\]"):
        _agent(plugins=[first, second])
    assert first.seen == []


def test_a_plugin_without_a_name_cannot_be_made() -> None:
    class Nameless(Plugin):
        pass

    with pytest.raises(TypeError, match=r"abstract method '?name"):
        Nameless()  # type: ignore[abstract]


class NamedBy(Plugin):
    def __init__(self, value: Any) -> None:
        self.value = value
        super().__init__()

    @property
    def name(self) -> str:
        return self.value  # type: ignore[no-any-return]


class Provider(HookProvider):
    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None: ...


@pytest.mark.parametrize(("plugins", "error", "message"), [
    (Recorder(), TypeError, "plugins must be a list of Plugin objects, got Recorder"),
    ([Recorder(), "recorder"], TypeError, r"plugins\[1\] must be a ray_harness.plugins.Plugin, got str"),
    ([Recorder], TypeError, r"plugins\[0\] must be .*got the class Recorder \(pass an instance: Recorder\(\)\)"),
    ([Provider()], TypeError, r"plugins\[0\] .* a hook provider \(pass it in hooks=\)"),
    ([NamedBy(3)], TypeError, r"plugins\[0\]\.name must be a string, got int"),
    ([Recorder(), NamedBy(" ")], ValueError, r"plugins\[1\]\.name must not be empty"),
])
def test_wrong_plugins_are_named(plugins: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        _agent(plugins=plugins)


def test_no_plugins_leaves_the_agent_as_it_was() -> None:
    assert "_plugin_registry" not in vars(_agent())
    assert _agent(plugins=[])._plugin_registry.plugins == {}


# -- pickling and snapshots --------------------------------------------------------------------------------------


def _script_that_reads_the_record() -> ScriptedModel:
    return ScriptedModel(tool_call("hooks_seen", {}), text("done"))


def test_a_shipped_agent_keeps_its_plugin_and_the_hooks_share_its_state() -> None:
    plugin = Recorder()
    agent = Agent(_script_that_reads_the_record(), retry_strategy=None, plugins=[plugin])
    shipped: Agent = pickle.loads(cloudpickle.dumps(agent))  # as runtime="ray" ships agents to hosts
    shipped("go")
    (copy,) = shipped._plugin_registry.plugins.values()
    assert isinstance(copy, Recorder) and copy is not plugin and plugin.seen == []  # the driver's plugin saw nothing
    assert copy.seen == ["BeforeInvocationEvent", "before_model", "before_model", "AfterInvocationEvent"]
    # The tool ran on the same shipped object the hooks wrote to.
    assert shipped.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "BeforeInvocationEvent,"
                                                                                   "before_model"}]


def test_a_plugin_class_of_a_script_ships_by_value() -> None:
    class Local(Plugin):  # not importable by name (as a script's class on a host): cloudpickle sends it by value
        name = "local"

        def init_agent(self, agent: Agent) -> None:
            self.events: list[str] = []

        @hook
        def note(self, event: AfterModelCallEvent) -> None:
            self.events.append(type(event).__name__)

        @tool
        def noted(self) -> int:
            """How many model answers."""
            return len(self.events)

    agent = Agent(ScriptedModel(tool_call("noted", {}), text("done")), retry_strategy=None, plugins=[Local()])
    shipped: Agent = pickle.loads(cloudpickle.dumps(agent))
    shipped("go")
    assert shipped.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "1"}]
    shipped_plugin = shipped._plugin_registry.plugins["local"]
    assert isinstance(shipped_plugin, Local) and shipped_plugin.events == ["AfterModelCallEvent"] * 2


def test_snapshots_do_not_see_plugins() -> None:
    plugin = Setup()
    with_plugin = _agent(text("hi"), agent_id="a", plugins=[plugin])
    without = _agent(text("hi"), agent_id="a", state={"set_up": True})
    assert with_plugin.snapshot().model_dump() == without.snapshot().model_dump()
    with_plugin.restore(without.snapshot())
    with_plugin("go")
    assert "before_model" in plugin.seen  # a restore replaces state, not the plugin's hooks


def test_strands_import_paths() -> None:
    import ray_harness
    from ray_harness.plugins import decorator, plugin

    assert ray_harness.Plugin is Plugin is plugin.Plugin
    assert decorator.hook is hook
