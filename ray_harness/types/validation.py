"""Pydantic adapters that validate Converse data where it enters the harness."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from ray_harness.types.content import ContentBlock, Message
from ray_harness.types.tools import ToolSpec

__all__ = ("CONTENT_BLOCKS", "copy_json", "MESSAGE", "MESSAGES", "TOOL_SPEC", "describe_validation_error", "validate")

MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
CONTENT_BLOCKS: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])
TOOL_SPEC: TypeAdapter[ToolSpec] = TypeAdapter(ToolSpec)


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars), several times faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    if isinstance(value, str | int | float | bool | bytes) or value is None:
        return value
    import copy

    return copy.deepcopy(value)


def describe_validation_error(error: ValidationError, what: str) -> str:
    """One readable line per problem: ``<what>[0].content[1].text: Input should be a valid string``."""
    lines = []
    for problem in error.errors():
        location = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in problem["loc"])
        lines.append(f"{what}{location}: {problem['msg']}")
    return "; ".join(lines)


def validate(adapter: TypeAdapter[Any], value: Any, what: str) -> Any:
    """Validate ``value`` or raise ``ValueError`` naming the offending field."""
    try:
        return adapter.validate_python(value, strict=False)
    except ValidationError as error:
        raise ValueError(f"invalid {what}: {describe_validation_error(error, what)}") from None
