"""Provider rate limits: one token bucket per model key, shared cluster-wide when Ray runs.

``model.rate_limit = RateLimit(requests_per_minute=600, tokens_per_minute=400_000)`` (or
``rate_limit=`` to a provider, or ``evaluate(..., rate_limits={"anthropic:claude-sonnet-4-5": ...})``)
makes every model call of that model wait for a permit first. The key of a provider model is
``"<provider>:<model_id>"``; a registered key may also be the model spec that picked the model
(``"openai-compatible:http://host/v1#m"`` limits ``"openai:m"``). With Ray initialized the bucket is one small named actor per key in the
namespace, so every host and every driver draws from the same quota; without Ray it lives in this process.

A bucket holds at most one second of its rate (minimum 1), so a burst never exceeds one second's worth.
A throttled call (``ModelThrottledException``, HTTP 429) halves the bucket's rate; each successful call
adds back a twentieth of the configured rate (AIMD), up to the configured rate.

Limits registered by key (``evaluate(rate_limits=)``) follow the work: the runtime passes them to every
actor it starts from a process that has them (pool hosts, ``RemoteAgent`` actors, orchestrators) in
``RAY_HARNESS_RATE_LIMITS``, read on first use; so a row's sub-agent in another process is limited too,
and a host that Ray restarts keeps its limits.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ray_harness.types.exceptions import ModelThrottledException

__all__ = ("ENV_VAR", "RateLimit", "TokenBucket", "checked_rate_limit", "forwarded_rate_limits", "model_key",
           "rate_limited", "register_rate_limits", "registered_rate_limits")

_MIN_FACTOR = 1 / 64
_INCREASE = 1 / 20


@dataclass(frozen=True)
class RateLimit:
    """Requests and/or tokens per minute allowed for one model key (cluster-wide).

    Args:
        requests_per_minute: Model calls per minute.
        tokens_per_minute: Tokens (input estimated before the call, corrected by the reported total) per minute.
        key: Bucket key; default: the model's ``"<provider>:<model_id>"`` (or the key it is registered under).

    Raises:
        ValueError: A rate that is not a positive finite number, or neither rate given; names the field.
    """

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"RateLimit.{name} must be a positive number, got {value!r}")
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError("RateLimit needs requests_per_minute or tokens_per_minute")
        if self.key is not None and (not isinstance(self.key, str) or not self.key):
            raise ValueError(f"RateLimit.key must be a non-empty string, got {self.key!r}")


class _Dimension:
    """One bucket (requests or tokens): refills at ``rate`` per second, holds at most one second of it."""

    def __init__(self, per_second: float, now: float) -> None:
        self.configured = per_second
        self.rate = per_second
        self.level = self.capacity
        self.updated = now

    @property
    def capacity(self) -> float:
        return max(1.0, self.rate)

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + self.rate * (now - self.updated))
        self.updated = now

    def reserve(self, amount: float) -> float:
        """Take ``amount`` (the level may go below zero: later callers queue behind) and return the wait."""
        self.level -= amount
        return 0.0 if self.level >= 0 else -self.level / self.rate


class TokenBucket:
    """The bucket behind a :class:`RateLimit`: reservations, corrections, AIMD (pure; the clock is injectable)."""

    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.limit = limit
        self.factor = 1.0
        now = clock()
        self._requests = None if limit.requests_per_minute is None else _Dimension(limit.requests_per_minute / 60, now)
        self._tokens = None if limit.tokens_per_minute is None else _Dimension(limit.tokens_per_minute / 60, now)

    def _dimensions(self) -> list[_Dimension]:
        return [d for d in (self._requests, self._tokens) if d is not None]

    def reserve(self, tokens: float = 0.0) -> float:
        """Reserve one request and ``tokens``; returns the seconds the caller waits before its call."""
        now = self._clock()
        waits = [0.0]
        if self._requests is not None:
            self._requests.refill(now)
            waits.append(self._requests.reserve(1.0))
        if self._tokens is not None:
            self._tokens.refill(now)
            waits.append(self._tokens.reserve(min(tokens, self._tokens.capacity)))
        return max(waits)

    def settle(self, estimated: float, actual: float) -> None:
        """The call reported ``actual`` tokens where ``estimated`` were reserved."""
        if self._tokens is not None and actual > 0:
            self._tokens.refill(self._clock())
            self._tokens.level -= actual - min(estimated, self._tokens.capacity)

    def throttled(self) -> None:
        """The provider said too much: halve the rate, and nothing is left to burst."""
        self._set_factor(max(_MIN_FACTOR, self.factor / 2))
        for dimension in self._dimensions():
            dimension.level = min(dimension.level, 0.0)

    def succeeded(self) -> None:
        """A call went through: raise the rate a step back towards the configured one (AIMD)."""
        self._set_factor(min(1.0, self.factor + _INCREASE))

    def _set_factor(self, factor: float) -> None:
        now = self._clock()
        self.factor = factor
        for dimension in self._dimensions():
            dimension.refill(now)
            dimension.rate = dimension.configured * factor
            dimension.level = min(dimension.level, dimension.capacity)

    def configure(self, limit: RateLimit) -> None:
        """Switch to ``limit`` (a changed configuration), keeping the current throttling factor."""
        if limit != self.limit:
            factor = self.factor
            self.__init__(limit, self._clock)  # type: ignore[misc]
            self._set_factor(factor)

    def state(self) -> dict[str, Any]:
        """The throttling factor and the rates in force now (per minute), for status displays."""
        return {"factor": self.factor,
                "requests_per_minute": None if self._requests is None else self._requests.rate * 60,
                "tokens_per_minute": None if self._tokens is None else self._tokens.rate * 60}


def checked_rate_limit(limit: Any) -> RateLimit | None:
    """A provider's ``rate_limit=`` argument, checked."""
    if limit is not None and not isinstance(limit, RateLimit):
        raise ValueError(f"rate_limit must be a RateLimit, got {type(limit).__name__}")
    return limit


# -- which models are limited -------------------------------------------------------------------------------

ENV_VAR = "RAY_HARNESS_RATE_LIMITS"
_REGISTERED: dict[str, RateLimit] = {}
_FROM_ENV = {"read": False}


def register_rate_limits(limits: Mapping[str, RateLimit]) -> None:
    """Limit models by key in this process (``evaluate(rate_limits=)`` does it in every host)."""
    _read_env()
    for key, limit in limits.items():
        if not isinstance(key, str) or ":" not in key:
            raise ValueError(f"rate_limits key must look like '<provider>:<model_id>', got {key!r}")
        if not isinstance(limit, RateLimit):
            raise ValueError(f"rate_limits[{key!r}] must be a RateLimit, got {type(limit).__name__}")
    _REGISTERED.update({_spec_key(key): limit for key, limit in limits.items()})


def _spec_key(key: str) -> str:
    """The model key of ``key`` when it is a model spec (``"openai-compatible:<url>#m"``, ``"anthropic:m?..."``).

    A limit keyed by the same string that picked the model (``Agent(model=spec)``) then limits that model, rather
    than a key no model has (its key is ``"openai:m"``, ``"anthropic:m"``). Other keys stay as they are.
    """
    from ray_harness.models.selection import from_string
    from ray_harness.types.exceptions import ModelConfigurationError

    try:
        return model_key(from_string(key))
    except ModelConfigurationError:
        return key


def registered_rate_limits() -> dict[str, RateLimit]:
    """The rate limits registered in this process (or inherited through ``RAY_HARNESS_RATE_LIMITS``), by model key."""
    _read_env()
    return dict(_REGISTERED)


def forwarded_rate_limits() -> str | None:
    """This process's registered limits as the value of :data:`ENV_VAR` for an actor it starts (or None)."""
    limits = registered_rate_limits()
    if not limits:
        return None
    return json.dumps({key: {"requests_per_minute": limit.requests_per_minute,
                             "tokens_per_minute": limit.tokens_per_minute, "key": limit.key}
                       for key, limit in sorted(limits.items())}, sort_keys=True)


def parse_forwarded(value: str, source: str) -> dict[str, RateLimit]:
    """Read limits in the form of :func:`forwarded_rate_limits` (``source`` names where they came from)."""
    try:
        return {key: RateLimit(**fields) for key, fields in json.loads(value).items()}
    except (ValueError, TypeError, AttributeError) as error:
        raise ValueError(f"{source} is not a valid mapping of rate limits: {error}") from None


def _read_env() -> None:
    """Once per process: the limits the process that started this actor forwarded (see the module docstring)."""
    if _FROM_ENV["read"]:
        return
    _FROM_ENV["read"] = True
    value = os.environ.get(ENV_VAR)
    if not value:
        return
    for key, limit in parse_forwarded(value, ENV_VAR).items():
        _REGISTERED.setdefault(key, limit)  # what this process registers itself wins


def model_key(model: Any) -> str:
    """``"<provider>:<model_id>"`` (the provider's name in lower case, else the model class's name)."""
    provider = str(getattr(model, "provider", None) or type(model).__name__).lower()
    try:
        model_id = model.model_id
    except Exception:
        model_id = type(model).__name__
    return f"{provider}:{model_id}"


def _limit_of(model: Any) -> tuple[str, RateLimit] | None:
    if not _FROM_ENV["read"]:
        _read_env()
    limit = getattr(model, "rate_limit", None)
    if limit is None and not _REGISTERED:
        return None  # the common case costs one attribute lookup
    key = model_key(model)
    if limit is None:
        limit = _REGISTERED.get(key)
        if limit is None:
            return None
    if not isinstance(limit, RateLimit):
        raise ValueError(f"model.rate_limit must be a RateLimit, got {type(limit).__name__}")
    return limit.key or key, limit


# -- where the bucket lives -------------------------------------------------------------------------------------

_LOCAL: dict[str, TokenBucket] = {}
_LOCAL_LOCK = threading.Lock()


class _LocalGate:
    def __init__(self, key: str, limit: RateLimit) -> None:
        with _LOCAL_LOCK:
            bucket = _LOCAL.get(key)
            if bucket is None:
                bucket = _LOCAL[key] = TokenBucket(limit)
            else:
                bucket.configure(limit)
        self._bucket = bucket

    async def reserve(self, tokens: float) -> float:
        with _LOCAL_LOCK:
            return self._bucket.reserve(tokens)

    def done(self, estimated: float, actual: float, throttled: bool) -> None:
        with _LOCAL_LOCK:
            self._bucket.settle(estimated, actual)
            if throttled:
                self._bucket.throttled()
            else:
                self._bucket.succeeded()


def _gate(key: str, limit: RateLimit) -> Any:
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        from ray_harness.runtime._rate_limit import ClusterGate

        return ClusterGate(key, limit)
    return _LocalGate(key, limit)


def rate_limited(model: Any, stream: AsyncGenerator[Any, None], estimated_tokens: Callable[[], int]
                 ) -> AsyncGenerator[Any, None]:
    """``stream`` (a model call not started yet), made to wait for its model's permit first.

    Returns ``stream`` itself when the model has no rate limit.
    """
    found = _limit_of(model)
    if found is None:
        return stream
    return _limited(_gate(*found), stream, estimated_tokens)


async def _limited(gate: Any, stream: AsyncGenerator[Any, None], estimated_tokens: Callable[[], int]
                   ) -> AsyncGenerator[Any, None]:
    estimated = float(estimated_tokens())
    wait = await gate.reserve(estimated)
    if wait > 0:
        await asyncio.sleep(wait)
    actual = 0.0
    try:
        async for event in stream:
            usage = event.get("metadata", {}).get("usage") if isinstance(event, dict) else None
            if usage:
                actual = float(usage.get("totalTokens", 0) or 0)
            yield event
    except ModelThrottledException:
        gate.done(estimated, actual, True)
        raise
    finally:
        await stream.aclose()
    gate.done(estimated, actual, False)
