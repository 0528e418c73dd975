"""The extensions contract (docs/concepts/extensions.md) on the in-process runtime: placements, scopes, ordering, observation only, fault
isolation, lifecycle hooks, the task store, trace identity and loading."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.agent.retry import ModelRetryStrategy
from ray_harness.extensions import (
    AgentMiddleware,
    AgentScope,
    ExtensionError,
    MiddlewarePlacement,
    Placement,
    _chain,
    loading,
    task_store,
    use,
)
from ray_harness.hooks.events import AfterModelCallEvent, AfterToolCallEvent
from ray_harness.interventions import Guide, InterventionHandler, Proceed
from ray_harness.middleware.types import InvokeModelStage, ToolResultEvent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.testing.clock import FakeClock
from ray_harness.tools.base import AgentTool
from ray_harness.types.exceptions import ContextWindowOverflowException, ModelThrottledException
from tests.extension_state import clean_extensions  # noqa: F401 - the autouse fixture
from tests.plugin_fixture import ENTRY_POINT as TEST_PLUGIN, installed_test_plugin  # noqa: F401 - the fixture

LOGICAL, PHYSICAL, VISIBLE, RAW, STANDARD = (Placement.MODEL_LOGICAL, Placement.MODEL_PHYSICAL,
                                             Placement.TOOL_VISIBLE, Placement.TOOL_RAW, Placement.STANDARD)




def contribute(*placements: MiddlewarePlacement | Any, name: str = "test_ext") -> Any:
    """Install an extension (entry-point-like ``<use>`` name) that contributes ``placements`` to every chain."""

    class Contributor:
        def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
            return placements

    def install(registry: Any, config: Any) -> None:
        registry.middlewares(Contributor())

    install.__qualname__ = name
    install.__module__ = "ext"
    return use(install)


class Recorder(AgentMiddleware):
    """Records what it sees on both axes into ``log``."""

    def __init__(self, log: list[Any], tag: str) -> None:
        self.log = log
        self.tag = tag

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        self.log.append((self.tag, "model", len(request.messages)))
        try:
            result = await handler(request)
        except Exception as error:
            self.log.append((self.tag, "model error", type(error).__name__))
            raise
        self.log.append((self.tag, "model done", result.stop_reason))
        return result

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.log.append((self.tag, "tool", request.tool_use["name"]))
        try:
            result = await handler(request)
        except Exception as error:
            self.log.append((self.tag, "tool error", repr(error)))
            raise
        self.log.append((self.tag, "tool done", result))
        return result


@tool
def lookup(key: str) -> dict[str, Any]:
    """Look a key up."""
    return {"key": key, "found": True}


@tool
def explode(key: str) -> str:
    """Always fails."""
    raise ValueError(f"no {key}")


def tool_agent(*steps: Any, **kwargs: Any) -> Agent:
    return Agent(ScriptedModel(*steps), tools=[lookup, explode], **kwargs)


# -- placements ---------------------------------------------------------------------------------------


def test_logical_once_per_decision_physical_once_per_provider_request_on_throttling() -> None:
    log: list[Any] = []
    contribute(MiddlewarePlacement(Recorder(log, "L"), LOGICAL), MiddlewarePlacement(Recorder(log, "P"), PHYSICAL))
    model = ScriptedModel(ModelThrottledException("slow down"), text("fine"))
    agent = Agent(model, retry_strategy=ModelRetryStrategy(clock=FakeClock()))
    assert str(agent("hi")) == "fine\n"
    assert len(model.calls) == 2
    assert log == [("L", "model", 1), ("P", "model", 1), ("P", "model error", "ModelThrottledException"),
                   ("P", "model", 1), ("P", "model done", "end_turn"), ("L", "model done", "end_turn")]


def test_logical_is_outside_overflow_reduction_guide_and_after_model_retry() -> None:
    log: list[Any] = []
    contribute(MiddlewarePlacement(Recorder(log, "L"), LOGICAL), MiddlewarePlacement(Recorder(log, "P"), PHYSICAL))

    class Critic(InterventionHandler):
        name = "critic"

        def __init__(self) -> None:
            self.seen = 0

        def after_model_call(self, event: Any) -> Any:
            self.seen += 1
            return Guide("again") if self.seen == 1 else Proceed()

    answers: list[bool] = []

    def retry_once(event: AfterModelCallEvent) -> None:
        answers.append(True)
        if len(answers) == 2:  # the answer after the Guide retry
            event.retry = True

    history = [{"role": "user", "content": [{"text": f"old {i}"}]} if i % 2 == 0 else
               {"role": "assistant", "content": [{"text": f"reply {i}"}]} for i in range(6)]
    model = ScriptedModel(ContextWindowOverflowException("too long"), text("a"), text("b"), text("c"))
    agent = Agent(model, messages=history, interventions=[Critic()], hooks=[retry_once])
    agent("new")
    assert len(model.calls) == 4  # overflow, Guide retry, AfterModelCallEvent.retry, the answer
    assert [entry for entry in log if entry[0] == "L"] == [("L", "model", 7), ("L", "model done", "end_turn")]
    assert [entry[1] for entry in log if entry[0] == "P"].count("model") == 4


def test_physical_sees_the_final_request_after_add_middleware_rewrites() -> None:
    seen: dict[str, Any] = {}

    class Spy(AgentMiddleware):
        def __init__(self, key: str) -> None:
            self.key = key

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            seen[self.key] = request.system_prompt
            return await handler(request)

    contribute(MiddlewarePlacement(Spy("logical"), LOGICAL), MiddlewarePlacement(Spy("physical"), PHYSICAL))
    agent = Agent(ScriptedModel(text("ok")), system_prompt="base")
    agent.add_middleware(InvokeModelStage.Input, lambda ctx: ctx.replace(system_prompt="rewritten"))
    agent("x")
    assert seen == {"logical": "base", "physical": "rewritten"}


def test_visible_sees_what_the_model_receives_raw_sees_the_return_value_and_the_exception() -> None:
    log: list[Any] = []
    contribute(MiddlewarePlacement(Recorder(log, "V"), VISIBLE), MiddlewarePlacement(Recorder(log, "R"), RAW))

    def redact(event: AfterToolCallEvent) -> None:  # a host-side rewrite between RAW and VISIBLE
        if event.result["status"] == "success":
            event.result = {**event.result, "content": [{"text": "redacted"}]}

    agent = tool_agent(tool_call("lookup", {"key": "k"}), tool_call("explode", {"key": "k"}), text("done"),
                       hooks=[redact])
    agent("x")
    raw = [entry for entry in log if entry[0] == "R"]
    visible = [entry for entry in log if entry[0] == "V"]
    assert raw[1] == ("R", "tool done", {"key": "k", "found": True})
    assert raw[3] == ("R", "tool error", "ValueError('no k')")
    assert visible[1][2]["content"] == [{"text": "redacted"}]
    assert visible[3][2]["status"] == "error" and visible[3][2]["content"] == [{"text": "Error: no k"}]
    results = [block["toolResult"] for m in agent.messages for block in m["content"] if "toolResult" in block]
    assert [visible[1][2], visible[3][2]] == results  # exactly what the model received


def test_raw_fallback_for_a_tool_without_a_raw_call_logs_the_seed_warning(caplog: pytest.LogCaptureFixture) -> None:
    class Plain(AgentTool):
        tool_name = "plain"
        tool_spec = {"name": "plain", "description": "plain", "inputSchema": {"json": {"type": "object"}}}

        async def stream(self, tool_use: Any, context: Any) -> Any:
            yield ToolResultEvent({"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": "p"}]})

    log: list[Any] = []
    contribute(MiddlewarePlacement(Recorder(log, "R"), RAW))
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        Agent(ScriptedModel(tool_call("plain", {}), text("ok")), tools=[Plain()])("x")
    assert log[1][2]["content"] == [{"text": "p"}]
    assert "Extension ext:test_ext: placement TOOL_RAW fell back to a secondary anchor (primary anchor" in caplog.text


def test_logical_fallback_without_a_retry_layer_logs_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    log: list[Any] = []
    contribute(MiddlewarePlacement(Recorder(log, "L"), LOGICAL))
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        Agent(ScriptedModel(text("ok")), retry_strategy=None)("x")
    assert log == [("L", "model", 1), ("L", "model done", "end_turn")]
    assert "Extension ext:test_ext: placement MODEL_LOGICAL fell back to a secondary anchor" in caplog.text


def test_stream_events_reach_the_consumer_while_the_hook_waits() -> None:
    order: list[str] = []

    class Around(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            order.append("hook in")
            result = await handler(request)
            order.append("hook out")
            return result

    contribute(MiddlewarePlacement(Around(), LOGICAL), MiddlewarePlacement(Around(), PHYSICAL))

    async def consume() -> None:
        async for event in Agent(ScriptedModel(text("streamed"))).stream_async("x"):
            if event.get("type") == "text_delta":
                order.append("delta")

    asyncio.run(consume())
    assert order[:2] == ["hook in", "hook in"] and order[-2:] == ["hook out", "hook out"]
    assert "delta" in order[2:-2]


def test_cancel_while_the_model_streams_under_wrappers() -> None:
    """``agent.cancel()`` interrupts the provider wait before any hook's wait (also one under a timeout of its
    own): the hooks see the cancelled stop."""
    seen: list[Any] = []

    class Sees(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            async with asyncio.timeout(60):
                result = await handler(request)
            seen.append(result.stop_reason)
            return result

    contribute(MiddlewarePlacement(Recorder([], "L"), LOGICAL), MiddlewarePlacement(Recorder([], "P"), PHYSICAL),
               MiddlewarePlacement(Sees(), LOGICAL), MiddlewarePlacement(Sees(), PHYSICAL))
    agent = Agent(ScriptedModel(text("slow", delay=30)))

    async def run() -> Any:
        task = asyncio.create_task(agent.invoke_async("x"))
        while agent._invocation is None or not agent._invocation.interruptible_wait:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        agent.cancel()
        return await task

    assert asyncio.run(run()).stop_reason == "cancelled"
    assert seen == ["cancelled", "cancelled"]


# -- observation only and fault isolation -------------------------------------------------------------


class Misbehaving(AgentMiddleware):
    """One wrap hook per fault an extension can have, chosen by ``mode``."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.caught: list[BaseException] = []

    async def _wrap(self, request: Any, handler: Any, replacement: Any) -> Any:
        if self.mode == "raise before":
            raise RuntimeError("before")
        if self.mode == "never call":
            return replacement
        if self.mode == "modify":
            result = await handler(replacement)
            return "not the result"
        result = await handler(request)
        if self.mode == "raise after":
            raise RuntimeError("after")
        if self.mode == "call twice":
            try:
                await handler(request)
            except RuntimeError as error:
                self.caught.append(error)
            return "second"
        if self.mode == "swallow":
            return "swallowed"
        return result

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await self._wrap(request, handler, request.replace(messages=[], system_prompt="evil"))

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await self._wrap(request, handler, request.replace(tool_use={**request.tool_use, "input": {"key": "evil"}}))


calls: list[str] = []


@tool
def side_effect(key: str) -> str:
    """Counts its runs."""
    calls.append(key)
    return f"ran {key}"


@pytest.mark.parametrize("mode", ["raise before", "never call", "raise after", "call twice", "modify"])
@pytest.mark.parametrize("placement", [LOGICAL, PHYSICAL, VISIBLE, RAW])
def test_fault_isolation_never_adds_a_request_and_returns_the_real_result(
        mode: str, placement: Placement, caplog: pytest.LogCaptureFixture) -> None:
    calls.clear()
    middleware = Misbehaving(mode)
    contribute(MiddlewarePlacement(middleware, placement))
    model = ScriptedModel(tool_call("side_effect", {"key": "real"}), text("done"))
    agent = Agent(model, tools=[side_effect], system_prompt="sys")
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        result = agent("x")
    assert str(result) == "done\n"
    assert len(model.calls) == 2 and calls == ["real"]  # one request per decision, one tool side effect
    assert model.calls[0].system_prompt == "sys" and model.calls[0].messages[-1]["content"] == [{"text": "x"}]
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "ran real"}]
    hook = "awrap_model_call" if placement in (LOGICAL, PHYSICAL) else "awrap_tool_call"
    expected = {"raise before": "before", "never call": "the hook did not call handler; the host called it",
                "raise after": "after"}
    if mode in expected:
        assert f"Extension ext:test_ext: Misbehaving.{hook} failed and was skipped: {expected[mode]}" in caplog.text
    if mode == "call twice":
        assert len(middleware.caught) == (2 if hook == "awrap_model_call" else 1)
        assert "already called" in str(middleware.caught[0])


class Meddler(AgentMiddleware):
    """Records what it sees, then changes its request in place (list fields, dict keys, attributes)."""

    def __init__(self, seen: list[Any]) -> None:
        self.seen = seen

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        self.seen.append((id(request), len(request.messages), len(request.tool_specs), request.system_prompt,
                          hasattr(request, "meddled")))
        request.messages.append({"role": "user", "content": [{"text": "evil"}]})
        request.tool_specs.append({"name": "evil"})
        request.system_prompt = "evil"
        request.meddled = True
        return await handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.seen.append((id(request), dict(request.tool_use["input"]), request.tool_use["name"],
                          request.tool is None, hasattr(request, "meddled")))
        request.tool_use["input"] = {"key": "evil"}
        request.tool_use["name"] = "evil"
        request.tool = None
        request.meddled = True
        return await handler(request)


@pytest.mark.parametrize("placement", [LOGICAL, PHYSICAL, VISIBLE, RAW])
def test_each_stacked_hook_gets_its_own_request_copy(placement: Placement) -> None:
    """An in-place change a hook makes to its request (shallow: the request's own fields, its lists and its
    tool_use's keys) reaches neither the next hook nor downstream."""
    calls.clear()
    seen: list[Any] = []
    hooks = [Meddler(seen) for _ in range(3)]
    contribute(*(MiddlewarePlacement(hook, placement) for hook in hooks))
    model = ScriptedModel(tool_call("side_effect", {"key": "real"}), text("done"))
    agent = Agent(model, tools=[side_effect], system_prompt="sys")
    assert str(agent("x")) == "done\n"
    assert calls == ["real"]  # the tool ran once, with the model's input
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "ran real"}]
    assert [call.system_prompt for call in model.calls] == ["sys", "sys"]
    assert [len(call.messages) for call in model.calls] == [1, 3]
    assert [call.tool_names for call in model.calls] == [("side_effect",), ("side_effect",)]
    if placement in (LOGICAL, PHYSICAL):
        assert len(seen) == 6  # 3 hooks x 2 model calls
        for call, start in ((0, 0), (1, 3)):
            views = seen[start:start + 3]
            assert len({view[0] for view in views}) == 3  # a copy of its own per hook
            assert [view[1:] for view in views] == [(1 + 2 * call, 1, "sys", False)] * 3
    else:
        assert len(seen) == 3
        assert len({view[0] for view in seen}) == 3
        assert [view[1:] for view in seen] == [({"key": "real"}, "side_effect", False, False)] * 3


@pytest.mark.parametrize("placement", [LOGICAL, PHYSICAL, VISIBLE, RAW])
def test_handler_errors_propagate_unchanged_even_when_the_hook_swallows_them(placement: Placement) -> None:
    class Swallow(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            try:
                return await handler(request)
            except Exception:
                return "swallowed"

        awrap_tool_call = awrap_model_call

    contribute(MiddlewarePlacement(Swallow(), placement))
    if placement in (LOGICAL, PHYSICAL):
        with pytest.raises(ValueError, match="provider down"):
            Agent(ScriptedModel(ValueError("provider down")))("x")
    elif placement is VISIBLE:  # the host's own tool pipeline raising (a tool hook) still fails the run
        def broken_hook(event: AfterToolCallEvent) -> None:
            raise KeyError("hook down")

        with pytest.raises(KeyError, match="hook down"):
            tool_agent(tool_call("lookup", {"key": "k"}), text("done"), hooks=[broken_hook])("x")
    else:  # the tool's exception reaches the host's error wrapping, as without the extension
        agent = tool_agent(tool_call("explode", {"key": "k"}), text("done"))
        agent("x")
        assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "Error: no k"}]


@pytest.mark.parametrize("placement", [VISIBLE, RAW])
def test_interrupts_always_propagate(placement: Placement) -> None:
    class Swallow(AgentMiddleware):
        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            try:
                return await handler(request)
            except BaseException:
                return "swallowed"

    @tool(context=True)
    def ask(question: str, tool_context: Any) -> str:
        """Ask a human."""
        return str(tool_context.interrupt("approve", question))

    contribute(MiddlewarePlacement(Swallow(), placement))
    agent = Agent(ScriptedModel(tool_call("ask", {"question": "ok?"}), text("done")), tools=[ask])
    result = agent("x")
    assert result.stop_reason == "interrupt" and result.interrupts[0].name == "approve"
    resumed = agent([{"interruptResponse": {"interruptId": result.interrupts[0].id, "response": "yes"}}])
    assert str(resumed) == "done\n"
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "yes"}]


def test_lifecycle_hooks_update_state_and_a_raising_one_updates_nothing(caplog: pytest.LogCaptureFixture) -> None:
    order: list[str] = []

    class Lifecycle(AgentMiddleware):
        def before_agent(self, ctx: Any) -> Any:
            order.append("before_agent")
            return {"started": True}

        async def abefore_model(self, ctx: Any) -> Any:
            order.append("before_model")

        def after_model(self, ctx: Any) -> Any:
            order.append(f"after_model {ctx.result.stop_reason}")

        async def aafter_agent(self, ctx: Any) -> Any:
            order.append(f"after_agent {ctx.result.stop_reason}")
            return {"finished": str(ctx.result)}

    class Broken(AgentMiddleware):
        def before_agent(self, ctx: Any) -> Any:
            raise RuntimeError("lifecycle broke")

        def after_agent(self, ctx: Any) -> Any:
            return {"bad": object()}  # not JSON: no update at all

    contribute(MiddlewarePlacement(Lifecycle(), STANDARD), MiddlewarePlacement(Broken(), STANDARD),
               MiddlewarePlacement(Lifecycle(), LOGICAL))  # lifecycle hooks act only at STANDARD
    agent = Agent(ScriptedModel(tool_call("lookup", {"key": "k"}), text("done")), tools=[lookup])
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        agent("x")
    assert order == ["before_agent", "before_model", "after_model tool_use", "before_model", "after_model end_turn",
                     "after_agent end_turn"]
    assert agent.state.get() == {"started": True, "finished": "done\n"}
    assert "Extension ext:test_ext: Broken.before_agent failed and was skipped: lifecycle broke" in caplog.text
    assert "Broken.after_agent failed and was skipped" in caplog.text


def test_contributor_faults_and_bad_items(caplog: pytest.LogCaptureFixture) -> None:
    log: list[Any] = []

    class Raising:
        def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
            yield MiddlewarePlacement(Recorder(log, "lost"), LOGICAL)  # produced before raising: still not added
            raise RuntimeError("contributor broke")

    class Mixed:
        def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
            return [42, MiddlewarePlacement(Recorder(log, "kept"), LOGICAL)]

    def install(registry: Any, config: Any) -> None:
        registry.middlewares(Raising())
        registry.middlewares(Mixed())

    use(install)
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        Agent(ScriptedModel(text("ok")))("x")
    assert {entry[0] for entry in log} == {"kept"}
    use_name = f"{__name__}:test_contributor_faults_and_bad_items.<locals>.install"
    assert f"Extension {use_name}: Raising.contribute_middlewares failed and was skipped: contributor broke" \
        in caplog.text
    assert f"Extension {use_name}: Mixed.contribute_middlewares failed and was skipped: item 0 is not a " \
           "MiddlewarePlacement (got int)" in caplog.text


def test_placement_validates_its_fields() -> None:
    with pytest.raises(TypeError, match="must be an AgentMiddleware"):
        MiddlewarePlacement(object(), LOGICAL)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="placement must be a Placement"):
        MiddlewarePlacement(AgentMiddleware(), "outer")  # type: ignore[arg-type]


def test_sync_only_wrap_is_passed_through_on_the_async_path(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    class SyncOnly(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            seen.append("sync")
            return handler(request)

    contribute(MiddlewarePlacement(SyncOnly(), VISIBLE))
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        tool_agent(tool_call("lookup", {"key": "k"}), text("done"))("x")
    assert seen == []
    assert "SyncOnly implements only wrap_tool_call" in caplog.text


# -- scope, ordering, naming, task store ----------------------------------------------------------------


def test_scope_filtering_with_an_agent_used_as_a_tool() -> None:
    log: list[Any] = []
    contexts: list[Any] = []

    class Contributor:
        def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
            contexts.append(ctx)
            return (MiddlewarePlacement(Recorder(log, f"lead:{ctx.agent_name}"), LOGICAL, scope=AgentScope.LEAD),
                    MiddlewarePlacement(Recorder(log, f"sub:{ctx.agent_name}"), LOGICAL, scope=AgentScope.SUBAGENT),
                    MiddlewarePlacement(Recorder(log, f"both:{ctx.agent_name}"), VISIBLE))

    use(lambda registry, config: registry.middlewares(Contributor()))
    child = Agent(ScriptedModel(text("child answer"), text("again")), name="child")
    parent = Agent(ScriptedModel(tool_call("child", {"input": "q"}), text("done")), name="parent",
                   tools=[child.as_tool()])
    parent("x", limits={"turns": 5})
    assert [(ctx.scope, ctx.agent_name) for ctx in contexts] == [(AgentScope.LEAD, "parent"),
                                                                 (AgentScope.SUBAGENT, "child")]
    assert contexts[0].model_name == "scripted" and contexts[0].policy == {"limits": {"turns": 5}}
    tags = {entry[0] for entry in log}
    assert tags == {"lead:parent", "both:parent", "sub:child"}
    raw_child = [entry for entry in log if entry[0] == "both:parent" and entry[1] == "tool done"]
    assert raw_child[0][2]["content"] == [{"text": "child answer\n"}]
    child("direct")  # the same agent invoked by user code is a lead again
    assert contexts[-1].scope == AgentScope.LEAD


def test_order_then_registration_lower_is_outer_and_names() -> None:
    log: list[Any] = []
    contribute(MiddlewarePlacement(Recorder(log, "b"), LOGICAL, order=5),
               MiddlewarePlacement(Recorder(log, "a"), LOGICAL, order=-1),
               MiddlewarePlacement(Recorder(log, "c"), LOGICAL, order=5),
               name="my-ext.v1")
    agent = Agent(ScriptedModel(text("ok")))
    names: list[list[str]] = []

    class Probe(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            names.append(list(request.agent._invocation.extensions.model_names))
            return await handler(request)

    contribute(MiddlewarePlacement(Probe(), PHYSICAL), name="probe")
    agent("x")
    assert [entry[0] for entry in log if entry[1] == "model"] == ["a", "b", "c"]
    assert names == [["extension_ext_my_ext_v1_Recorder_0", "extension_ext_my_ext_v1_Recorder_1",
                      "extension_ext_my_ext_v1_Recorder_2", "extension_ext_probe_Probe_0"]]


def test_an_ordering_invariant_violation_fails_the_build_naming_the_extension(
        monkeypatch: pytest.MonkeyPatch) -> None:
    contribute(MiddlewarePlacement(Recorder([], "P"), PHYSICAL), name="misplaced")
    # Simulate a host whose resolution put MODEL_PHYSICAL outside the model stages: the check must catch it.
    monkeypatch.setitem(_chain.ANCHORS, PHYSICAL, (_chain.MODEL_STAGES, "outside"))
    with pytest.raises(ExtensionError, match=r"extension 'ext:misplaced': extension_ext_misplaced_Recorder_0 at "
                                             r"MODEL_PHYSICAL must sit inside"):
        Agent(ScriptedModel(text("ok")))("x")


def test_task_store_one_per_run_and_per_sub_agent_execution() -> None:
    stores: list[tuple[str, Any]] = []

    class Key:
        def __init__(self) -> None:
            self.count = 0

    class Probe(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            store = task_store()
            assert store is not None and store.get(type("Other", (), {})) is None
            store.get_or_init(Key, Key).count += 1
            stores.append((request.agent.name, store))
            return await handler(request)

    contribute(MiddlewarePlacement(Probe(), LOGICAL))
    child = Agent(ScriptedModel(text("c1"), text("c2")), name="child")
    parent = Agent(ScriptedModel(tool_call("child", {"input": "a"}), tool_call("child", {"input": "b"}), text("done")),
                   name="parent", tools=[child.as_tool()])
    parent("x")
    parent_stores = {id(store) for name, store in stores if name == "parent"}
    child_stores = [store for name, store in stores if name == "child"]
    assert len(parent_stores) == 1 and len(child_stores) == 2 and child_stores[0] is not child_stores[1]
    assert next(store for name, store in stores if name == "parent").get(Key).count == 3
    stores.clear()
    Agent(ScriptedModel(text("ok")), name="parent")("y")
    parent_again = [store for _, store in stores]
    assert parent_again[0].get(Key).count == 1  # a new run, a new store
    assert task_store() is None  # outside a run


def test_no_extension_means_no_chain() -> None:
    agent = Agent(ScriptedModel(text("ok")))
    seen: list[Any] = []
    agent.add_hook(lambda event: seen.append(agent._invocation.extensions), AfterModelCallEvent)
    agent("x")
    assert seen == [None]


# -- loading -------------------------------------------------------------------------------------------


def test_use_is_idempotent_and_remove_uninstalls() -> None:
    log: list[Any] = []

    def install(registry: Any, config: Any) -> None:
        registry.middlewares(type("C", (), {"contribute_middlewares": lambda self, store, ctx: (
            MiddlewarePlacement(Recorder(log, str(config)), LOGICAL),)})())

    handle = use(install, config="cfg")
    assert use(install, config="cfg") is handle and use(install, "cfg") is handle  # the same object, an equal config
    Agent(ScriptedModel(text("ok")))("x")
    assert [entry[0] for entry in log] == ["cfg", "cfg"]
    handle.remove()
    handle.remove()
    Agent(ScriptedModel(text("ok")))("x")
    assert len(log) == 2


def test_unknown_entry_point_and_failing_install_name_the_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ExtensionError, match="unknown extension 'no_such_ext'"):
        use("no_such_ext")

    def broken(registry: Any, config: Any) -> None:
        raise RuntimeError("boom")

    with pytest.raises(ExtensionError, match=r"extension '.*broken' failed to install: RuntimeError: boom"):
        use(broken)
    monkeypatch.setenv(loading.ENV_VAR, "no_such_ext")
    loading.reset()
    with pytest.raises(ExtensionError, match="unknown extension 'no_such_ext'"):
        Agent(ScriptedModel(text("ok")))("x")


def test_the_example_timing_plugin() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "examples" / "timing_plugin" / "ray_harness_timing" / "__init__.py"
    spec = importlib.util.spec_from_file_location("ray_harness_timing_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    use(module.install)
    agent = Agent(ScriptedModel(ModelThrottledException("slow"), tool_call("lookup", {"key": "k"}), text("done")),
                  tools=[lookup], retry_strategy=ModelRetryStrategy(clock=FakeClock()))
    agent("x")
    timing = agent.state.get("timing")
    assert (timing["model_calls"], timing["provider_requests"], timing["tool_calls"]) == (2, 3, 1)
    assert set(timing["tools"]) == {"lookup"}


def test_wrapper_names_are_on_the_chat_and_execute_tool_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    contribute(MiddlewarePlacement(Recorder([], "L"), LOGICAL), MiddlewarePlacement(Recorder([], "R"), RAW),
               MiddlewarePlacement(Recorder([], "V"), VISIBLE), name="tracing_ext")
    tool_agent(tool_call("lookup", {"key": "k"}), text("done"))("x")
    spans = {span.name: span.attributes for span in exporter.get_finished_spans()}
    assert spans["chat"]["ray_harness.extensions"] == ("extension_ext_tracing_ext_Recorder_0",)
    assert spans["execute_tool lookup"]["ray_harness.extensions"] == ("extension_ext_tracing_ext_Recorder_2",
                                                                      "extension_ext_tracing_ext_Recorder_1")
    assert "ray_harness.extensions" not in spans["invoke_agent agent"]
    provider.shutdown()


def test_concurrent_and_streaming_tools_under_visible_and_raw_layers() -> None:
    from ray_harness.testing import tool_calls

    @tool
    async def ticker(count: int) -> Any:
        """Streams ticks, returns the count."""
        for tick in range(count):
            yield f"tick {tick}"
        yield count

    log: list[Any] = []
    contribute(MiddlewarePlacement(Recorder(log, "V"), VISIBLE), MiddlewarePlacement(Recorder(log, "R"), RAW))
    agent = Agent(ScriptedModel(tool_calls(("ticker", {"count": 3}), ("lookup", {"key": "k"})), text("done")),
                  tools=[ticker, lookup])

    async def consume() -> list[Any]:
        return [event async for event in agent.stream_async("x") if event.get("type") == "tool_stream"]

    streamed = asyncio.run(consume())
    assert [event["tool_stream_event"]["data"] for event in streamed] == ["tick 0", "tick 1", "tick 2", 3]
    raw_results = sorted(repr(entry[2]) for entry in log if entry[:2] == ("R", "tool done"))
    assert raw_results == ["3", "{'key': 'k', 'found': True}"]
    visible = {entry[2]["content"][0].get("text", "json") for entry in log if entry[:2] == ("V", "tool done")}
    assert visible == {"3", "json"}


def test_a_hook_that_awaits_handler_in_another_task_still_observes_once() -> None:
    class Timeout(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await asyncio.wait_for(handler(request), timeout=60)  # wait_for runs it as its own task

    contribute(MiddlewarePlacement(Timeout(), PHYSICAL))
    model = ScriptedModel(text("through a task"))
    agent = Agent(model)

    async def consume() -> list[str]:
        return [event["type"] async for event in agent.stream_async("x")]

    kinds = asyncio.run(consume())
    assert "text_delta" in kinds and kinds[-1] == "result"  # the events still arrive, after the call
    assert len(model.calls) == 1 and agent.messages[-1]["content"] == [{"text": "through a task"}]


def test_a_consumer_leaving_mid_stream_closes_every_layer() -> None:
    closed: list[str] = []

    class Watch(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            try:
                return await handler(request)
            finally:
                closed.append("hook unwound")

    contribute(MiddlewarePlacement(Watch(), LOGICAL), MiddlewarePlacement(Watch(), PHYSICAL))
    agent = Agent(ScriptedModel(text("a long answer in many chunks"), chunk_size=2))

    async def leave_early() -> None:
        stream = agent.stream_async("x")
        async for event in stream:
            if event.get("type") == "text_delta":
                break
        await stream.aclose()

    asyncio.run(leave_early())
    assert closed == ["hook unwound", "hook unwound"]
    assert agent._invocation is None and not agent._lock.locked()  # the agent is free for the next call


def test_a_direct_tool_call_is_observed_once_at_visible_and_raw_in_a_lead_chain_of_its_own() -> None:
    log: list[Any] = []
    scopes: list[Any] = []
    stores: list[Any] = []

    class Counting(Recorder):
        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            stores.append(task_store())
            return await super().awrap_tool_call(request, handler)

    class Contributor:
        def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
            scopes.append(ctx.scope)
            return (MiddlewarePlacement(Counting(log, "V"), VISIBLE), MiddlewarePlacement(Counting(log, "R"), RAW),
                    MiddlewarePlacement(Recorder(log, "L"), LOGICAL))

    use(lambda registry, config: registry.middlewares(Contributor()))
    agent = tool_agent(text("unused"))
    result = agent.tool.lookup(key="k")
    assert result["status"] == "success"
    assert log == [("V", "tool", "lookup"), ("R", "tool", "lookup"), ("R", "tool done", {"key": "k", "found": True}),
                   ("V", "tool done", result)]  # no model layer runs: a direct call makes no model call
    assert scopes == [AgentScope.LEAD] and stores[0] is stores[1] is not None
    log.clear()
    failed = agent.tool.explode(key="k", record_direct_tool_call=False)
    assert failed["status"] == "error"
    assert [entry[:2] for entry in log] == [("V", "tool"), ("R", "tool"), ("R", "tool error"), ("V", "tool done")]
    assert stores[2] is not stores[0]  # each direct call is a run of its own


def test_request_views_copy_every_field_of_their_dataclass() -> None:
    """The views are built field by field (no dataclass __init__): their field lists must stay the dataclasses'.
    Their mutable parts are copied deeply, when the hook first reads them."""
    import dataclasses

    from ray_harness.extensions import _chain

    for kind, names in _chain._VIEW_FIELDS.items():
        assert tuple(field.name for field in dataclasses.fields(kind)) == names
        assert not hasattr(kind, "__post_init__")
    messages = [{"role": "user", "content": [{"text": "hi"}]}]
    model_request = _chain.InvokeModelContext("agent", messages, "sys", [{"name": "t"}], {"auto": {}}, {})
    model_view = _chain._model_view(model_request)
    assert isinstance(model_view, _chain.InvokeModelContext) and model_view is not model_request
    assert "messages" not in vars(model_view)  # not read yet: not copied
    assert all(getattr(model_view, name) == getattr(model_request, name) for name in _chain._VIEW_FIELDS[
        _chain.InvokeModelContext])
    assert model_view.messages is model_view.messages  # one copy per view, kept for later reads
    assert model_view.messages[0]["content"][0] is not messages[0]["content"][0]
    assert model_view.tool_specs[0] is not model_request.tool_specs[0]
    assert model_view.tool_choice is not model_request.tool_choice
    model_view.messages = []
    assert model_view.messages == [] and model_request.messages == messages
    assert dataclasses.replace(model_view, system_prompt="other").messages == []
    tool_request = _chain.ExecuteToolContext("agent", None, {"toolUseId": "1", "name": "t", "input": {"a": [1]}}, {},
                                             threading.Event())
    tool_view = _chain._tool_view(tool_request)
    assert isinstance(tool_view, _chain.ExecuteToolContext)
    assert all(getattr(tool_view, name) == getattr(tool_request, name) for name in _chain._VIEW_FIELDS[
        _chain.ExecuteToolContext])
    assert tool_view.tool_use["input"]["a"] is not tool_request.tool_use["input"]["a"]


def test_detach_copies_json_deeply_and_anything_else_as_it_can() -> None:
    from ray_harness.extensions import _chain

    value = {"content": [{"text": "x", "bytes": b"\x00"}], "n": 1.5, "t": (1, [2])}
    copied = _chain._detach(value)
    assert copied == value and copied["content"][0] is not value["content"][0] and copied["t"][1] is not value["t"][1]
    assert _chain._detach("text") == "text" and _chain._detach(None) is None
    event = ToolResultEvent({"toolUseId": "1", "status": "success", "content": []})  # not marshal's: deepcopy
    assert _chain._detach(event) == event and _chain._detach(event) is not event
    lock = threading.Lock()
    assert _chain._detach(lock) is lock  # cannot be copied: handed out as it is


class InPlace(AgentMiddleware):
    """Changes, in place, the request it gets and the result handler returned to it (``what``)."""

    def __init__(self, what: str, seen: list[Any] | None = None) -> None:
        self.what = what
        self.seen = seen if seen is not None else []

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        if self.what == "request":
            self.seen.append(request.messages[-1]["content"][0].get("text"))
            request.messages[-1]["content"][0]["text"] = "REWRITTEN"
            request.messages[-1]["content"].append({"text": "INJECTED"})
            request.tool_specs[0]["name"] = "evil"
        result = await handler(request)
        if self.what == "result":
            self.seen.append(result.message["content"][0].get("text"))
            for block in result.message["content"]:
                if "text" in block:
                    block["text"] = "FORGED"
                if "toolUse" in block:
                    block["toolUse"]["input"]["key"] = "forged"
            result.usage["totalTokens"] = -1
        return result

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        if self.what == "request":
            self.seen.append(request.tool_use["input"]["key"])
            request.tool_use["input"]["key"] = "evil"
        result = await handler(request)
        if self.what == "result":
            self.seen.append(repr(result))
            if "content" in result:  # the ToolResult at TOOL_VISIBLE
                block = result["content"][0]
                if "json" in block:
                    block["json"]["key"] = "FORGED"
                else:
                    block["text"] = "FORGED"
                result["status"] = "error"
            else:  # the raw return value at TOOL_RAW
                result["key"] = "FORGED"
        return result


@tool
def record(key: str) -> dict[str, Any]:
    """Counts its runs and returns a dict."""
    calls.append(key)
    return {"key": key}


@pytest.mark.parametrize("what", ["request", "result"])
@pytest.mark.parametrize("placement", [LOGICAL, PHYSICAL, VISIBLE, RAW])
def test_in_place_changes_to_the_request_or_result_reach_neither_downstream_nor_the_caller(
        placement: Placement, what: str, caplog: pytest.LogCaptureFixture) -> None:
    """Observation only, deeply: changing what the hook sees in place (nested history blocks, the tool input, the
    returned ToolResult, raw value or ModelStopReason) changes no request, no tool call, no history, no answer.
    Three stacked hooks: each also sees the original, not what the hook inside it changed."""
    calls.clear()
    hooks = [InPlace(what) for _ in range(3)]
    contribute(*(MiddlewarePlacement(hook, placement) for hook in hooks))
    model = ScriptedModel(tool_call("record", {"key": "real"}), text("done"))
    agent = Agent(model, tools=[record], system_prompt="sys")
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        result = agent("hello")
    assert not caplog.records  # every hook ran through: its changes were made, and reached nothing
    assert str(result) == "done\n" and result.message == {"role": "assistant", "content": [{"text": "done"}]}
    assert calls == ["real"]
    use_id = agent.messages[1]["content"][0]["toolUse"]["toolUseId"]
    expected = [{"role": "user", "content": [{"text": "hello"}]},
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": use_id, "name": "record",
                                                               "input": {"key": "real"}}}]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": use_id, "status": "success",
                                                             "content": [{"json": {"key": "real"}}]}}]},
                {"role": "assistant", "content": [{"text": "done"}]}]
    tool_result = agent.messages[2]["content"][0]["toolResult"]
    if "text" in tool_result["content"][0]:  # how a dict return is converted is not this test's business
        expected[2] = agent.messages[2]
        assert "real" in tool_result["content"][0]["text"] and tool_result["status"] == "success"
    assert agent.messages == expected
    assert [list(call.messages) for call in model.calls] == [expected[:1], expected[:3]]
    assert [call.tool_names for call in model.calls] == [("record",), ("record",)]
    assert [call.system_prompt for call in model.calls] == ["sys", "sys"]
    assert result.metrics.accumulated_usage["totalTokens"] >= 0
    assert hooks[0].seen and all(hook.seen == hooks[0].seen for hook in hooks)  # none saw another's change
    assert "evil" not in repr(hooks[0].seen) and "FORGED" not in repr(hooks[0].seen)


def test_use_tells_distinct_installs_of_one_qualified_name_apart() -> None:
    """Closures of one factory, two lambdas and one install with two configs are distinct extensions; the same
    object with an equal config is the same one (the same handle), and removing one leaves the others."""
    seen: list[Any] = []

    def make_extension(tag: str) -> Any:
        class Observer(AgentMiddleware):  # a class of its own per closure, with one name
            async def awrap_model_call(self, request: Any, handler: Any) -> Any:
                seen.append(tag)
                return await handler(request)

        class Contributor:
            def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
                return (MiddlewarePlacement(Observer(), LOGICAL),)

        def install(registry: Any, config: Any) -> None:
            registry.middlewares(Contributor())

        return install

    def configured(registry: Any, config: Any) -> None:
        registry.middlewares(type("C", (), {"contribute_middlewares": lambda self, store, ctx: (
            MiddlewarePlacement(Recorder(seen, config["tag"]), LOGICAL),)})())

    audit = use(make_extension("audit"))
    billing = use(make_extension("billing"))
    assert audit is not billing and audit.name == billing.name
    first = use(lambda registry, config: make_extension("lambda 1")(registry, config))
    second = use(lambda registry, config: make_extension("lambda 2")(registry, config))
    assert first is not second
    a = use(configured, {"tag": "A"})
    assert use(configured, {"tag": "A"}) is a and use(configured, {"tag": "B"}) is not a
    names: list[str] = []
    agent = Agent(ScriptedModel(text("ok"), text("ok")))
    agent.add_hook(lambda event: names.extend(agent._invocation.extensions.model_names), AfterModelCallEvent)
    agent("x")
    assert [entry if isinstance(entry, str) else entry[0] for entry in seen
            if isinstance(entry, str) or entry[1] == "model"] == ["audit", "billing", "lambda 1", "lambda 2", "A", "B"]
    assert len(names) == len(set(names)) == 6  # unique wrapper names though the classes share name and <use>
    billing.remove()
    a.remove()
    seen.clear()
    agent("x")
    assert [entry if isinstance(entry, str) else entry[0] for entry in seen
            if isinstance(entry, str) or entry[1] == "model"] == ["audit", "lambda 1", "lambda 2", "B"]
    assert use(configured, {"tag": "A"}) is not a  # removed: installing it again is a new installation


@pytest.mark.usefixtures("installed_test_plugin")
def test_a_variable_that_does_not_load_fails_every_build_and_installs_none_of_its_list(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither a second build nor an in-code ``use()`` runs with part of the configured list."""
    monkeypatch.setenv(loading.ENV_VAR, f"{TEST_PLUGIN},no_such_ext")
    loading.reset()
    for _ in range(2):
        with pytest.raises(ExtensionError, match="unknown extension 'no_such_ext'"):
            Agent(ScriptedModel(text("ok")))("x")
        with pytest.raises(ExtensionError, match="unknown extension 'no_such_ext'"):
            use(lambda registry, config: None)
        assert loading._installed == []
    monkeypatch.setenv(loading.ENV_VAR, TEST_PLUGIN)  # fixed: the next build loads it
    agent = Agent(ScriptedModel(text("ok")))
    agent("x")
    assert agent.state.get("rh_test_plugin")["model_calls"] == 1


@pytest.mark.usefixtures("installed_test_plugin")
def test_an_entry_point_and_its_install_used_in_code_are_one_extension() -> None:
    import rh_test_plugin

    handle = use(TEST_PLUGIN)
    assert use(rh_test_plugin.install) is handle  # not a second copy that counts every call twice
    agent = Agent(ScriptedModel(text("ok")))
    agent("x")
    assert agent.state.get("rh_test_plugin")["model_calls"] == 1
    handle.remove()
    assert loading.installed() == []

    in_code = use(rh_test_plugin.install)  # in code first, then by name: it becomes the entry point
    assert in_code.name == "rh_test_plugin:install" and loading.forwarded_names() == []
    assert use(TEST_PLUGIN) is in_code
    assert in_code.name == TEST_PLUGIN and loading.forwarded_names() == [TEST_PLUGIN]
    assert use(rh_test_plugin.install) is in_code and len(loading.installed()) == 1
    assert use(rh_test_plugin.install, config={"other": 1}) is not in_code  # another config: another extension


def test_a_contribution_without_a_hook_acting_at_its_placement_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    class ModelOnly(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    class ToolOnly(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

    contribute(MiddlewarePlacement(ModelOnly(), VISIBLE), MiddlewarePlacement(ModelOnly(), STANDARD),
               MiddlewarePlacement(ToolOnly(), LOGICAL), MiddlewarePlacement(ModelOnly(), LOGICAL))
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        tool_agent(tool_call("lookup", {"key": "k"}), text("done"))("x")
        tool_agent(text("done"))("x")
    reports = [record.getMessage() for record in caplog.records if "observes nothing" in record.getMessage()]
    assert [report.split(" implements")[0] for report in reports] == [
        "Extension ext:test_ext: ToolOnly at MODEL_LOGICAL", "Extension ext:test_ext: ModelOnly at TOOL_VISIBLE",
        "Extension ext:test_ext: ModelOnly at STANDARD"]  # once per class and placement, not per build
    assert "(wrap_tool_call, sync or async)" in reports[1]


@pytest.mark.parametrize("placement", [LOGICAL, PHYSICAL, VISIBLE, RAW])
def test_a_plain_def_hook_may_return_the_handlers_awaitable(placement: Placement,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """``def awrap_*(self, request, handler): return handler(request)`` observes like ``async def``; a plain def
    that returns something not awaitable gets a diagnostic that says so, and the host calls ``handler``."""
    calls.clear()
    seen: list[str] = []

    class ReturnsAwaitable(AgentMiddleware):
        def awrap_model_call(self, request: Any, handler: Any) -> Any:
            seen.append("model")
            return handler(request)

        def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            seen.append("tool")
            return handler(request)

    class ReturnsNone(AgentMiddleware):
        def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return None

        awrap_tool_call = awrap_model_call

    contribute(MiddlewarePlacement(ReturnsAwaitable(), placement), MiddlewarePlacement(ReturnsNone(), placement))
    model = ScriptedModel(tool_call("side_effect", {"key": "real"}), text("done"))
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        assert str(Agent(model, tools=[side_effect])("x")) == "done\n"
    assert len(model.calls) == 2 and calls == ["real"]
    assert seen == (["model", "model"] if placement in (LOGICAL, PHYSICAL) else ["tool"])
    diagnostics = [record.getMessage() for record in caplog.records if "failed and was skipped" in record.getMessage()]
    assert diagnostics and all("ReturnsNone" in message and "returned NoneType, not an awaitable" in message
                               for message in diagnostics)


@pytest.mark.parametrize("placement", [VISIBLE, RAW])
def test_a_hook_that_stops_waiting_for_handler_cannot_cancel_the_tool(placement: Placement) -> None:
    """A hook that gives up on ``handler`` (``asyncio.wait_for(handler(request), 5)`` timing out) stops its own wait
    only: the tool runs to its end once, the model gets its real result, and the run goes on."""
    log: list[str] = []
    events: dict[str, asyncio.Event] = {}

    class GivesUp(AgentMiddleware):
        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            waiting = asyncio.ensure_future(handler(request))
            await events["started"].wait()
            waiting.cancel()  # what a timeout around handler does
            try:
                await waiting
            except asyncio.CancelledError:
                log.append("hook gave up")
            events["gate"].set()
            return "gave up"

    @tool
    async def gated(key: str) -> str:
        """Waits for the gate."""
        events["started"].set()
        await events["gate"].wait()
        log.append("tool finished")
        return f"real {key}"

    contribute(MiddlewarePlacement(GivesUp(), placement))
    model = ScriptedModel(tool_call("gated", {"key": "k"}), text("done"))
    agent = Agent(model, tools=[gated])

    async def run() -> Any:
        events.update(started=asyncio.Event(), gate=asyncio.Event())  # made in the loop that runs the test
        return await agent.invoke_async("x")

    assert str(asyncio.run(run())) == "done\n"
    assert log == ["hook gave up", "tool finished"]
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "real k"}]
    assert len(model.calls) == 2


@pytest.mark.parametrize("placement", [LOGICAL, PHYSICAL])
def test_cancel_while_a_hook_awaits_handler_in_another_task(placement: Placement) -> None:
    """``agent.cancel()`` interrupts the provider wait also when a hook runs ``handler`` in a task of its own: the
    call ends with the cancelled stop, as without hooks (not with a ``CancelledError``)."""

    class InATask(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await asyncio.wait_for(handler(request), timeout=60)

    contribute(MiddlewarePlacement(InATask(), placement))
    agent = Agent(ScriptedModel(text("slow", delay=30), text("next")))

    async def run() -> Any:
        task = asyncio.create_task(agent.invoke_async("x"))
        while agent._invocation is None or not agent._invocation.interruptible_wait:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        agent.cancel()
        return await task, await agent.invoke_async("again")

    cancelled, after = asyncio.run(run())
    assert cancelled.stop_reason == "cancelled" and after.stop_reason == "end_turn"


def test_a_callers_cancel_still_propagates_and_the_detached_tool_unwinds_first() -> None:
    log: list[str] = []
    events: dict[str, asyncio.Event] = {}

    class InATask(AgentMiddleware):
        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await asyncio.wait_for(handler(request), timeout=60)

    @tool
    async def waits(key: str) -> str:
        """Waits until cancelled."""
        events["started"].set()
        try:
            await asyncio.Event().wait()
        finally:
            log.append("tool cleanup")
        return key

    contribute(MiddlewarePlacement(InATask(), RAW))
    agent = Agent(ScriptedModel(tool_call("waits", {"key": "k"}), text("done")), tools=[waits])

    async def run() -> None:
        events["started"] = asyncio.Event()
        task = asyncio.create_task(agent.invoke_async("x"))
        await events["started"].wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        log.append("caller saw the cancel")

    asyncio.run(run())
    assert log == ["tool cleanup", "caller saw the cancel"]


def test_logical_sees_the_decisions_request_with_a_pending_structured_output() -> None:
    """``MODEL_LOGICAL`` sees the tool specs and tool_choice the decision is made with, as ``MODEL_PHYSICAL`` does:
    the structured-output tool while it is pending, and the forced choice on the forced turn."""
    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int

    seen: dict[str, list[Any]] = {"LOGICAL": [], "PHYSICAL": []}

    class Requests(AgentMiddleware):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            seen[self.tag].append(([spec["name"] for spec in request.tool_specs], request.tool_choice))
            return await handler(request)

    contribute(MiddlewarePlacement(Requests("LOGICAL"), LOGICAL), MiddlewarePlacement(Requests("PHYSICAL"), PHYSICAL))
    agent = tool_agent(text("no tool"), tool_call("Answer", {"value": 4}))
    assert agent("x", structured_output_model=Answer).structured_output == Answer(value=4)
    assert seen["LOGICAL"] == seen["PHYSICAL"] == [(["lookup", "explode", "Answer"], None),
                                                   (["lookup", "explode", "Answer"], {"tool": {"name": "Answer"}})]


@pytest.mark.parametrize("returned", ["placement", "text", 5])
def test_a_contributor_returning_no_sequence_gets_a_diagnostic_that_says_so(
        returned: Any, caplog: pytest.LogCaptureFixture) -> None:
    log: list[Any] = []
    value = {"placement": MiddlewarePlacement(Recorder(log, "lone"), LOGICAL), "text": "abc", 5: 5}[returned]

    class Contributor:
        def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
            return value

    use(lambda registry, config: registry.middlewares(Contributor()))
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        Agent(ScriptedModel(text("ok")))("x")
    assert log == []
    assert (f"Contributor.contribute_middlewares failed and was skipped: contribute_middlewares returns a sequence "
            f"of MiddlewarePlacement (or None), got {type(value).__name__}") in caplog.text
    assert "item 0" not in caplog.text  # not one diagnostic per character of a string


@pytest.mark.usefixtures("installed_test_plugin")
def test_an_own_in_code_install_named_by_a_callers_list_stays_when_the_caller_drops_it() -> None:
    import rh_test_plugin

    own = use(rh_test_plugin.install)
    loading.adopt([TEST_PLUGIN])  # a caller forwards the entry point: the same extension, now named by it
    assert [extension.use for extension in loading.installed()] == [TEST_PLUGIN]
    loading.adopt([])  # the caller removed it: this process installed it itself, so it stays
    assert loading.installed() == [own.extension]


class OwnTimeout(AgentMiddleware):
    """Awaits ``handler`` under ``asyncio.timeout`` in its own task (the test expires it); logs what it saw.

    When it times out, ``mode`` says what it does: ``returns`` a value, ``lingers`` (awaits more, then returns) or
    ``raises`` its ``TimeoutError``.
    """

    def __init__(self, log: list[str], timeouts: list[Any], mode: str = "returns",
                 gate: list[asyncio.Event] | None = None) -> None:
        self.log = log
        self.timeouts = timeouts
        self.mode = mode
        self.gate = [] if gate is None else gate

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        try:
            async with asyncio.timeout(None) as timeout:
                self.timeouts.append(timeout)
                result = await handler(request)
        except TimeoutError:
            self.log.append("hook timed out")
            if self.mode == "raises":
                raise
            if self.mode == "lingers":  # more awaits after giving up: the call waits for them, it is not lost
                await asyncio.sleep(0.01)
                self.log.append("hook lingered")
            return "gave up"
        finally:
            for gate in self.gate:  # what the observed call waits for
                gate.set()
        self.log.append("hook saw the result")
        return result

    awrap_tool_call = awrap_model_call


class Plain(AgentMiddleware):
    """Awaits ``handler`` plainly; logs what it saw (inside a layer whose outer hook times out)."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        try:
            return await handler(request)
        except asyncio.CancelledError:
            self.log.append("inner hook cancelled")
            raise

    awrap_tool_call = awrap_model_call


def _expire(timeouts: list[Any]) -> None:
    timeouts[-1].reschedule(asyncio.get_running_loop().time())  # the hook's timeout expires at the next step


@pytest.mark.parametrize("mode", ["returns", "lingers", "raises"])
@pytest.mark.parametrize("stacked", [False, True])
@pytest.mark.parametrize("placement", [LOGICAL, PHYSICAL, VISIBLE, RAW])
def test_a_timeout_around_handler_in_the_hooks_own_task_cannot_stop_the_call(
        placement: Placement, stacked: bool, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    """``async with asyncio.timeout(...)`` around ``handler`` in the hook's own task (the invocation's) ends the
    hook's wait only: the tool or the model request runs to its end once, the agent gets its real result, the run
    goes on, and a hook inside the one that timed out sees the cancel of its wait, not the call's. A hook that lets
    its ``TimeoutError`` out gets the diagnostic."""
    log: list[str] = []
    timeouts: list[Any] = []
    gate: list[asyncio.Event] = []

    class Model(ScriptedModel):
        async def stream(self, *args: Any, **kwargs: Any) -> Any:
            first = True
            async for event in super().stream(*args, **kwargs):
                if first and placement in (LOGICAL, PHYSICAL) and len(self.calls) == 1:
                    first = False
                    _expire(timeouts)
                    await gate[0].wait()  # the hook's timeout expires here, while the provider streams
                    log.append("model finished")
                yield event

    @tool
    async def gated(key: str) -> str:
        """Waits for the gate."""
        if placement in (VISIBLE, RAW):
            _expire(timeouts)
            await gate[0].wait()
            log.append("tool finished")
        return f"real {key}"

    placements = [MiddlewarePlacement(OwnTimeout(log, timeouts, mode, gate), placement)]
    if stacked:
        placements.append(MiddlewarePlacement(Plain(log), placement))
    contribute(*placements)
    model = Model(tool_call("gated", {"key": "k"}), text("done"))
    agent = Agent(model, tools=[gated])

    async def run() -> Any:
        gate.append(asyncio.Event())
        return await agent.invoke_async("x")

    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        result = asyncio.run(run())
    finished = "model finished" if placement in (LOGICAL, PHYSICAL) else "tool finished"
    expected = ["inner hook cancelled"] if stacked else []
    expected += ["hook timed out"] + (["hook lingered"] if mode == "lingers" else []) + [finished]
    assert log[:len(expected)] == expected
    assert str(result) == "done\n" and len(model.calls) == 2
    assert agent.messages[1]["content"][0]["toolUse"]["name"] == "gated"  # the real answer of the first call
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "real k"}]
    hook = "awrap_model_call" if placement in (LOGICAL, PHYSICAL) else "awrap_tool_call"
    reported = f"Extension ext:test_ext: OwnTimeout.{hook} failed and was skipped: TimeoutError" in caplog.text
    assert reported == (mode == "raises")


def test_stream_events_keep_flowing_after_a_hooks_timeout_expired() -> None:
    """The provider streams on after a ``MODEL_PHYSICAL`` hook's own timeout expired mid-stream: every delta reaches
    the consumer and the message is the whole answer."""
    log: list[str] = []
    timeouts: list[Any] = []

    class Model(ScriptedModel):
        async def stream(self, *args: Any, **kwargs: Any) -> Any:
            count = 0
            async for event in super().stream(*args, **kwargs):
                count += 1
                if count == 3:
                    _expire(timeouts)
                    await asyncio.sleep(0.01)  # the timeout expires while the provider waits
                yield event

    contribute(MiddlewarePlacement(OwnTimeout(log, timeouts), PHYSICAL))
    agent = Agent(Model(text("a long answer in many chunks"), chunk_size=2))

    async def consume() -> str:
        return "".join([event["data"] async for event in agent.stream_async("x") if event.get("type") == "text_delta"])

    assert asyncio.run(consume()) == "a long answer in many chunks"
    assert log == ["hook timed out"]
    assert agent.messages[-1]["content"] == [{"text": "a long answer in many chunks"}]


@pytest.mark.parametrize("swallow", [False, True])
@pytest.mark.parametrize("placement", [VISIBLE, RAW])
def test_a_callers_cancel_still_reaches_the_tool_when_a_hook_has_a_timeout_around_handler(
        placement: Placement, swallow: bool) -> None:
    """A real cancel of the invocation's task ends the hook's wait and reaches the tool, which unwinds before the
    caller sees the ``CancelledError``; also when the hook catches the cancel and returns (nobody withdrew it)."""
    log: list[str] = []
    started: list[asyncio.Event] = []

    class WithTimeout(AgentMiddleware):
        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            try:
                async with asyncio.timeout(60):
                    return await handler(request)
            except asyncio.CancelledError:
                log.append("hook saw the cancel")
                if swallow:
                    return None
                raise

    @tool
    async def waits(key: str) -> str:
        """Waits until cancelled."""
        started[0].set()
        try:
            await asyncio.Event().wait()
        finally:
            log.append("tool cleanup")
        return key

    contribute(MiddlewarePlacement(WithTimeout(), placement))
    agent = Agent(ScriptedModel(tool_call("waits", {"key": "k"}), text("done")), tools=[waits])

    async def run() -> None:
        started.append(asyncio.Event())
        task = asyncio.create_task(agent.invoke_async("x"))
        await started[0].wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        log.append("caller saw the cancel")

    asyncio.run(run())
    assert sorted(log[:2]) == ["hook saw the cancel", "tool cleanup"] and log[2:] == ["caller saw the cancel"]
