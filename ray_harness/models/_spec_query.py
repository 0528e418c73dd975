"""The ``?key=value&...`` tail of a model spec: request parameters that a spec string can carry.

The query starts at the first ``?`` after the spec's last ``#`` (so an ``openai-compatible:`` base URL may
hold a ``#`` of its own, and the model id never holds a ``?``). Values are percent-decoded, then read as JSON
scalars when they parse as one (``64`` is an int, ``0.2`` a float, ``true`` a bool, ``"x"`` a string) and
taken as plain strings otherwise. Which keys a provider accepts, and which request field each one fills, is
fixed by :mod:`ray_harness.models.selection`; everything else is an error naming the key.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote

from ray_harness.types.exceptions import ModelConfigurationError

__all__ = ("KEYS", "Scalar", "parse_query", "split_query", "with_defaults")

Scalar = int | float | bool | str


@dataclass(frozen=True)
class _Key:
    kind: Literal["int", "number", "str"]
    minimum: float | None = None

    def check(self, spec: str, key: str, raw: str) -> Scalar:
        """The value of ``key=raw``, or ``ModelConfigurationError`` naming the key."""
        value = _scalar(raw)
        if self.kind == "str":  # text as written, unless quoted as a JSON string
            return value if isinstance(value, str) else raw
        integral = isinstance(value, int) and not isinstance(value, bool)
        number = integral or (isinstance(value, float) and math.isfinite(value))
        if (self.kind == "int" and not integral) or not number:
            kind = "an integer" if self.kind == "int" else "a finite number"
            raise ModelConfigurationError(f"model spec {spec!r}: parameter {key!r} must be {kind}, got {raw!r}")
        assert isinstance(value, int | float)
        if self.minimum is not None and value < self.minimum:
            raise ModelConfigurationError(f"model spec {spec!r}: parameter {key!r} must be >= {self.minimum:g}, "
                                          f"got {raw!r}")
        return value


# Every key some provider accepts; selection.py says which provider takes which.
KEYS: dict[str, _Key] = {
    "max_tokens": _Key("int", 1),
    "temperature": _Key("number", 0),
    "top_p": _Key("number", 0),
    "top_k": _Key("int", 1),
    "seed": _Key("int"),
    "stop": _Key("str"),
    "context_window": _Key("int", 1),
}


def split_query(spec: str) -> tuple[str, str | None]:
    """``spec`` without its query, and the query text (``None`` when there is no ``?``)."""
    hash_at = spec.rfind("#")
    question_at = spec.find("?", hash_at + 1)
    if question_at < 0:
        return spec, None
    return spec[:question_at], spec[question_at + 1:]


def parse_query(spec: str, query: str | None, allowed: tuple[str, ...]) -> dict[str, Scalar]:
    """The parameters of ``query`` (the text after ``?`` of ``spec``), each checked against ``allowed``."""
    params: dict[str, Scalar] = {}
    if not query:
        return params
    for item in query.split("&"):
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key = unquote(key).strip()
        raw = unquote(raw)  # not stripped: a stop sequence may be whitespace
        if not key:
            raise ModelConfigurationError(f"model spec {spec!r}: empty parameter name in {item!r}")
        if key not in allowed:
            raise ModelConfigurationError(f"model spec {spec!r}: unknown parameter {key!r}; this provider takes "
                                          f"{', '.join(allowed)} (pass other request fields as params= on the "
                                          "model object)")
        if not sep or not raw:
            raise ModelConfigurationError(f"model spec {spec!r}: parameter {key!r} has no value")
        if key in params:
            raise ModelConfigurationError(f"model spec {spec!r}: parameter {key!r} is given twice")
        params[key] = KEYS[key].check(spec, key, raw)
    return params


def with_defaults(spec: str, defaults: dict[str, Scalar]) -> str:
    """``spec`` with ``key=value`` added to its query for each key of ``defaults`` the spec does not set."""
    head, query = split_query(spec.strip())
    present = {unquote(item.partition("=")[0]).strip() for item in (query or "").split("&") if item}
    extra = [f"{quote(key)}={quote(json.dumps(value) if not isinstance(value, str) else value)}"
             for key, value in defaults.items() if key not in present]
    if not extra:
        return spec
    parts = [query] if query else []
    return f"{head}?{'&'.join(parts + extra)}"


def _scalar(raw: str) -> Scalar | None:
    """``raw`` read as a JSON scalar; ``None`` when it is not one (objects, arrays, null, or not JSON)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, int | float | bool | str) else None
