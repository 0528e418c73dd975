"""``AgentResult`` and the metrics an invocation accumulates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray_harness.checkpoint import Checkpoint
    from ray_harness.interrupts import Interrupt
    from ray_harness.types.content import Message

__all__ = ("AgentResult", "EventLoopMetrics", "ToolMetrics")


def _zero_usage() -> dict[str, int]:
    return {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}


@dataclass
class ToolMetrics:
    """Call counts and total seconds of one tool, as :meth:`EventLoopMetrics.get_summary` reports them."""

    call_count: int = 0
    success_count: int = 0
    error_count: int = 0
    total_time: float = 0.0


@dataclass
class EventLoopMetrics:
    """Usage, cost and timing of an agent (cumulative) and of its latest invocation."""

    cycle_count: int = 0
    model_calls: int = 0
    accumulated_usage: dict[str, int] = field(default_factory=_zero_usage)
    accumulated_metrics: dict[str, int] = field(default_factory=lambda: {"latencyMs": 0})
    accumulated_cost_usd: float = 0.0
    tool_metrics: dict[str, ToolMetrics] = field(default_factory=dict)
    invocation_usage: dict[str, int] = field(default_factory=_zero_usage)
    invocation_cycles: int = 0
    invocation_cost_usd: float = 0.0

    def start_invocation(self) -> None:
        """Reset the per-invocation counters (usage, cycles, cost); the cumulative ones keep counting."""
        self.invocation_usage = _zero_usage()
        self.invocation_cycles = 0
        self.invocation_cost_usd = 0.0

    def add_usage(self, usage: dict[str, int], latency_ms: int, cost_usd: float) -> None:
        """Add one model call: its token ``usage``, latency and cost, to the cumulative and invocation totals."""
        self.model_calls += 1
        for target in (self.accumulated_usage, self.invocation_usage):
            for key, value in usage.items():
                if isinstance(value, int):
                    target[key] = target.get(key, 0) + value
        self.accumulated_metrics["latencyMs"] = self.accumulated_metrics.get("latencyMs", 0) + latency_ms
        self.accumulated_cost_usd += cost_usd
        self.invocation_cost_usd += cost_usd

    def add_cycle(self) -> None:
        """Count one event-loop cycle (a model call and the tools it asked for)."""
        self.cycle_count += 1
        self.invocation_cycles += 1

    def add_tool(self, name: str, success: bool, seconds: float) -> None:
        """Count one call of tool ``name``, successful or not, that took ``seconds``."""
        entry = self.tool_metrics.setdefault(name, ToolMetrics())
        entry.call_count += 1
        entry.total_time += seconds
        if success:
            entry.success_count += 1
        else:
            entry.error_count += 1

    def get_summary(self) -> dict[str, Any]:
        """The metrics as a JSON dict: cycles, model calls, usage, latency, cost and per-tool counts."""
        return {
            "total_cycles": self.cycle_count,
            "model_calls": self.model_calls,
            "accumulated_usage": dict(self.accumulated_usage),
            "accumulated_metrics": dict(self.accumulated_metrics),
            "accumulated_cost_usd": self.accumulated_cost_usd,
            "tool_usage": {
                name: {
                    "call_count": m.call_count,
                    "success_count": m.success_count,
                    "error_count": m.error_count,
                    "total_time": m.total_time,
                    "average_time": m.total_time / m.call_count if m.call_count else 0.0,
                    "success_rate": m.success_count / m.call_count if m.call_count else 0.0,
                }
                for name, m in self.tool_metrics.items()
            },
        }


@dataclass
class AgentResult:
    """The outcome of one invocation."""

    stop_reason: str
    message: Message
    metrics: EventLoopMetrics = field(default_factory=EventLoopMetrics)
    state: Any = None
    interrupts: list[Interrupt] = field(default_factory=list)
    structured_output: Any = None
    checkpoint: Checkpoint | None = None

    def __str__(self) -> str:
        return "".join(block["text"] + "\n" for block in self.message.get("content", []) if "text" in block)

    @property
    def text(self) -> str:
        """The final message's text, without the trailing newline ``str(result)`` has."""
        return str(self).rstrip("\n")

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON: stop reason, message, usage, cost, interrupts, structured output, checkpoint."""
        return {
            "stop_reason": self.stop_reason,
            "message": self.message,
            "usage": dict(self.metrics.accumulated_usage),
            "cost_usd": self.metrics.accumulated_cost_usd,
            "interrupts": [i.to_dict() for i in self.interrupts],
            "structured_output": self.structured_output.model_dump(mode="json")
            if hasattr(self.structured_output, "model_dump") else self.structured_output,
            "checkpoint": self.checkpoint.to_dict() if self.checkpoint else None,
        }
