"""The runtime's wire format: the typed requests every actor takes and the items its streams send back.

Every call into a runtime actor — a dedicated agent (:mod:`~ray_harness.runtime.remote_agent`), a pooled host
(:mod:`~ray_harness.runtime._host`), an orchestrator (:mod:`~ray_harness.runtime._orchestrator`) or a sandbox
(:mod:`~ray_harness.runtime.sandbox`) — takes one of the request models below, and every streamed item it sends
back is one member of :data:`WireItem`, a union discriminated by ``kind``. Requests are validated where they are
built (bad input names the field) and frozen; the caller's OpenTelemetry carrier rides in ``trace_context``,
filled by the client helper (:mod:`~ray_harness.runtime._client`).

**Event filter.** The caller says once, on the request, which events it wants (``events``, an
:data:`~ray_harness.multiagent.node_runner.EventFilter`): ``"all"`` (every event, raw model chunks included),
``"agent"`` (every event but the raw ``model_event`` chunks: the default of a streaming caller) or ``"result"``
(only what the outcome needs: the agent then runs quiet and produces no per-chunk events). The actor applies it
(:func:`wanted`); no layer in between passes a flag along.

**Control data beside the events.** A node's :class:`~ray_harness.agent.AgentSnapshot` never rides inside the
user's events: a request with ``snapshot=True`` gets it in the :class:`ResultItem` (one Ray object for both) or,
for a failed run, as a :class:`SnapshotItem` just before the exception. A node slot's run that only appended to
the history its caller's copy has sends a :class:`~ray_harness.agent.SnapshotDelta` instead (``delta``: the
appended messages and the rest of the state); ``node_state()`` returns whichever came, for ``agent.restore()``. An orchestrator's session writes and
end-of-run state travel as their own kinds (:class:`SessionWriteItem`, :class:`EndItem`).

**Node slots.** A Graph/Swarm node's request names its resident slot (``agent_key``) and says how the slot is
brought in line with the caller's copy (``slot``, a :class:`SlotSync`: the revision the copy matches, or the copy's
snapshot to restore); its result reports the slot's ``revision``. A host without the slot, or with it at another
revision, answers with a :class:`SlotMissItem` instead of running, and the caller sends the agent or its snapshot.

This module imports no Ray: its types are plain pydantic models, testable in-process.
"""

from __future__ import annotations

import pickle
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ray_harness._runtimes import EventFilter
from ray_harness.agent.limits import Limits, validate_limits
from ray_harness.agent.result import AgentResult
from ray_harness.agent.snapshot import AgentSnapshot, SnapshotDelta
from ray_harness.runtime._order import Ticket

__all__ = (
    "BatchItem",
    "CancelRequest",
    "EndItem",
    "EventFilter",
    "EventItem",
    "InvokeRequest",
    "OrchestratorEventItem",
    "OrchestratorRequest",
    "ResidentMissItem",
    "Request",
    "ResultItem",
    "ResumeRequest",
    "SandboxRequest",
    "SessionWriteItem",
    "SlotMissItem",
    "SlotSync",
    "SnapshotItem",
    "SnapshotRequest",
    "WireItem",
    "invoke_request",
    "is_terminal",
    "node_state_fields",
    "pack_snapshot",
    "unpack_snapshot",
    "wanted",
)


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


# -- requests -------------------------------------------------------------------------------------------------


class Request(_Wire):
    """What every request carries: the caller's trace context (filled by the client helper)."""

    trace_context: dict[str, str] | None = None

    def task_label(self) -> str | None:
        """The call's task name on the dashboard, when the request names it (else: after its trace context)."""
        return None


class SlotSync(_Wire):
    """How a resident node slot is brought in line with the caller's copy of its agent before a run.

    Attributes:
        revision: The slot revision the caller's copy matches (``None``: the agent's spec comes along, the slot is
            opened from it, or restored from it when it exists). A slot at another revision answers ``"stale"``.
        snapshot: The caller's pickled ``AgentSnapshot``, restored into the slot first (the copy changed: a reset,
            a session restore, an edit); then the revision is not checked.
        messages: How many messages the caller's copy has: the run's state comes back as a delta over them when
            the slot's run starts from as many and only appends (``None``: always the full snapshot).
        orchestration: The orchestration request the run is part of (the id its driver gave the Graph/Swarm
            invocation; the same when that driver sends a lost orchestration again). The slot keeps the completed
            runs of the latest one for their re-sends (:mod:`ray_harness.runtime._slots`, "Re-sent runs");
            ``None``: a run of its own.

    """

    revision: int | None = None
    snapshot: bytes | None = None
    messages: int | None = Field(default=None, ge=0)
    orchestration: str | None = Field(default=None, min_length=1)


class InvokeRequest(Request):
    """One invocation of an agent in an actor (a dedicated agent or a host slot).

    Attributes:
        invocation_id: The caller's id for this invocation: a cancel for it lands even before it starts, and a
            re-sent request with the same id continues (or replays) the invocation instead of starting again.
        prompt: The agent's input (text, content blocks, messages).
        invocation_state: Passed to the agent's hooks and tools (must pickle).
        limits: Per-call limits (``Limits``).
        structured_output_model: A pydantic model class for structured output.
        events: Which of the agent's events the caller wants (see the module docstring).
        snapshot: Send the agent's ``AgentSnapshot`` beside the result (graph and swarm nodes).
        agent_key: On a host: keep the agent resident under this key (history kept, runs queued in order).
        slot: A Graph/Swarm node's slot request (with ``agent_key``): the spec comes only when the slot is new, and
            a slot the host does not have (or at another revision) answers with a :class:`SlotMissItem`.
        ticket: The caller's place in its call order (:mod:`ray_harness.runtime._order`), set by the client.

    """

    kind: Literal["invoke"] = "invoke"
    invocation_id: str = Field(min_length=1)
    prompt: Any = None
    invocation_state: dict[str, Any] | None = None
    limits: Limits | None = None
    structured_output_model: type | None = None
    events: EventFilter = "agent"
    snapshot: bool = False
    agent_key: str | None = None
    slot: SlotSync | None = None
    ticket: Ticket | None = None

    @field_validator("limits", mode="before")
    @classmethod
    def _limits(cls, value: Any) -> Limits | None:
        return validate_limits(value)

    @model_validator(mode="after")
    def _slot_needs_key(self) -> InvokeRequest:
        if self.slot is not None and not self.agent_key:
            raise ValueError("slot: a slot request needs an agent_key")
        return self

    def agent_options(self) -> dict[str, Any]:
        """Return the keyword arguments of the agent's ``stream_async`` this request asks for."""
        options: dict[str, Any] = {"limits": self.limits, "structured_output_model": self.structured_output_model}
        if self.invocation_state is not None:
            options["invocation_state"] = self.invocation_state
        return options


class ResumeRequest(InvokeRequest):
    """An invocation that answers the agent's pending interrupts (``prompt``: ``interruptResponse`` blocks)."""

    kind: Literal["resume"] = "resume"  # type: ignore[assignment]

    @field_validator("prompt")
    @classmethod
    def _responses(cls, value: Any) -> Any:
        if not isinstance(value, list) or not value or not all(
                isinstance(block, dict) and isinstance(block.get("interruptResponse"), dict)
                and "interruptId" in block["interruptResponse"] for block in value):
            raise ValueError("a resume takes a non-empty list of {'interruptResponse': {'interruptId', 'response'}}")
        return value


def invoke_request(invocation_id: str, prompt: Any, **fields: Any) -> InvokeRequest:
    """Build an :class:`InvokeRequest`, or a :class:`ResumeRequest` when ``prompt`` answers interrupts."""
    is_resume = isinstance(prompt, list) and bool(prompt) and all(
        isinstance(block, dict) and "interruptResponse" in block for block in prompt)
    kind = ResumeRequest if is_resume else InvokeRequest
    return kind(invocation_id=invocation_id, prompt=prompt, **fields)


class CancelRequest(Request):
    """Stop invocations at their next safe point (handled in the actor's control group, never queued).

    Attributes:
        invocation_ids: The invocations to stop; ``None``: whatever runs now (on a host: every run). An id not
            running yet is remembered and starts cancelled.
        message: Why (becomes the cancelled result's message, as ``agent.cancel(message)``).
        after_current_tools: Let the running tool batch finish first.

    """

    kind: Literal["cancel"] = "cancel"
    invocation_ids: tuple[str, ...] | None = None
    message: str | None = None
    after_current_tools: bool = False


class SnapshotRequest(Request):
    """Ask for a resident agent's state now (an ``AgentSnapshot``; default: a dedicated host's one agent)."""

    kind: Literal["snapshot"] = "snapshot"
    agent_key: str | None = None


class OrchestratorRequest(Request):
    """One Graph/Swarm invocation shipped to an orchestration host.

    Attributes:
        invocation_id: The driver's id for it (a cancel for it lands even before it starts).
        payload: The pickled orchestrator (:func:`ray_harness.runtime._orchestrator_wire.dump_orchestrator`).
        task: The invocation's task.
        invocation_state: Shipped by value; changes the run makes stay in the actor.
        events: Which events the driver wants (``"result"``: the orchestrator runs quiet).
        pool_hosts: The actor ids of the driver's default host pool's hosts, so the orchestration host attaches
            to the same hosts, and knows them without a GCS look-up (``None``: the host's own default).
        resident: The key the host keeps the orchestrator under between invocations (``None``: not kept).
        token: With no ``payload``: the end token of the run whose end state the driver applied last; the host
            runs its resident copy only when it is that run's (else it answers with a ``ResidentMissItem``).
        sync: With no ``payload``: what changed in the driver since (pickled with references; see
            :mod:`ray_harness.runtime._resident`).
        label: The call's task name on the dashboard (``"ray_harness.graph:<id>"``), read by the client helper.

    """

    kind: Literal["orchestrate"] = "orchestrate"
    invocation_id: str = Field(min_length=1)
    payload: bytes | None = None
    task: Any = None
    invocation_state: dict[str, Any] = Field(default_factory=dict)
    events: EventFilter = "all"
    pool_hosts: tuple[str, ...] | None = Field(default=None, min_length=1)
    resident: str | None = Field(default=None, min_length=1)
    token: str | None = Field(default=None, min_length=1)
    sync: bytes | None = None
    label: str | None = Field(default=None, min_length=1)

    def task_label(self) -> str | None:
        return self.label

    @model_validator(mode="after")
    def _shipped_or_resident(self) -> OrchestratorRequest:
        if self.payload is None and (self.resident is None or self.token is None):
            raise ValueError("payload: an orchestrate request ships the orchestrator or names its resident copy "
                             "(resident and token)")
        return self


SandboxOperation = Literal["execute", "execute_code", "read_file", "write_file", "remove_file", "list_files",
                           "start", "close", "describe"]


class SandboxRequest(Request):
    """One operation of the ``Sandbox`` surface, sent to a sandbox actor."""

    kind: Literal["sandbox"] = "sandbox"
    operation: SandboxOperation
    command: str | None = None
    code: str | None = None
    language: str | None = None
    path: str | None = None
    content: bytes | None = None
    timeout: float | None = None
    cwd: str | None = None
    env: dict[str, str] | None = None


# -- streamed items -----------------------------------------------------------------------------------------


class _Item(_Wire):
    terminal: ClassVar[bool] = False
    """The last item of a complete stream (a stream that ends without one was cut short)."""


class EventItem(_Item):
    """One of the agent's events (``{"type": ...}``) the caller asked for."""

    kind: Literal["event"] = "event"
    event: dict[str, Any]


class _NodeStateItem(_Item):
    """An item that can carry the agent's state: a full snapshot or a delta, never both."""

    snapshot: bytes | None = None
    delta: bytes | None = None
    """A pickled ``SnapshotDelta`` (a node slot's run that only appended to its caller's copy's history)."""
    revision: int | None = None
    """A node slot's revision whose state the snapshot (or delta) holds (``None``: not a slot run)."""

    @model_validator(mode="after")
    def _one_state(self) -> _NodeStateItem:
        if self.snapshot is not None and self.delta is not None:
            raise ValueError("delta: an item carries a snapshot or a delta, not both")
        return self

    def agent_snapshot(self) -> AgentSnapshot | None:
        """Return the agent's full snapshot (``None``: none came: not asked for, or a delta came instead)."""
        return None if self.snapshot is None else _unpack(self.snapshot)

    def node_state(self) -> AgentSnapshot | SnapshotDelta | None:
        """Return what to ``agent.restore()``: the full snapshot or the delta (``None``: not asked for)."""
        if self.delta is not None:
            delta = pickle.loads(self.delta)
            if not isinstance(delta, SnapshotDelta):
                raise TypeError(f"expected a SnapshotDelta, got {type(delta).__name__}")
            return delta
        return self.agent_snapshot()


class ResultItem(_NodeStateItem):
    """The end of an agent invocation: its result and, when asked for, the agent's snapshot (or delta) beside it.

    The snapshot is the pickled ``AgentSnapshot``: plain data, so the C pickler packs it (cloudpickle, which Ray
    would use, calls back into Python for every object inside).
    """

    terminal: ClassVar[bool] = True
    kind: Literal["result"] = "result"
    result: Any  # an AgentResult, checked by type: a schema would rebuild (copy) the whole result

    @field_validator("result")
    @classmethod
    def _result(cls, value: Any) -> AgentResult:
        if not isinstance(value, AgentResult):
            raise ValueError(f"expected an AgentResult, got {type(value).__name__}")
        return value

    def event(self) -> dict[str, Any]:
        """Return the result as the agent's last event."""
        return {"type": "result", "result": self.result}


class SnapshotItem(_NodeStateItem):
    """The agent's state after a failed run (a snapshot or a delta), sent just before the run's exception."""

    kind: Literal["snapshot"] = "snapshot"

    @model_validator(mode="after")
    def _some_state(self) -> SnapshotItem:
        if self.snapshot is None and self.delta is None:
            raise ValueError("snapshot: a snapshot item carries a snapshot or a delta")
        return self


class SlotMissItem(_Item):
    """A host's answer instead of a node slot run; the caller sends the request again with the spec or snapshot.

    ``"unknown"``: no such slot (a restarted host, a released or idle slot); ``"stale"``: the slot is at another
    revision than the caller's copy.
    """

    terminal: ClassVar[bool] = True
    kind: Literal["slot_miss"] = "slot_miss"
    agent_key: str
    reason: Literal["unknown", "stale"]


def pack_snapshot(snapshot: AgentSnapshot) -> bytes:
    """Pickle an ``AgentSnapshot`` for the wire (the C pickler: it is plain data)."""
    return pickle.dumps(snapshot, pickle.HIGHEST_PROTOCOL)


def node_state_fields(state: AgentSnapshot | SnapshotDelta) -> dict[str, Any]:
    """The item fields carrying ``state``: ``{"delta": ...}`` for a delta, else ``{"snapshot": ...}`` (C pickled)."""
    key = "delta" if isinstance(state, SnapshotDelta) else "snapshot"
    return {key: pickle.dumps(state, pickle.HIGHEST_PROTOCOL)}


def unpack_snapshot(data: bytes) -> AgentSnapshot:
    """The ``AgentSnapshot`` of :func:`pack_snapshot` (checked by type)."""
    return _unpack(data)


def _unpack(data: bytes) -> AgentSnapshot:
    snapshot = pickle.loads(data)
    if not isinstance(snapshot, AgentSnapshot):
        raise TypeError(f"expected an AgentSnapshot, got {type(snapshot).__name__}")
    return snapshot


class OrchestratorEventItem(_Item):
    """One event of a Graph/Swarm run, pickled with the run's object references."""

    kind: Literal["orchestrator_event"] = "orchestrator_event"
    payload: bytes


class SessionWriteItem(_Item):
    """A session write of the orchestrator at ``path`` (``""``: the root), relayed to the driver's manager."""

    kind: Literal["session_write"] = "session_write"
    path: str
    data: dict[str, Any]


class BatchItem(_Item):
    """Items that piled up while the previous one was being sent, as one Ray object."""

    kind: Literal["batch"] = "batch"
    items: list[OrchestratorEventItem | SessionWriteItem]


class EndItem(_Item):
    """The end of an orchestrator run: the pickled end state (run states, snapshots, final event, error).

    ``token``: the host kept the orchestrator resident under the request's key; the driver names this token in
    its next request to run that copy again.
    """

    terminal: ClassVar[bool] = True
    kind: Literal["end"] = "end"
    payload: bytes
    token: str | None = None


class ResidentMissItem(_Item):
    """The orchestration host's answer when it has no resident copy at the request's token; ship it again."""

    terminal: ClassVar[bool] = True
    kind: Literal["resident_miss"] = "resident_miss"
    resident: str


WireItem = Annotated[
    EventItem | ResultItem | SnapshotItem | SlotMissItem | OrchestratorEventItem | SessionWriteItem | BatchItem | EndItem
    | ResidentMissItem,
    Field(discriminator="kind"),
]
"""Everything a runtime actor's stream sends (sandbox streams send the sandbox's own chunk types)."""


def is_terminal(item: Any) -> bool:
    """Whether ``item`` ends a complete stream."""
    return bool(getattr(item, "terminal", False))


def wanted(event: dict[str, Any], events: EventFilter) -> bool:
    """Whether a caller whose request says ``events`` gets ``event``."""
    if events == "all":
        return True
    kind = event.get("type")
    if events == "agent":
        return kind != "model_event"
    return kind == "result"
