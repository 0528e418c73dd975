"""``AgentResult`` and the metrics an invocation accumulates."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ray_harness.agent.trace import (
    CycleNote,
    CycleRecord,
    Trace,
    new_note,
    note_trace,
    received_notes,
    shipped_notes,
)

if TYPE_CHECKING:
    from ray_harness.checkpoint import Checkpoint
    from ray_harness.interrupts import Interrupt
    from ray_harness.types.content import Message

__all__ = ("AgentInvocation", "AgentResult", "EventLoopCycleMetric", "EventLoopMetrics", "ToolMetrics", "Trace")

_CYCLE_IDS = itertools.count(1)
"""Cycle ids unique in the process: a uuid4 per cycle cost more than the rest of the cycle's bookkeeping."""

KEPT_INVOCATIONS = 100
KEPT_CYCLE_DURATIONS = 1_000
"""How many invocations ``EventLoopMetrics.agent_invocations`` keeps, and how many cycles ``cycle_durations``
and ``traces`` keep (the latest): an agent in an actor serves many, and its metrics travel with every result."""


_TRIM_BATCH = 64


# Templates only ever copied: a bound ``dict.copy`` is a factory with no Python frame, and every agent (built per
# dataset row) makes five of these dicts.
_ZERO_USAGE: dict[str, int] = {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
_ZERO_LATENCY: dict[str, int] = {"latencyMs": 0}
_zero_usage: Callable[[], dict[str, int]] = _ZERO_USAGE.copy
_zero_latency: Callable[[], dict[str, int]] = _ZERO_LATENCY.copy


def _add(target: dict[str, int], usage: dict[str, Any]) -> None:
    for key, value in _counts(usage):
        target[key] = target.get(key, 0) + value


def _counts(usage: dict[str, Any]) -> list[tuple[str, int]]:
    """The integer token counts of ``usage`` (a provider may add other fields)."""
    return [(key, value) for key, value in usage.items() if isinstance(value, int) and not isinstance(value, bool)]


def _total_prompt_tokens(usage: dict[str, int]) -> int:
    """The whole prompt a call processed, cached tokens included (Strands' rule).

    Providers either fold cache tokens into ``inputTokens`` or count them apart; ``input + output == total``
    says they are folded in.
    """
    input_tokens, output_tokens = usage.get("inputTokens", 0), usage.get("outputTokens", 0)
    if input_tokens + output_tokens == usage.get("totalTokens", 0):
        return input_tokens
    return input_tokens + usage.get("cacheReadInputTokens", 0) + usage.get("cacheWriteInputTokens", 0)


@dataclass
class ToolMetrics:
    """Call counts and total seconds of one tool, as :meth:`EventLoopMetrics.get_summary` reports them."""

    call_count: int = 0
    success_count: int = 0
    error_count: int = 0
    total_time: float = 0.0
    tool: dict[str, Any] | None = None
    """The latest call's tool use (``toolUseId``, ``name``, ``input``), when the loop reported it."""


@dataclass
class EventLoopCycleMetric:
    """The token usage of one event-loop cycle's model call (as Strands' ``EventLoopCycleMetric``)."""

    event_loop_cycle_id: str
    usage: dict[str, int] = field(default_factory=_zero_usage)


@dataclass
class AgentInvocation:
    """The cycles and token usage of one invocation (as Strands' ``AgentInvocation``)."""

    cycles: list[EventLoopCycleMetric] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=_zero_usage)


@dataclass
class EventLoopMetrics:
    """Usage, cost and timing of an agent (cumulative) and of its latest invocation."""

    cycle_count: int = 0
    model_calls: int = 0
    accumulated_usage: dict[str, int] = field(default_factory=_zero_usage)
    accumulated_metrics: dict[str, int] = field(default_factory=_zero_latency)
    accumulated_cost_usd: float = 0.0
    tool_metrics: dict[str, ToolMetrics] = field(default_factory=dict)
    invocation_usage: dict[str, int] = field(default_factory=_zero_usage)
    invocation_cycles: int = 0
    invocation_cost_usd: float = 0.0
    invocation_metrics: dict[str, int] = field(default_factory=_zero_latency)
    """The latest invocation's model latency (``accumulated_metrics`` counts every invocation)."""
    agent_invocations: list[AgentInvocation] = field(default_factory=list)
    """The latest invocations (up to ``KEPT_INVOCATIONS``), each with its cycles' usage."""
    total_duration: float = 0.0
    """Seconds spent in event-loop cycles (model call and tools) over every invocation."""
    cycle_durations: list[float] = field(default_factory=list)
    """The seconds of each of the latest cycles (up to ``KEPT_CYCLE_DURATIONS``), oldest first."""
    _cycle_notes: list[CycleNote] = field(default_factory=list, init=False, repr=False, compare=False)
    _cycle_usage: dict[str, int] = field(default_factory=_zero_usage, init=False, repr=False, compare=False)
    _invocation_timed_cycles: int = field(default=0, init=False, repr=False, compare=False)
    _invocation_first_note: int = field(default=1, init=False, repr=False, compare=False)
    _traced_cycles: int = field(default=0, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        # A result crossing to another process carries only the latest invocation's cycles: a resident agent
        # of a reused Graph would otherwise ship up to KEPT_INVOCATIONS of them with every node result.
        state = dict(self.__dict__)
        state["agent_invocations"] = self.agent_invocations[-1:]
        state["cycle_durations"] = self.cycle_durations[len(self.cycle_durations) - self._invocation_timed_cycles:]
        notes = self._cycle_notes
        ours = min(self._traced_cycles - self._invocation_first_note + 1, KEPT_CYCLE_DURATIONS, len(notes))
        state["_cycle_notes"] = shipped_notes(notes[len(notes) - ours:])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state["_cycle_notes"] = received_notes(state.get("_cycle_notes", []))
        self.__dict__.update(state)

    def start_invocation(self) -> None:
        """Reset the per-invocation counters (usage, cycles, cost); the cumulative ones keep counting."""
        self.invocation_usage = _zero_usage()
        self.invocation_cycles = 0
        self.invocation_cost_usd = 0.0
        self.invocation_metrics = _zero_latency()
        self._cycle_usage = _zero_usage()
        self._invocation_timed_cycles = 0
        self._invocation_first_note = self._traced_cycles + 1
        # The invocation's entry shares ``invocation_usage``: one dict, counted once.
        invocations = self.agent_invocations
        invocations.append(AgentInvocation(usage=self.invocation_usage))
        if len(invocations) > KEPT_INVOCATIONS:
            del invocations[:-KEPT_INVOCATIONS]

    def add_usage(self, usage: dict[str, int], latency_ms: int, cost_usd: float) -> None:
        """Add one model call: its token ``usage``, latency and cost, to the cumulative and invocation totals."""
        self.model_calls += 1
        accumulated, invocation, cycle = self.accumulated_usage, self.invocation_usage, self._cycle_usage
        for key, value in _counts(usage):  # checked once for the three totals
            accumulated[key] = accumulated.get(key, 0) + value
            invocation[key] = invocation.get(key, 0) + value
            cycle[key] = cycle.get(key, 0) + value
        self.accumulated_metrics["latencyMs"] = self.accumulated_metrics.get("latencyMs", 0) + latency_ms
        self.invocation_metrics["latencyMs"] = self.invocation_metrics.get("latencyMs", 0) + latency_ms
        self.accumulated_cost_usd += cost_usd
        self.invocation_cost_usd += cost_usd

    def add_cycle(self) -> None:
        """Count one event-loop cycle (a model call and the tools it asked for).

        The usage added since the previous cycle is this cycle's (``agent_invocations[-1].cycles``).
        """
        self.cycle_count += 1
        self.invocation_cycles += 1
        if self.agent_invocations:
            self.agent_invocations[-1].cycles.append(
                EventLoopCycleMetric(event_loop_cycle_id=f"cycle-{next(_CYCLE_IDS)}", usage=self._cycle_usage))
        self._cycle_usage = _zero_usage()

    def add_cycle_duration(self, seconds: float) -> None:
        """Record how long one cycle (its model call and its tools) took."""
        self.total_duration += seconds
        durations = self.cycle_durations
        durations.append(seconds)
        if self._invocation_timed_cycles < KEPT_CYCLE_DURATIONS:
            self._invocation_timed_cycles += 1
        if len(durations) > KEPT_CYCLE_DURATIONS:
            del durations[:-KEPT_CYCLE_DURATIONS]

    def start_cycle(self, started: float) -> CycleNote:
        """Start the note of a new cycle for ``traces`` (``"Cycle <n>"``, counted over the agent's life).

        ``started``: the cycle's ``time.perf_counter()``, the read that also times it for ``cycle_durations``.
        """
        number = self._traced_cycles = self._traced_cycles + 1
        note = new_note(number, started)
        notes = self._cycle_notes
        notes.append(note)
        if len(notes) >= KEPT_CYCLE_DURATIONS + _TRIM_BATCH:  # trimmed in batches: a trim moves the whole list
            del notes[:-KEPT_CYCLE_DURATIONS]
        return note

    def start_cycle_trace(self) -> CycleRecord:
        """Start noting a new cycle that starts now, behind :class:`CycleRecord`'s methods."""
        return CycleRecord(self.start_cycle(time.perf_counter()))

    @property
    def traces(self) -> list[Trace]:
        """The latest cycles' trace trees (``KEPT_CYCLE_DURATIONS`` or a few more), oldest first, as Strands has them.

        Each is ``Cycle <n>`` with the children ``stream_messages``, ``Tool: <name>`` and ``Recursive call``; a
        result that crossed from an actor holds its invocation's cycles only.
        """
        return [note_trace(note) for note in self._cycle_notes]

    def add_tool(self, name: str, success: bool, seconds: float, tool_use: Mapping[str, Any] | None = None) -> None:
        """Count one call of tool ``name``, successful or not, that took ``seconds`` (``tool_use``: the call)."""
        entry = self.tool_metrics.setdefault(name, ToolMetrics())
        entry.call_count += 1
        entry.total_time += seconds
        if tool_use is not None:
            entry.tool = dict(tool_use)
        if success:
            entry.success_count += 1
        else:
            entry.error_count += 1

    @property
    def latest_agent_invocation(self) -> AgentInvocation | None:
        """The latest invocation's cycles and usage; None before the first invocation."""
        return self.agent_invocations[-1] if self.agent_invocations else None

    @property
    def latest_context_size(self) -> int | None:
        """The prompt size in tokens (cached tokens included) of the latest cycle's model call; None if unknown."""
        usage = self._latest_cycle_usage()
        return None if usage is None else _total_prompt_tokens(usage)

    @property
    def projected_context_size(self) -> int | None:
        """The latest prompt plus the output now in the history: about the next model call's input tokens."""
        usage = self._latest_cycle_usage()
        return None if usage is None else _total_prompt_tokens(usage) + usage.get("outputTokens", 0)

    def _latest_cycle_usage(self) -> dict[str, int] | None:
        invocation = self.latest_agent_invocation
        if invocation is None or not invocation.cycles:
            return None
        return invocation.cycles[-1].usage

    def get_summary(self) -> dict[str, Any]:
        """The metrics as a JSON dict: cycles, model calls, usage, latency, cost and per-tool counts."""
        return {
            "total_cycles": self.cycle_count,
            "total_duration": self.total_duration,
            "average_cycle_time": self.total_duration / self.cycle_count if self.cycle_count else 0.0,
            "model_calls": self.model_calls,
            "accumulated_usage": dict(self.accumulated_usage),
            "accumulated_metrics": dict(self.accumulated_metrics),
            "accumulated_cost_usd": self.accumulated_cost_usd,
            "tool_usage": {name: _tool_summary(name, m) for name, m in self.tool_metrics.items()},
            "traces": [trace.to_dict() for trace in self.traces],
            "agent_invocations": [
                {"usage": dict(invocation.usage),
                 "cycles": [{"event_loop_cycle_id": cycle.event_loop_cycle_id, "usage": dict(cycle.usage)}
                            for cycle in invocation.cycles]}
                for invocation in self.agent_invocations
            ],
        }


def _tool_summary(name: str, m: ToolMetrics) -> dict[str, Any]:
    """One tool's entry of ``get_summary()["tool_usage"]``.

    The counts sit both at the top (ray_harness) and under ``execution_stats`` and ``tool_info`` (Strands' layout),
    so code written for either reads them.
    """
    stats = {
        "call_count": m.call_count,
        "success_count": m.success_count,
        "error_count": m.error_count,
        "total_time": m.total_time,
        "average_time": m.total_time / m.call_count if m.call_count else 0.0,
        "success_rate": m.success_count / m.call_count if m.call_count else 0.0,
    }
    tool = m.tool or {}
    info = {"tool_use_id": tool.get("toolUseId", "N/A"), "name": tool.get("name", name),
            "input_params": tool.get("input", {})}
    return {**stats, "tool_info": info, "execution_stats": dict(stats)}


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
        """The result as text, as Strands writes it.

        The pending interrupts (a list of their dicts), else the structured output as JSON, else the message's text
        blocks (and the texts of its citations blocks), each followed by a newline.
        """
        if self.interrupts:
            return str([interrupt.to_dict() for interrupt in self.interrupts])
        if self.structured_output is not None:
            if hasattr(self.structured_output, "model_dump_json"):
                return str(self.structured_output.model_dump_json())
            return json.dumps(self.structured_output, default=str)
        return _message_text(self.message)

    @property
    def text(self) -> str:
        """The final message's text, without the trailing newline.

        That is ``str(result)`` when there are neither interrupts nor structured output.
        """
        return _message_text(self.message).rstrip("\n")

    @property
    def context_size(self) -> int | None:
        """The prompt size in tokens of the latest model call (cached tokens included); None if unknown."""
        return self.metrics.latest_context_size

    @property
    def projected_context_size(self) -> int | None:
        """About the input tokens of the next model call: the latest prompt plus its output; None if unknown."""
        return self.metrics.projected_context_size

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON, tagged ``"type": "agent_result"`` as Strands tags it.

        Stop reason, message, usage, cost, interrupts, structured output, checkpoint; :meth:`from_dict` reads it back.
        """
        return {
            "type": "agent_result",
            "stop_reason": self.stop_reason,
            "message": self.message,
            "usage": dict(self.metrics.accumulated_usage),
            "cost_usd": self.metrics.accumulated_cost_usd,
            "interrupts": [i.to_dict() for i in self.interrupts],
            "structured_output": self.structured_output.model_dump(mode="json")
            if hasattr(self.structured_output, "model_dump") else self.structured_output,
            "checkpoint": self.checkpoint.to_dict() if self.checkpoint else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentResult:
        """Rebuild a result written by :meth:`to_dict` (usage, cost, interrupts and checkpoint included).

        The structured output comes back as the JSON dict it was stored as; ``state`` is empty.

        Raises:
            TypeError: ``data`` is not a ``to_dict`` dict (its ``type`` is not ``"agent_result"``, as Strands checks,
                or its message is no message dict).
        """
        from ray_harness.checkpoint import Checkpoint
        from ray_harness.interrupts import Interrupt

        if not isinstance(data, dict) or data.get("type") != "agent_result":
            found = data.get("type") if isinstance(data, dict) else type(data).__name__
            raise TypeError(f"AgentResult.from_dict: unexpected type {found!r} (expected 'agent_result')")
        message = data.get("message")
        if not isinstance(message, dict) or "content" not in message:
            raise TypeError("AgentResult.from_dict: field 'message' must be a message dict")
        metrics = EventLoopMetrics()
        usage = data.get("usage") or {}
        _add(metrics.accumulated_usage, usage)
        _add(metrics.invocation_usage, usage)
        metrics.accumulated_cost_usd = metrics.invocation_cost_usd = float(data.get("cost_usd") or 0.0)
        checkpoint = data.get("checkpoint")
        return cls(
            stop_reason=str(data.get("stop_reason", "end_turn")),
            message=message,  # type: ignore[arg-type]
            metrics=metrics, state={},
            interrupts=[Interrupt.from_dict(item) for item in data.get("interrupts") or []],
            structured_output=data.get("structured_output"),
            checkpoint=Checkpoint.from_dict(checkpoint) if checkpoint else None,
        )


def _message_text(message: Message) -> str:
    """The text blocks of ``message`` and the texts inside its ``citationsContent`` blocks, each plus a newline."""
    parts: list[str] = []
    blocks: list[Any] = list(message.get("content", []))  # citationsContent is not in ContentBlock's keys
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if "text" in block:
            parts.append(str(block["text"]) + "\n")
        elif "citationsContent" in block:
            cited = block["citationsContent"].get("content", [])
            parts.extend(str(inner["text"]) + "\n" for inner in cited if isinstance(inner, dict) and "text" in inner)
    return "".join(parts)

