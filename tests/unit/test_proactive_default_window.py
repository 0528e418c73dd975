"""Proactive compression on a model whose context window is unknown: Strands' default window, 200,000 tokens."""

from __future__ import annotations

import warnings
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.agent.conversation_manager import SlidingWindowConversationManager, SummarizingConversationManager
from ray_harness.models import Model
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.streaming import StreamEvent

UNKNOWN = r"context_window_limit is not set on .*200000 tokens"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _conversation() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in range(2):
        messages += [{"role": "user", "content": [{"text": f"q{turn}"}]},
                     {"role": "assistant", "content": [{"text": f"a{turn}"}]}]
    return messages


def _reporting(input_tokens: int, *, context_window: int | None = None) -> ScriptedModel:
    """A model whose first call reports ``input_tokens`` and asks for a tool, so a second call follows."""
    usage = {"inputTokens": input_tokens, "outputTokens": 5, "totalTokens": input_tokens + 5}
    return ScriptedModel(tool_call("lookup", {"key": "a"}, usage=usage), text("done"), text("summary"),
                         context_window=context_window)


def test_the_sliding_window_compresses_past_the_default_windows_threshold() -> None:
    model = _reporting(150_000)  # >= 0.7 * 200,000
    manager = SlidingWindowConversationManager(proactive_compression=True)
    agent = Agent(model, tools=[lookup], messages=_conversation(), conversation_manager=manager)

    with pytest.warns(UserWarning, match=UNKNOWN):
        agent("go")

    assert manager.removed_message_count > 0
    assert len(model.calls[1].messages) < len(model.calls[0].messages) + 2


def test_below_the_default_windows_threshold_nothing_is_removed() -> None:
    model = _reporting(130_000)  # < 0.7 * 200,000
    manager = SlidingWindowConversationManager(proactive_compression=True)
    agent = Agent(model, tools=[lookup], messages=_conversation(), conversation_manager=manager)

    with pytest.warns(UserWarning, match=UNKNOWN):
        agent("go")

    assert manager.removed_message_count == 0


def test_the_summarizing_manager_summarizes_past_it() -> None:
    model = _reporting(150_000)
    manager = SummarizingConversationManager(proactive_compression=True, preserve_recent_messages=2)
    agent = Agent(model, tools=[lookup], messages=_conversation(), conversation_manager=manager)

    with pytest.warns(UserWarning, match=UNKNOWN):
        agent("go")

    assert manager.removed_message_count > 0


def test_without_proactive_compression_an_unknown_window_is_not_warned_about() -> None:
    agent = Agent(_reporting(150_000), tools=[lookup], messages=_conversation())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent("go")


class StrandsStyle(Model):
    """A custom model ported from Strands: its window is the ``context_window_limit`` of its config."""

    def __init__(self, inner: ScriptedModel, limit: int) -> None:
        self.inner, self.limit = inner, limit

    def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, *,
               tool_choice: Any = None, **kwargs: Any) -> AsyncGenerator[StreamEvent, None]:
        return self.inner.stream(messages, tool_specs, system_prompt, tool_choice=tool_choice)

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> dict[str, Any]:
        return {"model_id": "ported", "context_window_limit": self.limit}


def test_a_window_in_the_models_config_is_used_as_strands_reads_it() -> None:
    model = StrandsStyle(_reporting(800), 1_000)
    manager = SlidingWindowConversationManager(proactive_compression=True)
    agent = Agent(model, tools=[lookup], messages=_conversation(), conversation_manager=manager)

    assert model.context_window_limit == 1_000
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the window is known: no warning
        agent("go")

    assert manager.removed_message_count > 0  # 800 >= 0.7 * 1,000
