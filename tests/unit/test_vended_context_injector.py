"""ContextInjector: text folded into one model call's input, as Strands' ``vended_plugins.context_injector``."""

from __future__ import annotations

import logging
import pickle
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent, tool
from ray_harness.injection import InjectionContext
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.vended_plugins.context_injector import ContextInjector


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


def now(context: InjectionContext) -> str:
    return "<now>noon</now>"


def _tool_round(*plugins: ContextInjector) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(tool_call("ping", {}), text("done"))
    return Agent(model, tools=[ping], plugins=list(plugins), callback_handler=None), model


def test_a_user_turn_gets_the_text_appended_and_the_history_never_does() -> None:
    agent, model = _tool_round(ContextInjector(now))
    agent("hello")
    first, second = model.calls
    assert first.messages[-1]["content"] == [{"text": "hello"}, {"text": "\n\n<now>noon</now>"}]
    assert "<now>" not in str(second.messages)  # the tool-result turn is no user turn
    assert agent.messages[0] == {"role": "user", "content": [{"text": "hello"}]}
    assert "<now>" not in str(agent.messages)


def test_every_turn_folds_into_the_tool_result_turn_after_its_result() -> None:
    agent, model = _tool_round(ContextInjector(now, trigger="everyTurn"))
    agent("hello")
    last = model.calls[1].messages[-1]["content"]
    assert "toolResult" in last[0] and last[1] == {"text": "<now>noon</now>"}  # no text before it: no separator
    assert "<now>" not in str(agent.messages)


def test_a_predicate_sees_the_context_and_decides() -> None:
    seen: list[InjectionContext] = []

    def only_with_flag(context: InjectionContext) -> bool:
        seen.append(context)
        return bool(context.state.get("inject"))

    model = ScriptedModel(tool_call("ping", {}), text("done"), text("again"))
    agent = Agent(model, tools=[ping], plugins=[ContextInjector(now, trigger=only_with_flag)], callback_handler=None)
    agent.state.set("inject", False)
    agent("hello")
    assert "<now>" not in str([call.messages for call in model.calls])
    assert seen[0].agent is agent and seen[0].state is agent.state and seen[0].messages[-1]["role"] == "user"
    agent.state.set("inject", True)
    agent("again")
    assert "<now>" in str(model.calls[2].messages[-1])


async def test_an_async_renderer_and_two_injectors_in_the_order_given() -> None:
    async def later(context: InjectionContext) -> str:
        return "second"

    model = ScriptedModel(text("ok"))
    agent = Agent(model, plugins=[ContextInjector(lambda context: "first", name="a"),
                                  ContextInjector(later, name="b")], callback_handler=None)
    await agent.invoke_async("hello")
    assert model.calls[0].messages[-1]["content"] == [{"text": "hello"}, {"text": "\n\nfirst"}, {"text": "\n\nsecond"}]


@pytest.mark.parametrize("rendered", [None, "", "   \n"])
def test_nothing_to_inject_leaves_the_call_as_it_was(rendered: Any) -> None:
    agent, model = _tool_round(ContextInjector(lambda context: rendered))
    agent("hello")
    assert model.calls[0].messages[-1]["content"] == [{"text": "hello"}]


def test_a_failing_renderer_or_trigger_skips_the_injection_not_the_call(caplog: pytest.LogCaptureFixture) -> None:
    def broken(context: InjectionContext) -> str:
        raise RuntimeError("renderer down")

    def broken_trigger(context: InjectionContext) -> bool:
        raise RuntimeError("trigger down")

    with caplog.at_level(logging.WARNING):
        agent, model = _tool_round(ContextInjector(broken), ContextInjector(now, name="t", trigger=broken_trigger))
        assert str(agent("hello")).strip() == "done"
    assert model.calls[0].messages[-1]["content"] == [{"text": "hello"}]
    assert "renderer down" in caplog.text and "trigger down" in caplog.text


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="render_content must be callable"):
        ContextInjector("text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="trigger must be 'userTurn', 'everyTurn' or a predicate"):
        ContextInjector(now, trigger="sometimes")  # type: ignore[arg-type]
    assert ContextInjector(now).name == "strands:context-injector"


def test_an_agent_with_an_injector_pickles_and_its_copy_injects() -> None:
    model = ScriptedModel(text("ok"))
    agent = Agent(model, plugins=[ContextInjector(now)], callback_handler=None)
    copy = pickle.loads(cloudpickle.dumps(agent))  # as runtime="ray" ships agents to hosts
    copy("hello")
    assert copy.model.calls[0].messages[-1]["content"][-1] == {"text": "\n\n<now>noon</now>"}
