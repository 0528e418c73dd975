"""Tool specs as the model receives them: Strands' normalisation of input schemas, and a spec's checks."""

from __future__ import annotations

import re
from typing import Any

from ray_harness.types.tools import ToolSpec

__all__ = ("checked_name", "checked_spec", "normalize_schema", "normalize_tool_spec")

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What every provider accepts as a tool name (Strands checks the same at the call)."""

_MAX_DEPTH = 64
"""Nested object schemas deeper than this are refused (a hostile MCP server must not exhaust the stack)."""

_COMPOSITION = ("anyOf", "oneOf", "allOf", "not")


def normalize_tool_spec(spec: ToolSpec, tool_name: str | None = None) -> ToolSpec:
    """``spec`` with its input schema normalised as Strands' registry does before every model call.

    A bare JSON schema becomes ``{"json": schema}``; see :func:`normalize_schema`. ``spec`` is not changed.
    """
    normalized = dict(spec)
    given: Any = spec.get("inputSchema")
    try:
        if isinstance(given, dict) and isinstance(given.get("json"), dict):
            normalized["inputSchema"] = {**given, "json": normalize_schema(given["json"])}
        elif isinstance(given, dict):
            normalized["inputSchema"] = {"json": normalize_schema(given)}
    except ValueError as error:
        raise ValueError(f"tool {tool_name or spec.get('name')!r}: {error}") from None
    return normalized  # type: ignore[return-value]


def normalize_schema(schema: dict[str, Any], *, _depth: int = 0) -> dict[str, Any]:
    """A copy of ``schema`` with ``type`` (object), ``properties`` and ``required`` present, as in Strands.

    Each property gets a ``type`` (``string``) unless it has one, a ``$ref`` or a composition
    (``anyOf`` ...), and a ``description`` (``Property <name>``) unless it has one; nested object
    properties are normalised the same way. A property that is not an object becomes a described string.
    """
    if _depth > _MAX_DEPTH:
        raise ValueError(f"tool inputSchema nesting exceeds {_MAX_DEPTH} levels")
    normalized = dict(schema)
    normalized.setdefault("type", "object")
    normalized.setdefault("required", [])
    properties = normalized.get("properties")
    normalized["properties"] = {name: _normalize_property(name, prop, _depth)
                                for name, prop in (properties if isinstance(properties, dict) else {}).items()}
    return normalized


def _normalize_property(name: str, prop: Any, depth: int) -> dict[str, Any]:
    if not isinstance(prop, dict):
        return {"type": "string", "description": f"Property {name}"}
    if prop.get("type") == "object" and "properties" in prop:
        return normalize_schema(prop, _depth=depth + 1)
    normalized = dict(prop)
    if "$ref" in normalized:  # the referenced definition carries its own type and description
        return normalized
    if not any(key in normalized for key in _COMPOSITION):
        normalized.setdefault("type", "string")
    normalized.setdefault("description", f"Property {name}")
    return normalized


def checked_name(name: Any) -> str:
    """``name`` if it is a valid tool name, else ``ValueError`` saying what a name may hold."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"tool name {name!r} must match {_NAME.pattern}")
    return name


def checked_spec(value: Any, tool_name: str) -> ToolSpec:
    """``value`` as a tool's spec: it keeps the tool's name and has a description and an input schema.

    A bare JSON schema as ``inputSchema`` is put in the Converse form ``{"json": schema}``.
    """
    if not isinstance(value, dict):
        raise ValueError(f"tool_spec must be a dict, got {type(value).__name__}")
    if value.get("name") != tool_name:
        raise ValueError(f"cannot change tool name via tool_spec (expected {tool_name!r}, got {value.get('name')!r})")
    for field in ("description", "inputSchema"):
        if field not in value:
            raise ValueError(f"tool_spec must contain {field!r}")
    schema = value["inputSchema"]
    if not isinstance(schema, dict):
        raise ValueError(f"tool_spec field 'inputSchema' must be a dict, got {type(schema).__name__}")
    if not isinstance(schema.get("json"), dict):  # a bare JSON schema, which Strands accepts too
        return {**value, "inputSchema": {"json": schema}}  # type: ignore[typeddict-item]
    return value  # type: ignore[return-value]
