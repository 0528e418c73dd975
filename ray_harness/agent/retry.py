"""Retrying throttled model calls with exponential backoff."""

from __future__ import annotations

from dataclasses import dataclass, field

from ray_harness._clock import Clock, SystemClock
from ray_harness.types.exceptions import ModelThrottledException

__all__ = ("ModelRetryStrategy",)


@dataclass
class ModelRetryStrategy:
    """Retry ``ModelThrottledException`` (see :meth:`is_retryable`) up to ``max_attempts`` calls, doubling the delay.

    A provider's ``retry_after`` hint, when larger, wins over the computed delay (capped at ``max_delay``).
    """

    max_attempts: int = 6
    initial_delay: float = 4.0
    max_delay: float = 240.0
    clock: Clock = field(default_factory=SystemClock, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must be >= 0")

    def is_retryable(self, exception: Exception) -> bool:
        """Whether a failed call is retried: ``ModelThrottledException``. Override to widen or narrow it (as in Strands)."""
        return isinstance(exception, ModelThrottledException)

    def delay(self, attempt: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait before call number ``attempt + 1``, or None when out of attempts."""
        if attempt >= self.max_attempts:
            return None
        computed = min(self.initial_delay * (2 ** (attempt - 1)), self.max_delay)
        if retry_after is not None:
            computed = min(max(computed, retry_after), self.max_delay)
        return float(computed)
