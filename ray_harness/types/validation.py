"""Pydantic adapters that validate Converse data where it enters the harness."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from ray_harness.types.content import ContentBlock, Message
from ray_harness.types.tools import ToolSpec

__all__ = ("BLOCK_KEYS", "CONTENT_BLOCKS", "copy_json", "MESSAGE", "MESSAGES", "TOOL_SPEC", "describe_validation_error",
           "validate", "validate_blocks", "validate_messages")

MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
CONTENT_BLOCKS: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])
TOOL_SPEC: TypeAdapter[ToolSpec] = TypeAdapter(ToolSpec)
BLOCK_KEYS = frozenset(ContentBlock.__annotations__)
"""The keys of which a content block holds one (validation drops any other key of a block)."""


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


def validate_messages(value: Any, what: str) -> list[Message]:
    """Messages given by a caller (``Agent(messages=)``, a prompt): :func:`validate`, and every block known.

    A block without a known key (``{}``, a typo such as ``{"txt": ...}``) is refused here, naming it: validation
    keeps only known keys, so it would otherwise become ``{}``, which every provider refuses at the next call.
    """
    if isinstance(value, list | tuple):
        for index, message in enumerate(value):
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list | tuple):
                _require_known_blocks(content, what, f"{what}[{index}].content")
    return validate(MESSAGES, value, what)  # type: ignore[no-any-return]


def validate_blocks(value: Any, what: str) -> list[ContentBlock]:
    """Content blocks given by a caller (a prompt): :func:`validate`, and every block known."""
    if isinstance(value, list | tuple):
        _require_known_blocks(value, what, what)
    return validate(CONTENT_BLOCKS, value, what)  # type: ignore[no-any-return]


def _require_known_blocks(blocks: list[Any] | tuple[Any, ...], what: str, where: str) -> None:
    for index, block in enumerate(blocks):
        if isinstance(block, dict) and BLOCK_KEYS.isdisjoint(block):
            raise ValueError(f"invalid {what}: {where}[{index}]: a content block needs one of "
                             f"{', '.join(sorted(BLOCK_KEYS))}; got keys {sorted(block)}")
