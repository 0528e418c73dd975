"""Snippets from Strands' own docs and docstrings, with the import switched to ray_harness.

Each test is a Strands 1.62 example (offline: a ``ScriptedModel`` instead of a provider) whose behaviour
ray_harness must keep, with the values Strands produces for the same script.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from ray_harness import Agent, tool
from ray_harness.agent.conversation_manager import SlidingWindowConversationManager
from ray_harness.testing import ModelCall, ScriptedModel, Step, tool_call


def test_tool_description_keeps_the_returns_raises_and_example_sections_as_strands() -> None:
    # strands.tools.decorator docstring example: only the Args section leaves the description.
    @tool
    def search(query: str, limit: int = 5) -> str:
        """Search the index.

        Longer text here.

        Args:
            query: The words.
            limit: How many.
                Note: at most 50.

        Returns:
            The hits, one per line.

        Raises:
            ValueError: never.

        Example:
            search("x")
        """
        return query

    spec = search.tool_spec
    assert spec["description"] == ('Search the index.\n\nLonger text here.\n\nReturns:\n    The hits, one per line.'
                                   '\n\nRaises:\n    ValueError: never.\n\nExample:\n    search("x")')
    properties = spec["inputSchema"]["json"]["properties"]
    assert properties["query"]["description"] == "The words."
    assert properties["limit"]["description"] == "How many. Note: at most 50."  # indented: still the argument's


def _looking_agent(per_turn: bool | int) -> tuple[Agent, ScriptedModel, SlidingWindowConversationManager]:
    @tool
    def look(n: int) -> str:
        """Look.

        Args:
            n: What to look at.
        """
        return f"saw {n}"

    model = ScriptedModel(*[tool_call("look", {"n": i}, tool_use_id=f"l{i}") for i in range(5)], "done")
    manager = SlidingWindowConversationManager(window_size=4, per_turn=per_turn)
    return Agent(model=model, tools=[look], conversation_manager=manager), model, manager


@pytest.mark.parametrize(("per_turn", "sent"), [
    (True, [1, 3, 4, 4, 4, 4]),   # trimmed to the window before every model call
    (2, [1, 3, 5, 4, 6, 4]),      # before every second call
    (False, [1, 3, 5, 7, 9, 11]),  # only after the invocation
])
def test_sliding_window_per_turn_trims_before_model_calls_as_strands(per_turn: bool | int, sent: list[int]) -> None:
    # Strands docs, conversation management: SlidingWindowConversationManager(per_turn=True) / (per_turn=3).
    agent, model, manager = _looking_agent(per_turn)
    agent("look 5 times")
    assert [len(call.messages) for call in model.calls] == sent
    assert (len(agent.messages), manager.removed_message_count) == (3, 9)
    state = manager.get_state()
    assert state["model_call_count"] == (0 if per_turn is False else 6)
    restored = SlidingWindowConversationManager(window_size=4, per_turn=per_turn)
    restored.restore_from_session(state)
    assert restored.get_state() == state


@pytest.mark.parametrize("bad", [0, -1, 1.5, "yes"])
def test_sliding_window_per_turn_refuses_other_values(bad: object) -> None:
    with pytest.raises(ValueError, match="per_turn"):
        SlidingWindowConversationManager(per_turn=bad)  # type: ignore[arg-type]


def test_the_forced_structured_output_turn_offers_only_the_output_tool_as_strands() -> None:
    # Strands docs, structured output with tools: a provider that ignores tool_choice must not get the
    # agent's other tools on the forced turn, or it calls them instead of answering.
    class MathResult(BaseModel):
        result: int

    @tool
    def calculator(expression: str) -> str:
        """Calculate.

        Args:
            expression: The expression.
        """
        return "50"

    def ignores_tool_choice(call: ModelCall) -> Step:
        if "calculator" in call.tool_names:
            return tool_call("calculator", {"expression": "42+8"}, tool_use_id=f"again{call.index}")
        return tool_call("MathResult", {"result": 50}, tool_use_id="m")

    model = ScriptedModel("It is 50", ignores_tool_choice)
    result = Agent(model=model, tools=[calculator])("What is 42 + 8", structured_output_model=MathResult)
    assert result.structured_output == MathResult(result=50)
    assert [call.tool_names for call in model.calls] == [("calculator", "MathResult"), ("MathResult",)]
    assert model.calls[1].tool_choice == {"tool": {"name": "MathResult"}}
