"""A ray_harness extension for the tests: counts logical model calls and visible tool calls per run.

At the end of each run (``after_agent``) it writes ``agent.state["rh_test_plugin"]``: the process id,
the chain's scope, the counts and the names of the wrappers, so a test can tell in which process and
chain the plugin ran, also inside Ray actors.
"""

from __future__ import annotations

import os
from typing import Any

from ray_harness.extensions import AgentMiddleware, AgentScope, MiddlewarePlacement, Placement, task_store

VERSION = 1


class Counts:
    def __init__(self) -> None:
        self.model_calls = 0
        self.tool_calls = 0
        self.tools: list[str] = []


class CallCounter(AgentMiddleware):
    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        result = await handler(request)
        store = task_store()
        if store is not None:
            store.get_or_init(Counts, Counts).model_calls += 1
        return result

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        result = await handler(request)
        store = task_store()
        if store is not None:
            counts = store.get_or_init(Counts, Counts)
            counts.tool_calls += 1
            counts.tools.append(request.tool_use["name"])
        return result


class Reporter(AgentMiddleware):
    def __init__(self, scope: str) -> None:
        self.scope = scope

    def after_agent(self, ctx: Any) -> dict[str, Any]:
        store = task_store()
        counts = store.get(Counts) if store is not None else None
        return {"rh_test_plugin": {"pid": os.getpid(), "scope": self.scope,
                                   "model_calls": counts.model_calls if counts else 0,
                                   "tool_calls": counts.tool_calls if counts else 0,
                                   "tools": counts.tools if counts else []}}


class Contributor:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> tuple[MiddlewarePlacement, ...]:
        scope = "lead" if ctx.scope == AgentScope.LEAD else "subagent"
        return (MiddlewarePlacement(CallCounter(), Placement.MODEL_LOGICAL),
                MiddlewarePlacement(CallCounter(), Placement.TOOL_VISIBLE),
                MiddlewarePlacement(Reporter(scope), Placement.STANDARD))


def install(registry: Any, config: Any) -> None:
    registry.middlewares(Contributor())


def broken_install(registry: Any, config: Any) -> None:
    raise RuntimeError("this plugin cannot install")
