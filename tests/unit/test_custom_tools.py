"""Tools written as for Strands: ``PythonAgentTool`` (module tools) and ``AgentTool`` subclasses."""

from __future__ import annotations

import asyncio
import pickle
import types
from collections.abc import AsyncGenerator
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent, ToolContext
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools import AgentTool, PythonAgentTool
from ray_harness.types.content import ToolResult, ToolUse
from ray_harness.types.tools import ToolSpec


def _weather_module() -> types.ModuleType:
    """A Strands module tool: ``TOOL_SPEC`` and a function of the same name taking the tool use."""
    module = types.ModuleType("weather_tool")
    module.TOOL_SPEC = {"name": "weather", "description": "The weather in a city.",
                        "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}},
                                                 "required": ["city"]}}}

    def weather(tool_use: ToolUse, **kwargs: Any) -> ToolResult:
        city = tool_use["input"]["city"]
        return {"toolUseId": tool_use["toolUseId"], "status": "success",
                "content": [{"text": f"{city}: sunny (asked by {kwargs['agent'].name}, {kwargs.get('user')})"}]}

    module.weather = weather
    return module


def test_a_module_tool_runs_as_a_python_agent_tool() -> None:
    module = _weather_module()
    weather = PythonAgentTool(module.TOOL_SPEC["name"], module.TOOL_SPEC, module.weather)
    model = ScriptedModel([tool_call("weather", {"city": "Paris"}), text("done")])
    agent = Agent(model, tools=[weather], name="forecaster")
    agent("weather?", invocation_state={"user": "ann"})
    assert model.calls[0].tool_specs[0]["description"] == "The weather in a city."
    result = agent.messages[2]["content"][0]["toolResult"]
    assert result["status"] == "success"
    assert result["content"] == [{"text": "Paris: sunny (asked by forecaster, ann)"}]
    assert agent.tool.weather(city="Rome")["content"] == [{"text": "Rome: sunny (asked by forecaster, None)"}]
    assert pickle.loads(cloudpickle.dumps(weather)).tool_spec == module.TOOL_SPEC


def test_an_async_python_agent_tool_and_its_plain_return_value() -> None:
    async def count(tool_use: ToolUse, **_: Any) -> dict[str, int]:
        await asyncio.sleep(0)
        return {"n": len(tool_use["input"]["items"])}

    spec: Any = {"name": "count", "description": "Count.", "inputSchema": {"json": {"type": "object"}}}
    agent = Agent(ScriptedModel([]), tools=[PythonAgentTool("count", spec, count)])
    assert agent.tool.count(items=[1, 2, 3])["content"] == [{"json": {"n": 3}}]


@pytest.mark.parametrize(("name", "spec", "func", "message"), [
    ("bad name", {"name": "bad name", "description": "", "inputSchema": {}}, print, "tool name 'bad name' must match"),
    ("echo", {"name": "other", "description": "", "inputSchema": {}}, print, "cannot change tool name"),
    ("echo", {"name": "echo", "inputSchema": {}}, print, "must contain 'description'"),
    ("echo", {"name": "echo", "description": "", "inputSchema": {}}, "print", "tool_func must be callable"),
])
def test_a_python_agent_tool_checks_its_parts(name: str, spec: Any, func: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PythonAgentTool(name, spec, func)


_SPEC: ToolSpec = {"name": "echo", "description": "Echo.",
                   "inputSchema": {"json": {"type": "object", "properties": {"x": {"type": "string"}}}}}


class StrandsEcho(AgentTool):
    """A custom tool as written for Strands: ``stream(tool_use, invocation_state, **kwargs)``, plain yields."""

    closed = False

    @property
    def tool_name(self) -> str:
        return "echo"

    @property
    def tool_spec(self) -> ToolSpec:
        return _SPEC

    async def stream(self, tool_use: ToolUse, invocation_state: dict[str, Any],  # type: ignore[override]
                     **kwargs: Any) -> AsyncGenerator[Any, None]:
        try:
            yield {"progress": 0.5}
            yield {"toolUseId": tool_use["toolUseId"], "status": "success",
                   "content": [{"text": f"{tool_use['input']['x']} from {invocation_state['agent'].name} "
                                        f"for {invocation_state.get('user')}"}]}
        finally:
            type(self).closed = True


def test_a_strands_custom_tool_gets_the_invocation_state_and_its_last_yield_is_the_result() -> None:
    agent = Agent(ScriptedModel([tool_call("echo", {"x": "hi"}), text("ok")]), tools=[StrandsEcho()], name="bot")
    agent("go", invocation_state={"user": "ann"})
    result = agent.messages[2]["content"][0]["toolResult"]
    assert result["status"] == "success"
    assert result["content"] == [{"text": "hi from bot for ann"}]
    assert StrandsEcho.closed


async def test_every_plain_yield_is_a_stream_event() -> None:
    agent = Agent(ScriptedModel([tool_call("echo", {"x": "hi"}), text("ok")]), tools=[StrandsEcho()])
    data = [event["tool_stream_event"]["data"] async for event in agent.stream_async("go")
            if "tool_stream_event" in event]
    assert data[0] == {"progress": 0.5}
    assert data[-1]["content"] == [{"text": "hi from agent for None"}]


def test_a_custom_tool_taking_the_context_may_yield_a_plain_result() -> None:
    class Native(AgentTool):
        tool_name = "echo"
        tool_spec = _SPEC

        async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
            yield f"{tool_use['input']['x']} via {context.agent.name}"

    agent = Agent(ScriptedModel([]), tools=[Native()])
    assert agent.tool.echo(x="hi")["content"] == [{"text": "hi via agent"}]


def test_a_custom_tool_that_yields_nothing_gets_an_error_result() -> None:
    class Silent(AgentTool):
        tool_name = "echo"
        tool_spec = _SPEC

        async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
            if False:
                yield None

    result = Agent(ScriptedModel([]), tools=[Silent()]).tool.echo(x="hi")
    assert result["status"] == "error"
    assert result["content"] == [{"text": "Tool 'echo' did not return a result"}]


class _BareSchemaEcho(StrandsEcho):
    """A Strands custom tool whose spec holds a bare JSON schema (Strands wraps it in ``{"json": ...}``)."""

    @property
    def tool_spec(self) -> ToolSpec:
        return {"name": "echo", "description": "Echo x.",  # type: ignore[typeddict-item]
                "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}


def test_a_recorded_direct_call_of_a_tool_with_a_bare_schema_keeps_its_known_input() -> None:
    agent = Agent(ScriptedModel([]), tools=[_BareSchemaEcho()], name="bot")

    agent.tool.echo(x="hi", extra="dropped")

    assert agent.messages[1]["content"][0]["toolUse"]["input"] == {"x": "hi"}
