"""Checkpoints: pause points inside the ReAct cycle (``after_model`` and ``after_tools``).

``after_model``: the model asked for tools and none ran yet (resuming has no side effects to
compensate). ``after_tools``: the tools ran; the next model call has not happened.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ray_harness.types.exceptions import CheckpointException

__all__ = ("CHECKPOINT_SCHEMA_VERSION", "Checkpoint", "CheckpointPosition")

CHECKPOINT_SCHEMA_VERSION = "1.0"
CheckpointPosition = Literal["after_model", "after_tools"]
_POSITIONS = ("after_model", "after_tools")


@dataclass(frozen=True)
class Checkpoint:
    """A frozen pause-point marker; treat as opaque and pass it back to resume."""

    position: CheckpointPosition
    cycle_index: int = 0
    schema_version: str = field(init=False, default=CHECKPOINT_SCHEMA_VERSION)

    def __post_init__(self) -> None:
        if self.position not in _POSITIONS:
            raise CheckpointException(f"checkpoint field 'position' must be one of {_POSITIONS}, got {self.position!r}")
        if isinstance(self.cycle_index, bool) or not isinstance(self.cycle_index, int) or self.cycle_index < 0:
            raise CheckpointException(f"checkpoint field 'cycle_index' must be a non-negative int, got {self.cycle_index!r}")

    def to_dict(self) -> dict[str, Any]:
        """The checkpoint as a JSON-ready dict (what ``{"checkpointResume": {"checkpoint": ...}}`` takes)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Checkpoint:
        """Validate and rebuild a checkpoint.

        Raises:
            CheckpointException: ``data`` is not a valid checkpoint; the message names the field.
        """
        if not isinstance(data, dict):
            raise CheckpointException(f"checkpoint must be a dict, got {type(data).__name__}")
        version = data.get("schema_version")
        if version != CHECKPOINT_SCHEMA_VERSION:
            raise CheckpointException(
                f"checkpoint field 'schema_version' is {version!r}; this version reads {CHECKPOINT_SCHEMA_VERSION!r}"
            )
        if "position" not in data:
            raise CheckpointException("checkpoint field 'position' is missing")
        unknown = set(data) - {"position", "cycle_index", "schema_version"}
        if unknown:
            warnings.warn(f"ignoring unknown checkpoint keys {sorted(unknown)}", UserWarning, stacklevel=2)
        return cls(position=data["position"], cycle_index=data.get("cycle_index", 0))
