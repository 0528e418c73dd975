"""``AgentSnapshot``: an agent's state as one validated, versioned, frozen value.

What an agent *is* between invocations — its conversation, its agent state, its
pending interrupts, its conversation manager's bookkeeping, its accumulated
metrics and (when the model implements ``get_state()``/``set_state()``) its
model's state — as a pydantic model. ``Agent.snapshot()`` takes one,
``Agent.restore()`` puts one back; sessions, the runtime's journal, graph/swarm
node shipping and agent-as-tool parking all use this type, so an agent's state
crosses processes and storage in exactly one shape.

Configuration (model, tools, hooks, prompts, name) is not state: a snapshot
never carries it, and restoring one never changes it.

JSON: ``model_dump_json()`` / ``model_validate_json()`` round-trip (bytes in
messages, e.g. images, travel as base64).

``SnapshotDelta``: what one run changed, for a caller that holds the state the run started from — the
messages the run appended to the first ``base_messages`` and the rest of the state whole (agent state,
interrupt state, conversation manager state, metrics, model state). ``Agent.restore()`` takes either; a delta
applies only to an agent that has exactly ``base_messages`` messages (a Graph/Swarm node's result on
``runtime="ray"`` comes back this way, so a long history does not travel after every node run).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from ray_harness.interrupts import InterruptState
from ray_harness.types.content import Message
from ray_harness.types.exceptions import RayHarnessError
from ray_harness.types.validation import copy_json

__all__ = ("SCHEMA_VERSION", "AgentSnapshot", "SnapshotDelta", "SnapshotMetrics", "SnapshotToolMetrics",
           "conversation", "replace_conversation", "restore_snapshot", "take_delta", "take_snapshot")

SCHEMA_VERSION = 1
"""The snapshot schema this ray_harness writes and the newest it restores."""

# defer_build: the schema (Converse messages) is built on first validation, not at `import ray_harness`.
_CONFIG = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64", defer_build=True)


def _zero_usage() -> dict[str, int]:
    return {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}


class SnapshotToolMetrics(BaseModel):
    """Counters of one tool (``EventLoopMetrics.tool_metrics[name]``)."""

    model_config = _CONFIG

    call_count: int = 0
    success_count: int = 0
    error_count: int = 0
    total_time: float = 0.0


class SnapshotMetrics(BaseModel):
    """The agent's ``EventLoopMetrics``: accumulated usage, cost, cycle counts, tool counters."""

    model_config = _CONFIG

    cycle_count: int = 0
    model_calls: int = 0
    accumulated_usage: dict[str, int] = Field(default_factory=_zero_usage)
    accumulated_metrics: dict[str, int] = Field(default_factory=lambda: {"latencyMs": 0})
    accumulated_cost_usd: float = 0.0
    tool_metrics: dict[str, SnapshotToolMetrics] = Field(default_factory=dict)
    invocation_usage: dict[str, int] = Field(default_factory=_zero_usage)
    """Usage of the latest invocation (a graph node reports this one, not the cumulative one)."""
    invocation_cycles: int = 0
    invocation_cost_usd: float = 0.0
    total_duration: float = 0.0
    """Seconds spent in event-loop cycles (``EventLoopMetrics.total_duration``)."""


class AgentSnapshot(BaseModel):
    """An agent's state (see the module docstring). Build with ``agent.snapshot()``, apply with ``agent.restore()``."""

    model_config = _CONFIG

    schema_version: int = Field(default=SCHEMA_VERSION, ge=1)
    """Parsing a newer version is allowed; ``Agent.restore()`` refuses it."""
    agent_id: str
    name: str
    messages: list[Message] = Field(default_factory=list)
    """The conversation, validated as Converse messages (role and content list)."""
    state: dict[str, JsonValue] = Field(default_factory=dict)
    """``agent.state`` as a JSON object."""
    interrupt_state: dict[str, Any] = Field(default_factory=lambda: InterruptState().to_dict())
    """Pending interrupts and their resume context (``InterruptState.to_dict()``)."""
    conversation_manager_state: dict[str, Any] | None = None
    """``conversation_manager.get_state()``; None: leave the manager as it is on restore."""
    metrics: SnapshotMetrics = Field(default_factory=SnapshotMetrics)
    model_state: Any = None
    """Opaque (JSON): ``model.get_state()``, or None when the model keeps no state of its own."""

    @field_validator("interrupt_state")
    @classmethod
    def _check_interrupt_state(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            InterruptState.from_dict(value)
        except RayHarnessError as error:
            raise ValueError(str(error)) from None
        return value


class SnapshotDelta(BaseModel):
    """An agent's state after a run, relative to the history the run started from (see the module docstring).

    Build with :func:`take_delta` (a host knows the run only appended), apply with ``agent.restore()``: the
    agent keeps its first ``base_messages`` messages and gets ``snapshot.messages`` appended; everything else
    in ``snapshot`` replaces the agent's, as a full snapshot's would.
    """

    model_config = _CONFIG

    base_messages: int = Field(ge=0)
    """How many messages the agent had when the run started (the delta applies only to as many)."""
    snapshot: AgentSnapshot
    """The state after the run; its ``messages`` are only those the run appended."""

    def over(self, base: list[Any]) -> AgentSnapshot:
        """The full snapshot: ``base`` (the ``base_messages`` messages the run started from) and the delta's."""
        if len(base) != self.base_messages:
            raise ValueError(f"snapshot delta of base_messages={self.base_messages} cannot extend {len(base)} "
                             "messages")
        return self.snapshot.model_copy(update={"messages": [*base, *self.snapshot.messages]})


def take_delta(agent: Any, base_messages: int, *, copy: bool = True) -> SnapshotDelta:
    """The agent's state as a :class:`SnapshotDelta` over its first ``base_messages`` messages.

    The caller vouches that those messages are the ones the receiving copy has (a run that only appended):
    this only copies the messages after them. ``copy``: as in :func:`take_snapshot`.
    """
    if not 0 <= base_messages <= len(agent.messages):
        raise ValueError(f"base_messages must be between 0 and the agent's {len(agent.messages)} messages, "
                         f"got {base_messages}")
    tail = take_snapshot(agent, base_messages, copy=copy)
    return SnapshotDelta.model_construct(base_messages=base_messages, snapshot=tail)


def take_snapshot(agent: Any, messages_from: int = 0, *, copy: bool = True) -> AgentSnapshot:
    """``agent.snapshot()``: copies of the agent's state, built without re-validating it (the agent's own).

    ``messages_from``: only the messages from that index on (the tail of a :class:`SnapshotDelta`).
    ``copy=False``: the messages and the model's state are the agent's own objects, not copies — for a caller
    that serializes the snapshot before the agent runs on (the runtime's journal pickles it at once, after every
    message: copying a long history, or a model state that grows with every call, each time cost more than the
    write). Such a snapshot must not be kept or handed out.
    """
    keep = copy_json if copy else _same
    metrics = agent.event_loop_metrics
    manager = agent.conversation_manager
    get_model_state = getattr(agent.model, "get_state", None)
    tool_metrics = {name: SnapshotToolMetrics.model_construct(
        call_count=m.call_count, success_count=m.success_count, error_count=m.error_count, total_time=m.total_time)
        for name, m in metrics.tool_metrics.items()}
    return AgentSnapshot.model_construct(
        schema_version=SCHEMA_VERSION,
        agent_id=agent.agent_id,
        name=agent.name,
        messages=keep(agent.messages[messages_from:] if messages_from else agent.messages),
        state=agent.state.to_dict(),
        interrupt_state=agent._interrupt_state.to_dict(),
        conversation_manager_state=keep(manager.get_state()) if manager is not None else None,
        metrics=SnapshotMetrics.model_construct(
            cycle_count=metrics.cycle_count, model_calls=metrics.model_calls,
            accumulated_usage=dict(metrics.accumulated_usage), accumulated_metrics=dict(metrics.accumulated_metrics),
            accumulated_cost_usd=metrics.accumulated_cost_usd, tool_metrics=tool_metrics,
            invocation_usage=dict(metrics.invocation_usage), invocation_cycles=metrics.invocation_cycles,
            invocation_cost_usd=metrics.invocation_cost_usd, total_duration=metrics.total_duration),
        model_state=keep(get_model_state()) if callable(get_model_state) else None,
    )


def _same(value: Any) -> Any:
    return value


def restore_snapshot(agent: Any, snapshot: AgentSnapshot | SnapshotDelta, *, copy: bool = True) -> None:
    """``agent.restore(snapshot)``: everything is checked and built before the agent changes.

    A :class:`SnapshotDelta` keeps the agent's first ``base_messages`` messages (the same objects) and appends
    copies of the delta's; an agent with another number of messages is refused (``ValueError``).
    ``copy=False``: the agent takes the snapshot's messages and state objects themselves — for a caller that owns
    a snapshot nobody else holds (one it just unpickled).
    """
    keep = copy_json if copy else _same
    from ray_harness.agent.result import EventLoopMetrics, ToolMetrics
    from ray_harness.agent.state import AgentState

    base: list[Any] | None = None
    if isinstance(snapshot, SnapshotDelta):
        if snapshot.base_messages != len(agent.messages):
            raise ValueError(f"snapshot delta of base_messages={snapshot.base_messages} cannot be restored into an "
                             f"agent with {len(agent.messages)} messages; restore a full AgentSnapshot instead")
        base = agent.messages
        snapshot = snapshot.snapshot
    if not isinstance(snapshot, AgentSnapshot):
        raise TypeError(f"restore() takes an AgentSnapshot or a SnapshotDelta, got {type(snapshot).__name__}")
    if snapshot.schema_version > SCHEMA_VERSION:
        raise ValueError(f"snapshot schema_version {snapshot.schema_version} is newer than the newest this "
                         f"ray_harness restores (schema_version {SCHEMA_VERSION}); upgrade ray_harness")
    if snapshot.agent_id != agent.agent_id:
        raise ValueError(f"snapshot of agent_id {snapshot.agent_id!r} cannot be restored into the agent with "
                         f"agent_id {agent.agent_id!r}")
    messages = keep(snapshot.messages) if copy else list(snapshot.messages)
    if base is not None:
        messages = [*base, *messages]
    state = AgentState(keep(snapshot.state))
    interrupts = InterruptState.from_dict(keep(snapshot.interrupt_state))
    m = snapshot.metrics
    metrics = EventLoopMetrics(
        cycle_count=m.cycle_count, model_calls=m.model_calls, accumulated_usage=dict(m.accumulated_usage),
        accumulated_metrics=dict(m.accumulated_metrics), accumulated_cost_usd=m.accumulated_cost_usd,
        tool_metrics={name: ToolMetrics(call_count=t.call_count, success_count=t.success_count,
                                        error_count=t.error_count, total_time=t.total_time)
                      for name, t in m.tool_metrics.items()},
        invocation_usage=dict(m.invocation_usage), invocation_cycles=m.invocation_cycles,
        invocation_cost_usd=m.invocation_cost_usd, total_duration=m.total_duration)
    undo: list[Any] = []
    try:
        manager = agent.conversation_manager
        if snapshot.conversation_manager_state is not None and manager is not None:
            previous = manager.get_state()
            manager.restore_from_session(keep(snapshot.conversation_manager_state))
            undo.append(lambda: manager.restore_from_session(previous))
        set_model_state = getattr(agent.model, "set_state", None)
        if snapshot.model_state is not None and callable(set_model_state):
            set_model_state(keep(snapshot.model_state))  # the last step that can fail: nothing to undo after it
    except BaseException:
        for step in reversed(undo):  # a failed restore leaves the agent as it was
            step()
        raise
    agent.messages = messages
    agent.state = state
    agent._interrupt_state = interrupts
    agent.event_loop_metrics = metrics


def conversation(snapshot: AgentSnapshot) -> AgentSnapshot:
    """Only the conversation of ``snapshot``: messages, agent state, interrupt state.

    That is what a session or a parked turn keeps, without the model's state, the metrics or the
    conversation manager's bookkeeping.
    """
    return snapshot.model_copy(update={"conversation_manager_state": None, "metrics": SnapshotMetrics(),
                                       "model_state": None})


def replace_conversation(snapshot: AgentSnapshot, conversation: AgentSnapshot) -> AgentSnapshot:
    """``snapshot`` with the messages, agent state and interrupt state of ``conversation``.

    What a graph's ``reset_on_revisit`` and a parked agent-as-tool turn put back: the conversation, not the
    model's cursor, the metrics or the conversation manager's bookkeeping of the run since.
    """
    return snapshot.model_copy(update={"messages": conversation.messages, "state": conversation.state,
                                       "interrupt_state": conversation.interrupt_state})
