"""Per-run timings of model and tool calls, for every agent a process builds (a ray_harness extension).

``install`` is the entry point ``timing`` in the group ``ray_harness.extensions``. Each run gets its own
:class:`Timings` in the task store (middleware instances are shared by concurrent runs, so nothing per
run lives on ``self``); at the end of the run ``after_agent`` returns it as ``agent.state["timing"]``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ray_harness.extensions import (
    AgentBuildContext,
    AgentMiddleware,
    ExtensionData,
    MiddlewarePlacement,
    Placement,
    task_store,
)

__all__ = ("Timings", "install")

logger = logging.getLogger("ray_harness_timing")


@dataclass
class Timings:
    model_calls: int = 0
    model_seconds: float = 0.0
    provider_requests: int = 0
    provider_seconds: float = 0.0
    tool_calls: int = 0
    tool_seconds: float = 0.0
    tools: dict[str, float] = field(default_factory=dict)


def _timings() -> Timings | None:
    store = task_store()
    return None if store is None else store.get_or_init(Timings, Timings)


class ModelTimer(AgentMiddleware):
    """At MODEL_LOGICAL: one decision, retries included; at MODEL_PHYSICAL: one provider request."""

    def __init__(self, physical: bool) -> None:
        self.physical = physical

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            timings = _timings()
            if timings is not None:
                elapsed = time.perf_counter() - started
                if self.physical:
                    timings.provider_requests += 1
                    timings.provider_seconds += elapsed
                else:
                    timings.model_calls += 1
                    timings.model_seconds += elapsed


class ToolTimer(AgentMiddleware):
    """At TOOL_VISIBLE: the whole tool call as the model experiences it (hooks and retries included)."""

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            timings = _timings()
            if timings is not None:
                elapsed = time.perf_counter() - started
                timings.tool_calls += 1
                timings.tool_seconds += elapsed
                name = request.tool_use["name"]
                timings.tools[name] = timings.tools.get(name, 0.0) + elapsed


class Report(AgentMiddleware):
    """At STANDARD: the run's totals into ``agent.state["timing"]`` and the log."""

    def after_agent(self, ctx: Any) -> dict[str, Any] | None:
        timings = _timings()
        if timings is None:
            return None
        logger.info("agent=<%s>, model_calls=<%d>, model_s=<%.3f>, provider_requests=<%d>, tool_calls=<%d>, "
                    "tool_s=<%.3f> | run timings", ctx.agent.name, timings.model_calls, timings.model_seconds,
                    timings.provider_requests, timings.tool_calls, timings.tool_seconds)
        return {"timing": asdict(timings)}


class TimingContributor:
    def __init__(self) -> None:  # built once in install(): contribute_middlewares runs for every chain
        self._placements = (
            MiddlewarePlacement(ModelTimer(physical=False), Placement.MODEL_LOGICAL),
            MiddlewarePlacement(ModelTimer(physical=True), Placement.MODEL_PHYSICAL),
            MiddlewarePlacement(ToolTimer(), Placement.TOOL_VISIBLE),
            MiddlewarePlacement(Report(), Placement.STANDARD),
        )

    def contribute_middlewares(self, app_store: ExtensionData, ctx: AgentBuildContext
                               ) -> tuple[MiddlewarePlacement, ...]:
        return self._placements


def install(registry: Any, config: Any) -> None:
    registry.middlewares(TimingContributor())
