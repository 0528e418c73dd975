from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.handlers import CompositeCallbackHandler, PrintingCallbackHandler, null_callback_handler
from ray_harness.testing import ScriptedModel, reasoning, text, tool_call


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_the_printing_handler_prints_the_answer_and_each_tool_as_strands(capsys: pytest.CaptureFixture[str]) -> None:
    handler = PrintingCallbackHandler()
    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}), reasoning("sum it", "It is 3.")), tools=[add],
                  callback_handler=handler)
    agent("1 + 2?")
    out = capsys.readouterr().out
    assert out == "\nTool #1: add\nsum itIt is 3.\n"
    assert handler.tool_count == 1


def test_composite_and_null_handlers() -> None:
    heard: list[Any] = []
    quiet = PrintingCallbackHandler(verbose_tool_use=False)
    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}), text("3")), tools=[add],
                  callback_handler=CompositeCallbackHandler(lambda **event: heard.append(event.get("type")), quiet,
                                                            null_callback_handler))
    agent("1 + 2?")
    assert "text_delta" in heard and heard[-1] == "result"
    assert quiet.tool_count == 1
