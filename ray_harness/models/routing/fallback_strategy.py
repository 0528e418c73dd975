"""``FallbackStrategy``, the default: declaration order, skipping what failed since the last success."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray_harness.models.routing.strategy import RoutingContext, attempts_since_success

if TYPE_CHECKING:
    from ray_harness.models.routing.router import RoutingCandidate

__all__ = ("FallbackStrategy",)


class FallbackStrategy:
    """The candidate with the fewest failures among those not tried since the last success (ties: declared first).

    With no failures behind it that is the first candidate, so ``ModelRouter([a, b])`` is ordered failover. A
    success clears the failures of the candidate that succeeded and makes every candidate eligible again; the
    others keep their count, so a model that keeps failing sinks below healthier ones. ``None`` once every
    candidate was tried since the last success.
    """

    async def select(self, context: RoutingContext, **kwargs: Any) -> RoutingCandidate | None:
        """The least-failed candidate not tried since the last success, or ``None``."""
        failures: dict[int, int] = {}
        for attempt in context.attempts:
            key = id(attempt.candidate)
            if attempt.exception is None:
                failures.pop(key, None)
            else:
                failures[key] = failures.get(key, 0) + 1
        tried = {id(attempt.candidate) for attempt in attempts_since_success(context.attempts)}
        eligible = [candidate for candidate in context.candidates if id(candidate) not in tried]
        if not eligible:
            return None
        return min(eligible, key=lambda candidate: failures.get(id(candidate), 0))  # min keeps the first of ties
