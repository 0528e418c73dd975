"""TOOL_RAW extensions see an MCP server's own call result, before it becomes a ToolResult."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.extensions import AgentMiddleware, MiddlewarePlacement, Placement, loading, use
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools.mcp import MCPClient


@pytest.fixture(autouse=True)
def clean_extensions() -> Iterator[None]:
    loading.reset()
    yield
    loading.reset()


def test_raw_sees_the_call_result_visible_sees_the_tool_result(shared_stdio: MCPClient) -> None:
    seen: dict[str, Any] = {}

    class Observer(AgentMiddleware):
        def __init__(self, key: str) -> None:
            self.key = key

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            seen[self.key] = await handler(request)
            return seen[self.key]

    placements = (MiddlewarePlacement(Observer("raw"), Placement.TOOL_RAW),
                  MiddlewarePlacement(Observer("visible"), Placement.TOOL_VISIBLE))
    use(lambda registry, config: registry.middlewares(
        type("Contributor", (), {"contribute_middlewares": lambda self, store, ctx: placements})()))
    Agent(ScriptedModel(tool_call("srv_add", {"a": 2, "b": 3}), text("5")), tools=[shared_stdio])("2+3?")
    assert type(seen["raw"]).__name__ == "CallToolResult" and seen["raw"].structured_content == {"total": 5}
    assert seen["visible"]["content"] == [{"text": '{\n  "total": 5\n}'}, {"json": {"total": 5}}]
