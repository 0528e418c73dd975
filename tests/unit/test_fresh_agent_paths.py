"""The shortcuts a fresh agent and graph take (built per evaluation row) keep what the full paths guarantee."""

from __future__ import annotations

import pytest

from ray_harness import Agent
from ray_harness.agent import AgentState
from ray_harness.hooks.events import AgentInitializedEvent
from ray_harness.hooks.registry import HookRegistry
from ray_harness.interrupts import InterruptState
from ray_harness.multiagent._scheduling import has_cycle
from ray_harness.testing import ScriptedModel, text
from ray_harness.types.content import Message


def test_fresh_agents_have_their_own_empty_history() -> None:
    first, second = Agent(ScriptedModel(text("a"))), Agent(ScriptedModel(text("b")), messages=[])
    first.messages.append({"role": "user", "content": [{"text": "hi"}]})
    assert second.messages == []
    given: list[Message] = [{"role": "user", "content": [{"text": "hello"}]}]
    third = Agent(ScriptedModel(text("c")), messages=given)
    assert third.messages == given and third.messages is not given  # a non-empty history is still copied


def test_empty_states_export_new_dicts() -> None:
    state, interrupts = AgentState(), InterruptState()
    exported = state.to_dict()
    exported["x"] = 1
    assert state.get("x") is None and state.to_dict() == {}
    context = interrupts.to_dict()["context"]
    context["y"] = 2
    assert interrupts.context == {}


def test_agent_initialized_callbacks_still_run() -> None:
    seen: list[str] = []

    class Provider:
        def register_hooks(self, registry: HookRegistry, **kwargs: object) -> None:
            registry.add_callback(AgentInitializedEvent, lambda event: seen.append(event.agent.name))

    Agent(ScriptedModel(text("a")), name="watched", hooks=[Provider()])
    assert seen == ["watched"]


@pytest.mark.parametrize(("edges", "cyclic"), [
    ([("a", "b"), ("b", "c")], False),
    ([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], False),
    ([("a", "b"), ("b", "c"), ("c", "a")], True),
    ([("a", "a")], True),
    ([("a", "b"), ("b", "c"), ("c", "b"), ("a", "d")], True),
    ([("c", "b"), ("b", "a")], False),  # against the nodes' order, without a cycle
    ([("a", "b"), ("d", "c"), ("c", "d")], True),
])
def test_has_cycle(edges: list[tuple[str, str]], cyclic: bool) -> None:
    assert has_cycle(["a", "b", "c", "d"], edges) is cyclic
