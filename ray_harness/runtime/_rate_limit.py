"""The cluster-wide side of :mod:`ray_harness.models.rate_limit`: one small named actor per bucket key.

Every host, node actor and driver of a namespace that limits the same key draws from the actor named
``ray_harness:rate:<key>`` (detached: a bucket outlives the job that created it, so two jobs in a row share
one quota). A reservation is one actor call; the caller sleeps locally for the wait it is told, so the
actor never holds a caller. Reports after a call (tokens used, throttled or not) are fire-and-forget.
"""

from __future__ import annotations

import threading
from typing import Any

import ray

from ray_harness.models.rate_limit import RateLimit, TokenBucket
from ray_harness.runtime._cluster import current_namespace

__all__ = ("BUCKET_ACTOR_PREFIX", "ClusterGate", "bucket_actor")

BUCKET_ACTOR_PREFIX = "ray_harness:rate:"


class _BucketActor:
    def __init__(self, limit: RateLimit) -> None:
        self._bucket = TokenBucket(limit)

    def reserve(self, limit: RateLimit, tokens: float) -> float:
        self._bucket.configure(limit)
        return self._bucket.reserve(tokens)

    def done(self, estimated: float, actual: float, throttled: bool) -> None:
        self._bucket.settle(estimated, actual)
        if throttled:
            self._bucket.throttled()
        else:
            self._bucket.succeeded()

    def state(self) -> dict[str, Any]:
        return self._bucket.state()


_HANDLES: dict[tuple[str, str, str], Any] = {}
_LOCK = threading.Lock()


def bucket_actor(key: str, limit: RateLimit, namespace: str | None = None) -> Any:
    """Return the bucket actor of ``key`` in ``namespace`` (created on first use), cached per process."""
    namespace = namespace or current_namespace()
    cache_key = (ray.get_runtime_context().get_job_id(), namespace, key)
    with _LOCK:
        handle = _HANDLES.get(cache_key)
        if handle is None:
            # A sync actor: every method is a few arithmetic operations, and calls run one at a time.
            handle = ray.remote(_BucketActor).options(
                name=BUCKET_ACTOR_PREFIX + key, namespace=namespace, get_if_exists=True, lifetime="detached",
                num_cpus=0, max_restarts=-1, max_task_retries=-1).remote(limit)
            _HANDLES[cache_key] = handle
        return handle


class ClusterGate:
    def __init__(self, key: str, limit: RateLimit) -> None:
        self._limit = limit
        self._actor = bucket_actor(key, limit)

    async def reserve(self, tokens: float) -> float:
        return float(await self._actor.reserve.remote(self._limit, tokens))

    def done(self, estimated: float, actual: float, throttled: bool) -> None:
        self._actor.done.remote(estimated, actual, throttled)
