"""Per-invocation budgets."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

__all__ = ("Limits", "check_limits", "validate_limits")


class Limits(TypedDict, total=False):
    """Soft caps checked at the top of each cycle; priority turns > total_tokens > output_tokens > cost_usd."""

    turns: int
    output_tokens: int
    total_tokens: int
    cost_usd: float


_INT_KEYS = ("turns", "output_tokens", "total_tokens")


def validate_limits(limits: Any) -> Limits | None:
    """Raise ``TypeError`` for anything but a mapping of known keys to positive numbers."""
    if limits is None:
        return None
    if not isinstance(limits, dict):
        raise TypeError(f"limits must be a dict (Limits), got {type(limits).__name__}")
    for key, value in limits.items():
        if key in _INT_KEYS:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TypeError(f"limits[{key!r}] must be a positive int, got {value!r}")
        elif key == "cost_usd":
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise TypeError(f"limits['cost_usd'] must be a positive number, got {value!r}")
        else:
            raise TypeError(f"unknown limit {key!r}; expected one of turns, output_tokens, total_tokens, cost_usd")
    return limits  # type: ignore[return-value]


def check_limits(limits: Limits | None, cycles: int, usage: dict[str, int], cost_usd: float) -> str | None:
    """The stop reason of the first limit reached (``"limit_turns"``, ``"limit_total_tokens"``, ...), or None.

    Args:
        limits: The limits in force (``None``: none).
        cycles: Cycles run so far in this invocation.
        usage: Tokens used so far in this invocation.
        cost_usd: Cost so far in this invocation.
    """
    if not limits:
        return None
    turns = limits.get("turns")
    if turns is not None and cycles >= turns:
        return "limit_turns"
    total = limits.get("total_tokens")
    if total is not None and usage.get("totalTokens", 0) >= total:
        return "limit_total_tokens"
    output = limits.get("output_tokens")
    if output is not None and usage.get("outputTokens", 0) >= output:
        return "limit_output_tokens"
    cost = limits.get("cost_usd")
    if cost is not None and cost_usd >= cost:
        return "limit_cost_usd"
    return None
