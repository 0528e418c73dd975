"""A ray_harness extension for the tests: the extension guarantees, checkable in any process.

At each of the four wrap placements it contributes a ``Probe`` that records what it saw, and, outside it
(lower ``order``), a ``Faulty`` middleware that breaks one row of the fault-isolation table: at
``MODEL_LOGICAL`` it raises before ``handler``, at ``MODEL_PHYSICAL`` it never calls ``handler``, at
``TOOL_VISIBLE`` it raises after ``handler`` returned, at ``TOOL_RAW`` it calls ``handler`` twice; each also
tries to change the request or the result. Lifecycle faults: ``before_agent`` raises and ``after_model``
returns an update that is not JSON. ``after_agent`` writes ``agent.state["rh_probe_plugin"]``: the process
id, the chain's scope, what each probe saw, and the errors the faulty hooks caught.
"""

from __future__ import annotations

import os
from typing import Any

from ray_harness.extensions import AgentMiddleware, AgentScope, MiddlewarePlacement, Placement, task_store

WRAPS = (Placement.MODEL_LOGICAL, Placement.MODEL_PHYSICAL, Placement.TOOL_VISIBLE, Placement.TOOL_RAW)


class Seen:
    def __init__(self) -> None:
        self.entries: list[list[Any]] = []
        self.caught: list[str] = []


def _seen() -> Seen | None:
    store = task_store()
    return None if store is None else store.get_or_init(Seen, Seen)


def _plain(value: Any) -> Any:
    """A JSON-able record of a result: dicts and strings as they are, anything else by its type name."""
    if isinstance(value, dict | str | int | float | bool) or value is None:
        return value
    return type(value).__name__


class Probe(AgentMiddleware):
    def __init__(self, placement: Placement) -> None:
        self.tag = placement.name

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await self._observe(request, handler, "model")

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await self._observe(request, handler, request.tool_use["name"])

    async def _observe(self, request: Any, handler: Any, what: str) -> Any:
        seen = _seen()
        try:
            result = await handler(request)
        except Exception as error:
            if seen is not None:
                seen.entries.append([self.tag, what, "raised", type(error).__name__, str(error)])
            raise
        if seen is not None:
            value = getattr(result, "stop_reason", None) if what == "model" else _plain(result)
            seen.entries.append([self.tag, what, "returned", value])
        return result


class Faulty(AgentMiddleware):
    def __init__(self, placement: Placement) -> None:
        self.placement = placement

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        if self.placement is Placement.MODEL_LOGICAL:
            raise RuntimeError("logical fault before handler")
        return "a result of my own"  # MODEL_PHYSICAL: handler never called

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        changed = request.replace(tool_use={**request.tool_use, "input": {"key": "changed"}})
        await handler(changed)  # downstream still gets the original request
        if self.placement is Placement.TOOL_VISIBLE:
            raise RuntimeError("visible fault after handler")
        try:
            await handler(request)
        except RuntimeError as error:
            seen = _seen()
            if seen is not None:
                seen.caught.append(str(error))
        return {"replaced": True}

    def before_agent(self, ctx: Any) -> dict[str, Any]:
        raise RuntimeError("lifecycle fault")

    def after_model(self, ctx: Any) -> dict[str, Any]:
        return {"rh_probe_poisoned": object()}


class Reporter(AgentMiddleware):
    def __init__(self, scope: str) -> None:
        self.scope = scope

    def after_agent(self, ctx: Any) -> dict[str, Any]:
        seen = _seen() or Seen()
        return {"rh_probe_plugin": {"pid": os.getpid(), "scope": self.scope, "seen": seen.entries,
                                    "caught": seen.caught}}


class Contributor:
    def contribute_middlewares(self, app_store: Any, ctx: Any) -> tuple[MiddlewarePlacement, ...]:
        scope = "lead" if ctx.scope == AgentScope.LEAD else "subagent"
        placements = [MiddlewarePlacement(Faulty(Placement.STANDARD), Placement.STANDARD, order=-1),
                      MiddlewarePlacement(Reporter(scope), Placement.STANDARD)]
        for placement in WRAPS:
            placements += [MiddlewarePlacement(Faulty(placement), placement, order=-1),
                           MiddlewarePlacement(Probe(placement), placement)]
        return tuple(placements)


def install(registry: Any, config: Any) -> None:
    registry.middlewares(Contributor())
