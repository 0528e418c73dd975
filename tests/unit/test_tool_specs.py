"""Tool specs as Strands users write them: given schemas, replaced specs, names."""

from __future__ import annotations

import re
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent, ToolContext, tool
from ray_harness.testing import ScriptedModel, text
from ray_harness.tools import PythonAgentTool, ToolRegistry


def test_a_given_schema_reaches_the_model_normalised_as_in_strands() -> None:
    @tool(inputSchema={"properties": {"city": {}, "days": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                                      "where": {"type": "object", "properties": {"lat": {"type": "number"}}}}})
    def forecast(city: str, days: int | None = None, where: dict[str, Any] | None = None) -> str:
        """Forecast."""
        return city

    model = ScriptedModel([text("ok")])
    Agent(model, tools=[forecast])("hi")
    (schema,) = [spec["inputSchema"]["json"] for spec in model.calls[0].tool_specs]
    assert schema["type"] == "object"
    assert schema["required"] == []
    assert schema["properties"]["city"] == {"type": "string", "description": "Property city"}
    assert schema["properties"]["days"] == {"anyOf": [{"type": "integer"}, {"type": "null"}],
                                            "description": "Property days"}  # a composition keeps its types
    assert schema["properties"]["where"]["properties"]["lat"] == {"type": "number", "description": "Property lat"}
    assert forecast.tool_spec["inputSchema"]["json"]["properties"]["city"] == {}  # the tool's own spec is as given


def test_a_hand_written_tool_with_a_bare_schema_is_sent_in_the_converse_form() -> None:
    spec: Any = {"name": "echo", "description": "Echo.", "inputSchema": {"properties": {"x": {"type": "string"}}}}
    echo = PythonAgentTool("echo", spec, lambda tool_use, **_: tool_use["input"]["x"])
    registry = ToolRegistry()
    registry.register(echo)
    assert registry.get_all_specs()[0]["inputSchema"] == {
        "json": {"type": "object", "required": [], "properties": {"x": {"type": "string", "description": "Property x"}}}}
    assert echo.tool_spec["inputSchema"] == {"json": spec["inputSchema"]}
    agent = Agent(ScriptedModel([]), tools=[echo])
    assert agent.tool.echo(x="hi")["content"] == [{"text": "hi"}]  # recorded in the history, too
    assert agent.messages[1]["content"][0]["toolUse"]["input"] == {"x": "hi"}


def test_replacing_a_tools_spec_changes_what_the_model_sees() -> None:
    @tool
    def lookup(key: str) -> str:
        """Look up a key."""
        return key

    model = ScriptedModel([text("one"), text("two")])
    agent = Agent(model, tools=[lookup])
    agent("first")
    lookup.tool_spec = {**lookup.tool_spec, "description": "Look up a key in the v2 store."}
    agent("second")
    assert [call.tool_specs[0]["description"] for call in model.calls] == ["Look up a key.",
                                                                           "Look up a key in the v2 store."]
    rebuilt = cloudpickle.loads(cloudpickle.dumps(lookup))  # a tool ships to an actor with its new spec
    assert rebuilt.tool_spec["description"] == "Look up a key in the v2 store."


@pytest.mark.parametrize(("change", "message"), [
    ({"name": "other"}, "cannot change tool name via tool_spec (expected 'lookup', got 'other')"),
    ({"description": None}, "tool_spec must contain 'description'"),
    ({"inputSchema": None}, "tool_spec must contain 'inputSchema'"),
])
def test_a_replaced_spec_keeps_the_name_and_has_a_description_and_schema(change: dict[str, Any],
                                                                         message: str) -> None:
    @tool
    def lookup(key: str) -> str:
        """Look up a key."""
        return key

    spec: Any = {**lookup.tool_spec, **change}
    spec = {key: value for key, value in spec.items() if value is not None}
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        lookup.tool_spec = spec
    assert lookup.tool_spec["description"] == "Look up a key."


def test_names_that_differ_only_by_dash_and_underscore_are_refused() -> None:
    @tool(name="get-data")
    def first() -> str:
        return "1"

    @tool(name="get_data")
    def second() -> str:
        return "2"

    with pytest.raises(ValueError, match="'get_data' is already registered as 'get-data'"):
        Agent(ScriptedModel([]), tools=[first, second])


@pytest.mark.parametrize("context", ["", "  ", None])
def test_an_empty_context_parameter_name_is_refused(context: Any) -> None:
    def echo(x: str) -> str:
        return x

    with pytest.raises(ValueError, match=re.escape("@tool(context=...) must be True or a parameter name, got")):
        tool(context=context)(echo)


def test_a_context_parameter_name_is_stripped() -> None:
    @tool(context=" ctx ")
    def where(city: str, ctx: ToolContext) -> str:
        """Where."""
        return f"{city} {ctx.tool_use['toolUseId']}"

    assert list(where.tool_spec["inputSchema"]["json"]["properties"]) == ["city"]
    assert Agent(ScriptedModel([]), tools=[where]).tool.where(city="Oslo")["content"][0]["text"].startswith("Oslo ")
