from __future__ import annotations

import pytest

from ray_harness import Agent, tool
from ray_harness.interventions import Confirm, Deny, Guide, InterventionHandler, Proceed, Transform
from ray_harness.testing import ScriptedModel, text, tool_call


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


class Policy(InterventionHandler):
    def __init__(self, name: str, action: object = None, *, on_error: str = "throw"):
        self._name = name
        self.action = action
        self.on_error = on_error  # type: ignore[assignment]
        self.calls = 0

    @property
    def name(self) -> str:
        return self._name

    def _decide(self, event: object) -> object:
        self.calls += 1
        if isinstance(self.action, Exception):
            raise self.action
        return self.action


class ToolPolicy(Policy):
    def before_tool_call(self, event):  # type: ignore[no-untyped-def,override]
        return self._decide(event)


class ModelPolicy(Policy):
    def before_model_call(self, event):  # type: ignore[no-untyped-def,override]
        return self._decide(event)


class AfterModelPolicy(Policy):
    def after_model_call(self, event):  # type: ignore[no-untyped-def,override]
        return self._decide(event)


class InvocationPolicy(Policy):
    def before_invocation(self, event):  # type: ignore[no-untyped-def,override]
        return self._decide(event)


def _tool_result_text(agent: Agent) -> str:
    return agent.messages[2]["content"][0]["toolResult"]["content"][0]["text"]


def _agent(*handlers: InterventionHandler, steps: tuple = ()) -> Agent:
    steps = steps or (tool_call("delete_file", {"path": "/etc"}), text("ok"))
    return Agent(ScriptedModel(*steps), tools=[delete_file], interventions=list(handlers))


def test_deny_short_circuits_and_drops_guidance() -> None:
    later = ToolPolicy("later", Proceed())
    agent = _agent(ToolPolicy("guide", Guide("be careful")), ToolPolicy("deny", Deny("not allowed")), later)
    agent("x")
    assert _tool_result_text(agent) == "DENIED: not allowed"
    assert later.calls == 0


def test_guidance_accumulates() -> None:
    agent = _agent(ToolPolicy("a", Guide("first")), ToolPolicy("b", Proceed()), ToolPolicy("c", Guide("second")))
    agent("x")
    assert _tool_result_text(agent) == "GUIDANCE: [a] first\n[c] second"


def test_confirm_with_preset_response_and_failed_confirm() -> None:
    agent = _agent(ToolPolicy("ok", Confirm("Delete?", response=" YES ")))
    agent("x")
    assert _tool_result_text(agent) == "deleted /etc"
    agent = _agent(ToolPolicy("no", Confirm("Delete?", response="nope")), ToolPolicy("after", Guide("x")))
    agent("x")
    assert _tool_result_text(agent) == "CONFIRMATION_FAILED: Delete?"


def test_confirm_pauses_for_a_human_and_resumes() -> None:
    agent = _agent(ToolPolicy("approver", Confirm("Really delete /etc?")))
    first = agent("x")
    assert first.stop_reason == "interrupt"
    (pending,) = first.interrupts
    assert pending.name == "approver" and pending.reason == "Really delete /etc?"
    assert pending.id.startswith("v1:before_tool_call:")
    second = agent([{"interruptResponse": {"interruptId": pending.id, "response": True}}])
    assert second.stop_reason == "end_turn"
    assert _tool_result_text(agent) == "deleted /etc"


def test_transform_applies_at_once_and_later_handlers_see_it() -> None:
    seen: list[dict] = []

    def rewrite(event):  # type: ignore[no-untyped-def]
        event.tool_use = {**event.tool_use, "input": {"path": "/tmp/safe"}}

    class Spy(ToolPolicy):
        def before_tool_call(self, event):  # type: ignore[no-untyped-def]
            seen.append(event.tool_use["input"])
            return Proceed()

    agent = _agent(ToolPolicy("t", Transform(rewrite)), Spy("spy"))
    agent("x")
    assert seen == [{"path": "/tmp/safe"}]
    assert _tool_result_text(agent) == "deleted /tmp/safe"


@pytest.mark.parametrize(("on_error", "expected"), [("deny", "DENIED: Handler threw: broken"),
                                                    ("proceed", "deleted /etc")])
def test_on_error_deny_and_proceed(on_error: str, expected: str) -> None:
    agent = _agent(ToolPolicy("p", RuntimeError("broken"), on_error=on_error))
    agent("x")
    assert _tool_result_text(agent) == expected


def _broken_transform(event: object) -> None:
    raise RuntimeError("transform broke")


@pytest.mark.parametrize(("on_error", "expected"), [("deny", "DENIED: Handler threw: transform broke"),
                                                    ("proceed", "deleted /etc")])
def test_a_raising_transform_follows_on_error_too(on_error: str, expected: str) -> None:
    agent = _agent(ToolPolicy("p", Transform(_broken_transform), on_error=on_error))
    agent("x")
    assert _tool_result_text(agent) == expected
    with pytest.raises(RuntimeError, match="transform broke"):
        _agent(ToolPolicy("p", Transform(_broken_transform)))("x")


def test_on_error_throw_is_default() -> None:
    agent = _agent(ToolPolicy("p", RuntimeError("broken")))
    with pytest.raises(RuntimeError, match="broken"):
        agent("x")
    assert agent.messages == []


def test_duplicate_names_rejected() -> None:
    with pytest.raises(ValueError, match="already registered"):
        _agent(ToolPolicy("same", Proceed()), ToolPolicy("same", Proceed()))


def test_hooks_only_for_overridden_methods() -> None:
    from ray_harness.hooks import AfterModelCallEvent, BeforeModelCallEvent, BeforeToolCallEvent

    agent = _agent(ToolPolicy("t", Proceed()))
    assert agent.hooks.has_callbacks(BeforeToolCallEvent)
    assert not agent.hooks.has_callbacks(BeforeModelCallEvent)
    assert not agent.hooks.has_callbacks(AfterModelCallEvent)


def test_before_model_call_deny_and_guide() -> None:
    agent = Agent(ScriptedModel(), interventions=[ModelPolicy("m", Deny("quota"))])
    assert str(agent("x")) == "DENIED: quota\n"
    model = ScriptedModel(text("ok"))
    Agent(model, interventions=[ModelPolicy("m", Guide("answer in French"))])("x")
    assert model.calls[0].messages[-1]["content"][-1] == {"text": "GUIDANCE: [m] answer in French"}


def test_before_invocation_deny() -> None:
    result = Agent(ScriptedModel(), interventions=[InvocationPolicy("i", Deny("banned user"))])("x")
    assert str(result) == "DENIED: banned user\n"


def test_guide_after_model_discards_reply_and_retries_with_a_bound() -> None:
    model = ScriptedModel(text("bad 1"), text("bad 2"), text("bad 3"))
    agent = Agent(model, interventions=[AfterModelPolicy("critic", Guide("be precise"))], max_guide_retries=2)
    result = agent("x")
    assert str(result) == "bad 3\n"  # the bound stops the retries; the last reply is kept
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]
    assert model.calls[1].messages[-1]["content"][-1] == {"text": "GUIDANCE: [critic] be precise"}


def test_a_guide_after_a_failed_model_call_retries_it_with_the_guidance() -> None:
    """Strands: a Guide on after_model_call sets ``retry`` whether the call answered or raised."""
    seen: list[object] = []

    class OnError(InterventionHandler):
        name = "fallback"

        def after_model_call(self, event):  # type: ignore[no-untyped-def,override]
            seen.append(event.exception)
            return Guide("answer from memory") if event.exception is not None else Proceed()

    model = ScriptedModel(ValueError("search backend down"), text("from memory"))
    agent = Agent(model, interventions=[OnError()], retry_strategy=None)
    assert str(agent("x")) == "from memory\n"
    assert isinstance(seen[0], ValueError) and seen[1:] == [None]
    assert model.calls[1].messages[-1]["content"][-1] == {"text": "GUIDANCE: [fallback] answer from memory"}
    assert [m["role"] for m in agent.messages] == ["user", "assistant"]


def test_a_guide_after_failed_model_calls_is_bounded_then_the_error_is_raised() -> None:
    policy = AfterModelPolicy("critic", Guide("try again"))
    model = ScriptedModel(*[ValueError(f"down {i}") for i in range(3)])
    agent = Agent(model, interventions=[policy], retry_strategy=None, max_guide_retries=2)
    with pytest.raises(ValueError, match="down 2"):
        agent("x")
    assert len(model.calls) == 3 and agent.messages == []


def test_a_failed_invocation_after_a_guide_rolls_back_only_its_own_turn() -> None:
    """The guide merges into the prompt's message (a new dict); the rollback must still find where to cut."""
    policy = ModelPolicy("m", Proceed())
    agent = Agent(ScriptedModel(text("first answer"), ValueError("provider down")), interventions=[policy],
                  retry_strategy=None)
    agent("first")
    earlier = list(agent.messages)
    policy.action = Guide("be brief")
    with pytest.raises(ValueError, match="provider down"):
        agent("second")
    assert agent.messages == earlier  # the earlier conversation is kept, the failed turn is gone


def test_guide_before_a_retried_model_call_is_added_once() -> None:
    from ray_harness.agent.retry import ModelRetryStrategy
    from ray_harness.types.exceptions import ModelThrottledException

    model = ScriptedModel(ModelThrottledException("slow down"), text("ok"))
    agent = Agent(model, interventions=[ModelPolicy("m", Guide("be brief"))],
                  retry_strategy=ModelRetryStrategy(max_attempts=2, initial_delay=0, max_delay=0))
    agent("x")
    assert agent.messages[0]["content"] == [{"text": "x"}, {"text": "GUIDANCE: [m] be brief"}]
    assert model.calls[1].messages[0]["content"] == agent.messages[0]["content"]


def test_a_handler_returning_none_fails_closed_as_in_strands() -> None:
    ran: list[str] = []

    @tool
    def drop_table(name: str) -> str:
        """Drop a table."""
        ran.append(name)
        return "dropped"

    class Forgetful(InterventionHandler):
        name = "forgetful"

        def before_tool_call(self, event: object) -> None:
            if False:  # the `return Deny(...)` a policy meant to write
                pass

    agent = Agent(ScriptedModel(tool_call("drop_table", {"name": "users"}), text("done")), tools=[drop_table],
                  interventions=[Forgetful()])
    with pytest.raises(TypeError, match=r"'forgetful'.before_tool_call returned None"):
        agent("drop it")
    assert ran == []
