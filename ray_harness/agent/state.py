"""``AgentState``: JSON-serializable key/value state that travels with the agent (and its session)."""

from __future__ import annotations

import copy
import json
from typing import Any

__all__ = ("AgentState",)


class AgentState:
    """An agent's key-value state: JSON values, copied in and out so callers never share them."""

    def __init__(self, initial: dict[str, Any] | None = None) -> None:
        """Start from a copy of ``initial`` (a dict of JSON values).

        Raises:
            ValueError: ``initial`` is not a dict (as Strands' ``Agent(state=...)``), or a key or value of it is
                refused by :meth:`set`.
        """
        if initial is not None and not isinstance(initial, dict):
            raise ValueError(f"state must be an AgentState or a dict of JSON values, got {type(initial).__name__}")
        self._state: dict[str, Any] = {}
        if initial:  # most agents start with none
            for key, value in initial.items():
                self.set(key, value)

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key`` as the JSON value it is (a copy).

        What is stored is what JSON holds, so what ``get`` returns is what a session or snapshot restores: a
        tuple is stored as a list, a dict's int keys as strings (Strands keeps them as given; a session write of
        a dict with both int and str keys then failed, after the model call).

        Raises:
            ValueError: ``key`` is not a non-blank string or ``value`` is not JSON serializable.
        """
        _check_key(key)
        try:
            encoded = json.dumps(value, allow_nan=False)  # NaN/Infinity are not JSON: a session could not store them
        except (TypeError, ValueError) as error:
            raise ValueError(f"value for state key {key!r} is not JSON serializable: {error}") from None
        self._state[key] = json.loads(encoded)

    def get(self, key: str | None = None) -> Any:
        """A copy of the value under ``key`` (None if absent), or of the whole state when ``key`` is None."""
        if key is None:
            return self.to_dict()
        return copy.deepcopy(self._state.get(key))

    def delete(self, key: str) -> None:
        """Remove ``key``; an absent key is ignored.

        Raises:
            ValueError: ``key`` is not a non-blank string (no such key can exist: most likely a bug, as in Strands).
        """
        _check_key(key)
        self._state.pop(key, None)

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the whole state.

        Tools running on worker threads may ``set`` while this copies (a session write, a snapshot): the dict is
        copied first in one step (``dict.copy`` holds the GIL; keys are strings), as iterating the live dict raised
        "dictionary changed size during iteration". Stored values are never changed in place, only replaced.
        """
        return copy.deepcopy(self._state.copy()) if self._state else {}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AgentState):
            return self._state == other._state
        if isinstance(other, dict):
            return self._state == other
        return NotImplemented

    def __repr__(self) -> str:
        return f"AgentState({self._state!r})"


def _check_key(key: Any) -> None:
    # Blank keys too, as Strands: "  " is a key nobody means, and sessions store state by key.
    if not isinstance(key, str) or not key.strip():
        raise ValueError(f"state key must be a non-blank string, got {key!r}")
