"""Constructor-argument validation shared by the remote sandboxes."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ray_harness.types.validation import describe_validation_error

__all__ = ("NAME_PATTERN", "CommonSettings", "Settings", "validated")

NAME_PATTERN = r"\A[a-zA-Z0-9][a-zA-Z0-9_.-]*\z"
"""Container names and ids, user names: no leading ``-`` (nothing can be read as an option), no whitespace."""

S = TypeVar("S", bound=BaseModel)


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class CommonSettings(Settings):
    """Arguments every built-in sandbox takes."""

    working_dir: str | None = Field(default=None, min_length=1)
    max_output_chars: int | None = Field(default=None, ge=0)


def validated(model: type[S], what: str, **values: Any) -> S:
    """Build ``model`` or raise ``ValueError`` naming each bad argument (``DockerSandbox.container: ...``)."""
    try:
        return model(**values)
    except ValidationError as error:
        raise ValueError(describe_validation_error(error, what)) from None
