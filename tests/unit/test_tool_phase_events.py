"""The tool half of a cycle builds its hook events only for registered callbacks (as the model call does)."""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.hooks import AfterToolCallEvent, AfterToolsEvent, BeforeToolCallEvent, BeforeToolsEvent
from ray_harness.testing import ScriptedModel, text, tool_call


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _count_events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []
    for event_type in (BeforeToolsEvent, AfterToolsEvent, BeforeToolCallEvent, AfterToolCallEvent):
        original = event_type.__init__

        def counted(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> None:
            built.append(type(self).__name__)
            __original(self, *args, **kwargs)

        monkeypatch.setattr(event_type, "__init__", counted)
    return built


def test_no_tool_event_is_built_for_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    built = _count_events(monkeypatch)
    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}, tool_use_id="t1"), text("3")), tools=[add])
    assert str(agent("go")).strip() == "3"
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "3"}]
    assert built == []


def test_a_registered_callback_gets_its_event_and_only_that(monkeypatch: pytest.MonkeyPatch) -> None:
    built = _count_events(monkeypatch)
    seen: list[Any] = []

    def rewrite(event: AfterToolCallEvent) -> None:
        seen.append((event.tool_use["name"], event.result["content"]))
        event.result = {**event.result, "content": [{"text": "rewritten"}]}

    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}, tool_use_id="t1"), text("ok")), tools=[add])
    agent.add_hook(rewrite, AfterToolCallEvent)
    agent("go")
    assert built == ["AfterToolCallEvent"]
    assert seen == [("add", [{"text": "3"}])]
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "rewritten"}]


@tool
def explode() -> str:
    """Fail."""
    raise ValueError("boom")


def test_a_raising_tool_unwrapped_gives_the_error_result_and_its_exception() -> None:
    # With no middleware and no extension around the tool, the loop reads the tool's own stream: a raising tool
    # must still end as the error result, with its exception for the hooks.
    seen: list[Any] = []
    agent = Agent(ScriptedModel(tool_call("explode", {}, tool_use_id="t1"), text("ok")), tools=[explode])
    agent.add_hook(lambda event: seen.append((type(event.exception), event.result)), AfterToolCallEvent)
    agent("go")
    ((kind, result),) = seen
    assert kind is ValueError
    assert result == {"toolUseId": "t1", "status": "error", "content": [{"text": "Error: boom"}]}
    assert agent.messages[2]["content"][0]["toolResult"] == result
    assert agent.event_loop_metrics.tool_metrics["explode"].error_count == 1
