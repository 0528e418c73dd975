"""``AgentState``: JSON-serializable key/value state that travels with the agent (and its session)."""

from __future__ import annotations

import copy
import json
from typing import Any

__all__ = ("AgentState",)


class AgentState:
    """An agent's key-value state: JSON values, copied in and out so callers never share them."""

    def __init__(self, initial: dict[str, Any] | None = None) -> None:
        self._state: dict[str, Any] = {}
        for key, value in (initial or {}).items():
            self.set(key, value)

    def set(self, key: str, value: Any) -> None:
        """Store a deep copy of ``value`` under ``key``.

        Raises:
            ValueError: ``key`` is not a non-empty string or ``value`` is not JSON serializable.
        """
        if not isinstance(key, str) or not key:
            raise ValueError(f"state key must be a non-empty string, got {key!r}")
        try:
            json.dumps(value, allow_nan=False)  # NaN/Infinity are not JSON: a session could not store them
        except (TypeError, ValueError) as error:
            raise ValueError(f"value for state key {key!r} is not JSON serializable: {error}") from None
        self._state[key] = copy.deepcopy(value)

    def get(self, key: str | None = None) -> Any:
        """A copy of the value under ``key`` (None if absent), or of the whole state when ``key`` is None."""
        if key is None:
            return copy.deepcopy(self._state)
        return copy.deepcopy(self._state.get(key))

    def delete(self, key: str) -> None:
        """Remove ``key``; an absent key is ignored."""
        self._state.pop(key, None)

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the whole state."""
        return copy.deepcopy(self._state) if self._state else {}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AgentState):
            return self._state == other._state
        if isinstance(other, dict):
            return self._state == other
        return NotImplemented

    def __repr__(self) -> str:
        return f"AgentState({self._state!r})"
