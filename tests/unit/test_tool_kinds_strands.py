"""What Strands' ``AgentTool`` tells about a tool, for each kind of tool: hot reload, dynamic, display properties.

And how ``ToolRegistry.register_tool`` / ``replace`` use it, as Strands' registry does.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import mcp_types
import pytest

from ray_harness import Agent, tool
from ray_harness.testing import ScriptedModel
from ray_harness.tools import AgentTool, PythonAgentTool, ToolContext, ToolRegistry
from ray_harness.tools.mcp import MCPAgentTool, MCPClient
from ray_harness.types.content import ToolUse
from ray_harness.types.tools import ToolSpec


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


def _spec(name: str) -> ToolSpec:
    return {"name": name, "description": "d", "inputSchema": {"json": {"type": "object", "properties": {}}}}


def _python_tool(name: str = "lookup") -> PythonAgentTool:
    return PythonAgentTool(name, _spec(name), lambda tool_use, **_: "ok")


def _mcp_tool(name: str = "lookup") -> MCPAgentTool:
    client = MCPClient(command=["never-started"])  # connects at the first call only: none is made here
    return MCPAgentTool(mcp_types.Tool(name=name, inputSchema={"type": "object"}), client)


def _agent_tool(name: str = "lookup") -> AgentTool:
    return Agent(ScriptedModel(), name=name).as_tool()


class StrandsStyleTool(AgentTool):
    """A custom tool written for Strands: it calls ``super().__init__()`` and defines ``tool_type``."""

    def __init__(self, name: str = "lookup") -> None:
        super().__init__()
        self._name = name

    @property
    def tool_name(self) -> str:
        return self._name

    @property
    def tool_spec(self) -> ToolSpec:
        return _spec(self._name)

    @property
    def tool_type(self) -> str:
        return "custom"

    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        yield {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": "ok"}]}


KINDS = {
    "decorated": lambda: lookup,
    "python": _python_tool,
    "mcp": _mcp_tool,
    "agent": _agent_tool,
    "custom": StrandsStyleTool,
}


@pytest.mark.parametrize(("kind", "expected"), [("decorated", True), ("python", True), ("mcp", False),
                                                ("agent", False), ("custom", False)])
def test_only_function_and_python_tools_support_hot_reload_as_in_strands(kind: str, expected: bool) -> None:
    assert KINDS[kind]().supports_hot_reload is expected


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_tool_is_static_until_marked_dynamic(kind: str) -> None:
    made = KINDS[kind]()
    agent_tool = made if kind != "decorated" else tool(name="lookup")(lambda key: key)  # not the shared module tool
    assert agent_tool.is_dynamic is False
    agent_tool.mark_dynamic()
    assert agent_tool.is_dynamic is True


@pytest.mark.parametrize(("kind", "expected"), [
    ("decorated", {"Name": "lookup", "Type": "function", "Function": "lookup"}),
    ("python", {"Name": "lookup", "Type": "python"}),
    ("mcp", {"Name": "lookup", "Type": "mcp"}),  # Strands: "python" (see docs/coming-from-strands.md)
    ("custom", {"Name": "lookup", "Type": "custom"}),
    ("agent", {"Name": "lookup", "Type": "agent", "Agent": "lookup"}),
])
def test_display_properties_per_tool_kind(kind: str, expected: dict[str, str]) -> None:
    assert KINDS[kind]().get_display_properties() == expected


def test_an_agent_as_tool_shows_its_agents_name_under_its_own_tool_name() -> None:
    ask = Agent(ScriptedModel(), name="helper").as_tool(name="ask_helper")
    assert ask.get_display_properties() == {"Name": "ask_helper", "Type": "agent", "Agent": "helper"}


def test_a_decorated_tool_shows_its_functions_name_under_its_own_tool_name() -> None:
    @tool(name="find")
    def find_in_index(key: str) -> str:
        return key

    assert find_in_index.get_display_properties() == {"Name": "find", "Type": "function", "Function": "find_in_index"}


def test_register_tool_replaces_a_hot_reloadable_tool_of_the_same_name() -> None:
    registry = ToolRegistry()
    registry.register_tool(lookup)
    newer = tool(name="lookup")(lambda key: key.upper())
    registry.register_tool(newer)
    assert registry.get("lookup") is newer
    python_tool = _python_tool()
    registry.register_tool(python_tool)
    assert registry.get("lookup") is python_tool
    assert registry.names == ["lookup"]


@pytest.mark.parametrize("kind", ["mcp", "agent", "custom"])
def test_register_tool_refuses_a_tool_without_hot_reload_under_a_taken_name(kind: str) -> None:
    registry = ToolRegistry()
    registry.register_tool(lookup)
    with pytest.raises(ValueError, match="'lookup' is already registered; only a tool whose supports_hot_reload"):
        registry.register_tool(KINDS[kind]())
    assert registry.get("lookup") is lookup


def test_register_tool_takes_tools_only_and_keeps_the_dash_underscore_rule() -> None:
    registry = ToolRegistry()
    with pytest.raises(TypeError, match="register_tool takes an AgentTool, got function"):
        registry.register_tool(lambda: None)  # type: ignore[arg-type]
    registry.register_tool(tool(name="get-data")(lambda: 1))
    with pytest.raises(ValueError, match="'get_data' is already registered as 'get-data'"):
        registry.register_tool(tool(name="get_data")(lambda: 1))


def test_replace_swaps_a_registered_tool_of_any_kind_and_refuses_an_unknown_name() -> None:
    registry = ToolRegistry()
    registry.register(lookup)
    registry.register(tool(name="other")(lambda: 1))
    custom = StrandsStyleTool()
    registry.replace(custom)
    assert registry.get("lookup") is custom
    assert registry.names == ["lookup", "other"]  # in the replaced tool's place
    with pytest.raises(ValueError, match="cannot replace tool 'missing': no tool of that name is registered"):
        registry.replace(StrandsStyleTool("missing"))


def test_dynamic_tools_lists_the_tools_marked_dynamic() -> None:
    registry = ToolRegistry()
    static, dynamic = StrandsStyleTool("static"), StrandsStyleTool("dynamic")
    dynamic.mark_dynamic()
    registry.process_tools([static, dynamic])
    assert registry.dynamic_tools == {"dynamic": dynamic}


def test_the_same_tool_listed_twice_is_registered_once() -> None:
    agent = Agent(ScriptedModel(), tools=[lookup, lookup])
    assert agent.tool_names == ["lookup"]
