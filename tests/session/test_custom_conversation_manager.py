"""A conversation manager written for Strands (a subclass of the base class) runs unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.agent.conversation_manager import ConversationManager
from ray_harness.hooks import BeforeModelCallEvent, HookRegistry
from ray_harness.testing import ScriptedModel


class KeepLast(ConversationManager):
    """Strands' documented pattern: hooks registered through ``super().register_hooks`` plus its own."""

    def __init__(self, keep: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.keep = keep
        self.log: list[tuple[str, int]] = []

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        super().register_hooks(registry, **kwargs)
        registry.add_callback(BeforeModelCallEvent, self._before_model)

    def _before_model(self, event: BeforeModelCallEvent) -> None:
        self.log.append(("before_model", len(event.agent.messages)))

    def apply_management(self, agent: Any, **kwargs: Any) -> None:
        self.log.append(("apply", len(agent.messages)))
        if len(agent.messages) > self.keep:
            self.removed_message_count += len(agent.messages) - self.keep
            del agent.messages[:-self.keep]

    def reduce_context(self, agent: Any, e: Exception | None = None, **kwargs: Any) -> None:
        self.log.append(("reduce", len(agent.messages)))
        if len(agent.messages) <= 1:
            raise e or RuntimeError("nothing left to remove")
        del agent.messages[0]
        self.removed_message_count += 1


def test_subclass_registering_hooks_through_super_runs_them() -> None:
    manager = KeepLast(2)
    agent = Agent(model=ScriptedModel(["one", "two"]), conversation_manager=manager)
    agent("x")
    agent("y")
    assert manager.log == [("before_model", 1), ("apply", 2), ("before_model", 3), ("apply", 4)]
    assert [m["content"][0]["text"] for m in agent.messages] == ["y", "two"]
    assert manager.get_state() == {"__name__": "KeepLast", "removed_message_count": 2}


def test_subclass_with_proactive_compression_reduces_before_the_model_call() -> None:
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": "word " * 200}]} for i in range(6)]
    manager = KeepLast(100, proactive_compression={"compression_threshold": 0.5})
    model = ScriptedModel(["done"], context_window=400)  # six 200-word messages are far above half of it
    agent = Agent(model=model, messages=history, conversation_manager=manager)
    agent("next")
    # As in Strands, where compression is the manager's first BeforeModelCallEvent callback: hooks run after it.
    assert [entry[0] for entry in manager.log] == ["reduce", "before_model", "apply"]
    assert len(model.calls[0].messages) == 6  # the model saw the reduced history


def test_proactive_compression_is_best_effort() -> None:
    class Stuck(KeepLast):
        def reduce_context(self, agent: Any, e: Exception | None = None, **kwargs: Any) -> None:
            self.log.append(("reduce", len(agent.messages)))
            raise RuntimeError("cannot reduce")

    manager = Stuck(100, proactive_compression=True)
    agent = Agent(model=ScriptedModel(["done"], context_window=10), conversation_manager=manager)
    assert str(agent("a prompt long enough to pass seventy percent of ten tokens")) == "done\n"
    assert [entry[0] for entry in manager.log] == ["reduce", "before_model", "apply"]


def test_without_proactive_compression_nothing_is_reduced_before_the_call() -> None:
    manager = KeepLast(100)
    agent = Agent(model=ScriptedModel(["done"], context_window=10), conversation_manager=manager)
    agent("a prompt long enough to pass seventy percent of ten tokens")
    assert [entry[0] for entry in manager.log] == ["before_model", "apply"]


@pytest.mark.parametrize("value", [{"compression_threshold": 0}, {"compression_threshold": 1.5}])
def test_bad_threshold_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(ValueError, match="compression_threshold"):
        KeepLast(2, proactive_compression=value)
