"""Strands' ``Snapshot``: the JSON capture of chosen agent fields behind ``take_snapshot`` / ``load_snapshot``.

ray_harness's own state object is :class:`~ray_harness.agent.AgentSnapshot` (typed, whole, used by the runtime
and sessions). This is the Strands form, so code written for ``agent.take_snapshot(preset="session")`` and
``Snapshot.from_dict(...)`` keeps working after switching the imports: a plain dataclass whose ``to_dict()`` is
the format Strands writes (scope ``"agent"``, schema_version ``"1.0"``, ``data``, ``app_data``, ``created_at``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from ray_harness.types.exceptions import ConcurrencyException, SnapshotException

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("ALL_SNAPSHOT_FIELDS", "SNAPSHOT_SCHEMA_VERSION", "Snapshot", "SnapshotField", "load_snapshot",
           "resolve_snapshot_fields", "restore_fields", "take_snapshot")

SnapshotField = Literal["messages", "state", "conversation_manager_state", "interrupt_state", "system_prompt",
                        "model_state"]
ALL_SNAPSHOT_FIELDS: tuple[str, ...] = ("messages", "state", "conversation_manager_state", "interrupt_state",
                                        "system_prompt", "model_state")
SNAPSHOT_SCHEMA_VERSION = "1.0"
_PRESETS: dict[str, tuple[str, ...]] = {
    "session": ("messages", "state", "conversation_manager_state", "interrupt_state", "model_state"),
}
_SCOPES = ("agent", "multiAgent")


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Snapshot:
    """A point-in-time capture of some of an agent's fields, as a JSON-compatible object (Strands' ``Snapshot``)."""

    scope: str
    schema_version: str
    data: dict[str, Any]
    app_data: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    """ISO 8601 UTC; filled in when empty."""

    def __post_init__(self) -> None:
        if not self.created_at:
            self.created_at = _now()

    def validate(self) -> None:
        """Raise ``SnapshotException`` unless this version of ray_harness can load the snapshot."""
        if self.schema_version != SNAPSHOT_SCHEMA_VERSION:
            raise SnapshotException(f"unsupported snapshot schema_version {self.schema_version!r}; this ray_harness "
                                    f"loads {SNAPSHOT_SCHEMA_VERSION!r}")
        if self.scope not in _SCOPES:
            raise SnapshotException(f"invalid snapshot scope {self.scope!r}; expected one of {list(_SCOPES)}")

    def to_dict(self) -> dict[str, Any]:
        """The snapshot as a plain dict (Strands' format)."""
        return {"scope": self.scope, "schema_version": self.schema_version, "created_at": self.created_at,
                "data": self.data, "app_data": self.app_data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        """Rebuild a snapshot from :meth:`to_dict` output.

        Raises:
            SnapshotException: not a dict with a ``data`` dict, or a version or scope this ray_harness cannot load.
        """
        if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
            raise SnapshotException("a snapshot must be a dict with a 'data' dict (Snapshot.to_dict() output)")
        app_data = data.get("app_data", {})
        if not isinstance(app_data, dict):
            raise SnapshotException(f"snapshot field 'app_data' must be a dict, got {type(app_data).__name__}")
        snapshot = cls(scope=data.get("scope", "agent"), schema_version=data.get("schema_version", ""),
                       data=data["data"], app_data=app_data, created_at=data.get("created_at", ""))
        snapshot.validate()
        return snapshot


def resolve_snapshot_fields(*, preset: str | None = None, include: list[str] | None = None,
                            exclude: list[str] | None = None) -> set[str]:
    """The fields to capture: the preset's, plus ``include``, minus ``exclude``.

    Raises:
        SnapshotException: an unknown preset or field name, or nothing left to capture.
    """
    for name in [*(include or []), *(exclude or [])]:
        if name not in ALL_SNAPSHOT_FIELDS:
            raise SnapshotException(f"invalid snapshot field {name!r}; valid fields: {sorted(ALL_SNAPSHOT_FIELDS)}")
    if preset is not None and preset not in _PRESETS:
        raise SnapshotException(f"invalid snapshot preset {preset!r}; valid presets: {sorted(_PRESETS)}")
    fields = set(_PRESETS[preset]) if preset is not None else set()
    fields |= set(include or [])
    fields -= set(exclude or [])
    if not fields:
        raise SnapshotException("no snapshot fields resolved: give a preset or at least one field in 'include' "
                                "(only 'exclude' always leaves nothing)")
    return fields


def take_snapshot(agent: Agent, *, preset: str | None = None, include: list[str] | None = None,
                  exclude: list[str] | None = None, app_data: dict[str, Any] | None = None) -> Snapshot:
    """``agent.take_snapshot(...)``: copies of the chosen fields."""
    fields = resolve_snapshot_fields(preset=preset, include=include, exclude=exclude)
    data: dict[str, Any] = {}
    if "messages" in fields:
        data["messages"] = copy.deepcopy(agent.messages)
    if "state" in fields:
        data["state"] = agent.state.get()
    if "conversation_manager_state" in fields:
        data["conversation_manager_state"] = agent.conversation_manager.get_state()
    if "interrupt_state" in fields:
        data["interrupt_state"] = agent.interrupt_state.to_dict()
    if "system_prompt" in fields:
        data["system_prompt"] = copy.deepcopy(agent.system_prompt_content)
    if "model_state" in fields:
        get_state = getattr(agent.model, "get_state", None)
        data["model_state"] = copy.deepcopy(get_state()) if callable(get_state) else {}
    return Snapshot(scope="agent", schema_version=SNAPSHOT_SCHEMA_VERSION, data=data,
                    app_data=copy.deepcopy(app_data) if app_data else {})


def load_snapshot(agent: Agent, snapshot: Snapshot) -> None:
    """``agent.load_snapshot(snapshot)``: restore the fields the snapshot holds; the others stay.

    Everything is checked before the agent changes, so a bad snapshot leaves it as it was.
    """
    if agent._lock.locked():
        raise ConcurrencyException(f"agent {agent.name!r} is running an invocation; load a snapshot when idle")
    restore_fields(agent, snapshot)


def restore_fields(agent: Agent, snapshot: Snapshot) -> None:
    """:func:`load_snapshot` without its idle check, for a hook that rewinds its own running agent.

    ``GoalLoop(preserve_context=False)`` rewinds in ``AfterInvocationEvent``, between the rounds of one
    invocation (Strands' ``load_snapshot`` has no idle check).
    """
    from ray_harness.agent._arguments import check_system_prompt
    from ray_harness.agent.state import AgentState
    from ray_harness.interrupts import InterruptState
    from ray_harness.types.validation import validate_messages

    if not isinstance(snapshot, Snapshot):
        raise TypeError(f"load_snapshot() takes a Snapshot, got {type(snapshot).__name__}")
    snapshot.validate()
    if snapshot.scope != "agent":
        raise SnapshotException(f"expected a snapshot of scope 'agent', got {snapshot.scope!r}")
    data = snapshot.data
    unknown = sorted(set(data) - set(ALL_SNAPSHOT_FIELDS))
    if unknown:
        raise SnapshotException(f"snapshot data has unknown fields {unknown}; valid fields: "
                                f"{sorted(ALL_SNAPSHOT_FIELDS)}")
    messages = validate_messages(copy.deepcopy(data["messages"]), "snapshot.data['messages']") \
        if "messages" in data else None
    state = AgentState(copy.deepcopy(data["state"])) if "state" in data else None
    interrupts = InterruptState.from_dict(copy.deepcopy(data["interrupt_state"])) if "interrupt_state" in data \
        else None
    system_prompt = check_system_prompt(copy.deepcopy(data["system_prompt"])) if "system_prompt" in data else None
    set_model_state = getattr(agent.model, "set_state", None)
    if "conversation_manager_state" in data:
        agent.conversation_manager.restore_from_session(copy.deepcopy(data["conversation_manager_state"]))
    if messages is not None:
        agent.messages = messages
    if state is not None:
        agent.state = state
    if interrupts is not None:
        agent._interrupt_state = interrupts
    if "system_prompt" in data:
        agent.system_prompt = system_prompt
    if data.get("model_state") and callable(set_model_state):
        set_model_state(copy.deepcopy(data["model_state"]))
