"""The Agent's own surface next to Strands': ``AgentState``, identity arguments, prompt forms, settable fields,
``cleanup()`` and the context-manager form."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.agent.state import AgentState
from ray_harness.hooks.events import BeforeInvocationEvent, BeforeToolCallEvent
from ray_harness.session import FileSessionManager
from ray_harness.testing import ScriptedModel, text
from ray_harness.tools.base import AgentTool
from ray_harness.types.exceptions import ModelConfigurationError

# -- AgentState ----------------------------------------------------------------------------------------------


def test_state_holds_the_json_value_that_a_session_restores(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(text("ok")), session_manager=FileSessionManager("s", storage_dir=str(tmp_path)))
    # Int and str keys in one dict: the session write used to fail after the model call.
    agent.state.set("mixed", {1: "a", "b": 2})
    agent.state.set("pair", (1, 2))
    assert str(agent("hi")) == "ok\n"
    reloaded = Agent(ScriptedModel(text("ok")), session_manager=FileSessionManager("s", storage_dir=str(tmp_path)))
    assert agent.state.get() == reloaded.state.get() == {"mixed": {"1": "a", "b": 2}, "pair": [1, 2]}


def test_state_refuses_blank_keys_as_strands_does() -> None:
    state = AgentState()
    for key in ("", "  ", None, 1):
        with pytest.raises(ValueError, match="state key must be a non-blank string"):
            state.set(key, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="state key must be a non-blank string"):
        state.delete(None)  # type: ignore[arg-type]
    state.delete("absent")  # an absent key is still ignored


def test_the_whole_state_can_be_copied_while_a_tool_thread_sets_keys() -> None:
    # A session write or snapshot (to_dict) racing a sync tool's state.set raised "dictionary changed size".
    state = AgentState({f"k{i}": [i] for i in range(100)})
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            state.set(f"n{i % 50}", [i])
            if i % 50 == 49:
                for j in range(50):
                    state.delete(f"n{j}")
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(200):
            assert len(state.to_dict()) >= 100
            assert len(state.get()) >= 100
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("value", [5, [("a", 1)], "a=1"])
def test_a_state_that_is_not_a_dict_is_named(value: Any) -> None:
    with pytest.raises(ValueError, match="state must be an AgentState or a dict"):
        Agent(ScriptedModel(text("x")), state=value)


def test_assigning_a_dict_as_state_gives_an_agent_state() -> None:
    agent = Agent(ScriptedModel(text("x")))
    agent.state = {"n": 1}  # type: ignore[assignment]
    assert isinstance(agent.state, AgentState)
    assert agent.snapshot().state == {"n": 1}


# -- identity ------------------------------------------------------------------------------------------------


def test_none_name_and_agent_id_are_the_defaults_as_in_strands() -> None:
    agent = Agent(ScriptedModel(text("x")), name=None, agent_id=None)  # type: ignore[arg-type]
    assert (agent.name, agent.agent_id) == ("agent", "default")
    assert agent.snapshot().agent_id == "default"


@pytest.mark.parametrize(("argument", "value", "message"), [
    ("agent_id", "team/a", "must not contain path separators"),
    ("agent_id", 5, "agent_id must be a non-empty string"),
    ("agent_id", "", "agent_id must be a non-empty string"),
    ("name", 5, "name must be a non-empty string"),
])
def test_a_bad_identity_is_named_at_construction(argument: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Agent(ScriptedModel(text("x")), **{argument: value})


# -- settable fields are checked where they are set ----------------------------------------------------------


def test_an_assigned_system_prompt_is_checked_and_copied() -> None:
    model = ScriptedModel(text("ok"))
    agent = Agent(model)
    with pytest.raises(TypeError, match="system_prompt must be a string"):
        agent.system_prompt = 5  # type: ignore[assignment]
    blocks: list[Any] = [{"text": "A"}, {"cachePoint": {"type": "default"}}]
    agent.system_prompt = blocks
    blocks.append({"text": "later"})
    assert agent.system_prompt_content == [{"text": "A"}, {"cachePoint": {"type": "default"}}]
    agent("x")
    assert model.calls[0].system_prompt == [{"text": "A"}, {"cachePoint": {"type": "default"}}]
    agent.system_prompt = "plain"
    assert agent.system_prompt_content == [{"text": "plain"}]


def test_an_assigned_model_is_resolved_like_the_constructor_argument() -> None:
    agent = Agent(ScriptedModel(text("one")))
    agent("x")
    agent.model = ScriptedModel(text("two"))
    assert str(agent("y")) == "two\n"
    agent.model = "openai-compatible:http://127.0.0.1:9/v1#m"
    assert type(agent.model).__name__ == "OpenAIModel"
    with pytest.raises(ModelConfigurationError, match="model must be a ray_harness Model"):
        agent.model = object()  # type: ignore[assignment]


def test_an_agent_pickled_when_model_prompt_and_state_were_plain_attributes_still_loads() -> None:
    agent = Agent(ScriptedModel(text("ok")), system_prompt="sys", state={"k": 1})
    old = agent.__getstate__()
    for name in ("model", "system_prompt", "state"):
        old[name] = old.pop(f"_{name}")
    clone = Agent.__new__(Agent)
    clone.__setstate__(old)
    assert (clone.system_prompt, clone.state.get("k")) == ("sys", 1)
    assert str(clone("x")) == "ok\n"
    assert pickle.loads(pickle.dumps(clone)).system_prompt == "sys"


# -- prompt forms --------------------------------------------------------------------------------------------


def test_cache_point_and_video_blocks_of_a_prompt_reach_the_model() -> None:
    # They used to become {} on the way in, which every provider refused.
    model = ScriptedModel(text("ok"))
    agent = Agent(model)
    prompt: list[Any] = [{"text": "look"}, {"video": {"format": "mp4", "source": {"bytes": b"\x00v"}}},
                         {"cachePoint": {"type": "default"}}]
    agent(prompt)
    assert model.calls[0].messages[0] == {"role": "user", "content": prompt}
    assert agent.messages[0]["content"] == prompt


@pytest.mark.parametrize(("prompt", "message"), [
    ([{"txt": "typo"}], r"prompt\[0\]: a content block needs one of"),
    ([{}], r"prompt\[0\]: a content block needs one of"),
    ([{"role": "user", "content": [{"text": "a"}, {"foo": 1}]}], r"prompt\[0\]\.content\[1\]: a content block"),
    (["a", "b"], r"prompt\[0\] is a str, not a message or content block"),
])
def test_a_prompt_of_unknown_blocks_is_refused_and_the_history_stays(prompt: Any, message: str) -> None:
    agent = Agent(ScriptedModel(text("x")), messages=[{"role": "user", "content": [{"text": "before"}]}])
    with pytest.raises(ValueError, match=message):
        agent(prompt)
    assert agent.messages == [{"role": "user", "content": [{"text": "before"}]}]


# -- cleanup and the context-manager form --------------------------------------------------------------------


class _Provider:
    def __init__(self) -> None:
        self.closed = 0

    async def load_tools(self) -> list[AgentTool]:
        return []

    def close(self) -> None:
        self.closed += 1


def test_cleanup_closes_the_tool_providers_as_in_strands() -> None:
    provider = _Provider()
    agent = Agent(ScriptedModel(text("ok"), text("again")), tools=[provider])
    agent.cleanup()
    agent.cleanup()
    assert provider.closed == 2
    assert str(agent("x")) == "ok\n"  # still usable


def test_the_with_block_cleans_up_at_its_end() -> None:
    provider = _Provider()
    with Agent(ScriptedModel(text("ok")), tools=[provider]) as agent:
        assert str(agent("x")) == "ok\n"
        assert provider.closed == 0
    assert provider.closed == 1


async def test_the_async_with_block_cleans_up_at_its_end() -> None:
    provider = _Provider()
    async with Agent(ScriptedModel(text("ok")), tools=[provider]) as agent:
        assert str(await agent.invoke_async("x")) == "ok\n"
    assert provider.closed == 1


async def test_shutdown_and_shutdown_async_are_strands_names_for_cleanup() -> None:
    provider = _Provider()
    agent = Agent(ScriptedModel(), tools=[provider])
    agent.shutdown()
    await agent.shutdown_async()
    assert provider.closed == 2


# -- Strands' other agent arguments and properties ------------------------------------------------------------


def test_structured_output_prompt_is_the_message_that_asks_for_the_output() -> None:
    from pydantic import BaseModel

    from ray_harness.testing import tool_call

    class Person(BaseModel):
        name: str

    model = ScriptedModel(text("It is Ann."), tool_call("Person", {"name": "Ann"}))
    agent = Agent(model, structured_output_prompt="Now fill in the form.")
    assert agent("who?", structured_output_model=Person).structured_output == Person(name="Ann")
    assert model.calls[1].messages[-1] == {"role": "user", "content": [{"text": "Now fill in the form."}]}
    with pytest.raises(ValueError, match="structured_output_prompt"):
        Agent(ScriptedModel(), structured_output_prompt=" ")


async def test_structured_output_prompt_per_call_overrides_the_agents_as_strands() -> None:
    from pydantic import BaseModel

    from ray_harness.testing import tool_call

    class Person(BaseModel):
        name: str

    model = ScriptedModel(text("Ann."), tool_call("Person", {"name": "Ann"}), text("Bob."),
                          tool_call("Person", {"name": "Bob"}), text("Cy."), tool_call("Person", {"name": "Cy"}))
    agent = Agent(model, structured_output_prompt="Agent's ask.")
    agent("who?", structured_output_model=Person, structured_output_prompt="Call's ask.")
    await agent.invoke_async("and?", structured_output_model=Person, structured_output_prompt="Async ask.")
    async for event in agent.stream_async("more?", structured_output_model=Person):
        result = event.get("result")
    assert [call.messages[-1]["content"] for call in model.calls[1::2]] == [
        [{"text": "Call's ask."}], [{"text": "Async ask."}], [{"text": "Agent's ask."}]]
    assert result.structured_output == Person(name="Cy")
    seen: list[dict] = []
    agent.add_hook(lambda event: seen.append(dict(event.invocation_state)), BeforeInvocationEvent)
    model2 = ScriptedModel(text("x"), tool_call("Person", {"name": "D"}))
    agent.model = model2
    agent("again", structured_output_model=Person, structured_output_prompt="Ask.")
    assert "structured_output_prompt" not in seen[0]  # an argument, not invocation state
    with pytest.raises(TypeError, match="structured_output_prompt must be a str"):
        agent("x", structured_output_model=Person, structured_output_prompt=3)  # type: ignore[arg-type]


def test_concurrent_invocation_mode_takes_only_throw() -> None:
    Agent(ScriptedModel(), concurrent_invocation_mode="throw")
    with pytest.raises(ValueError, match="concurrent_invocation_mode must be 'throw'"):
        Agent(ScriptedModel(), concurrent_invocation_mode="unsafe_reentrant")


def test_session_id_is_the_session_managers_or_one_of_the_agents_own(tmp_path: Path) -> None:
    with_session = Agent(ScriptedModel(), session_manager=FileSessionManager("ticket-7", storage_dir=str(tmp_path)))
    assert with_session.session_id == "ticket-7"
    alone = Agent(ScriptedModel())
    assert len(alone.session_id) == 8 and alone.session_id == alone.session_id
    assert alone.session_id != Agent(ScriptedModel()).session_id
    assert pickle.loads(pickle.dumps(alone)).session_id == alone.session_id


def test_cancel_signal_is_the_running_invocations() -> None:
    from ray_harness.testing import tool_call
    from ray_harness.tools.decorator import tool

    seen: list[bool] = []

    @tool
    def slow() -> str:
        """Wait."""
        return "done"

    def cancel_first(event: BeforeToolCallEvent) -> None:
        event.agent.cancel()
        seen.append(event.agent.cancel_signal.is_set())

    agent = Agent(ScriptedModel(tool_call("slow", {}), text("never")), tools=[slow], hooks=[cancel_first])
    assert agent("go").stop_reason == "cancelled"
    assert seen == [True] and not agent.cancel_signal.is_set()  # idle: a fresh, unset signal


# -- the sandbox argument --------------------------------------------------------------------------------------


def test_a_sandbox_that_is_not_a_sandbox_is_refused_as_in_strands() -> None:
    with pytest.raises(TypeError, match=r"sandbox must be a Sandbox instance .* got str"):
        Agent(ScriptedModel(), sandbox="docker")
    agent = Agent(ScriptedModel())
    with pytest.raises(TypeError, match="got dict"):
        agent.sandbox = {"image": "python"}


def test_assigning_a_sandbox_moves_its_vended_tools_with_it(tmp_path: Path) -> None:
    from ray_harness.sandbox import LocalEnvironment
    from ray_harness.tools.decorator import tool

    @tool
    def sandbox_file_editor(path: str) -> str:
        """The user's own tool of a vended tool's name."""
        return path

    first, second = LocalEnvironment(working_dir=str(tmp_path)), LocalEnvironment(working_dir=str(tmp_path))
    agent = Agent(ScriptedModel(), sandbox=first, tools=[sandbox_file_editor])
    agent.sandbox = second
    shell = agent.tool_registry.get("sandbox_shell")
    assert shell is not None and getattr(shell, "sandbox", None) is second  # the old one's shell is gone
    assert agent.tool_registry.get("sandbox_file_editor") is not None
    assert getattr(agent.tool_registry.get("sandbox_file_editor"), "sandbox", None) is None  # the user's stays
    agent.sandbox = None
    assert agent.tool_registry.get("sandbox_shell") is None
