"""The host pool graphs and swarms share by default (one per Ray namespace, started on first use).

Host actors cost ≈1 s and ≈50 MB each, so every ``runtime="ray"`` graph and
swarm of a driver places its agent nodes on the same pre-started
:class:`~ray_harness.runtime.AgentPool`. The pool's hosts are named
``ray_harness:host:<i>`` and shared with other pools of the namespace; when one
of them is gone (another driver shut its pool down, Ray restarted) the next
invocation builds a fresh pool instead of failing on a dead handle.
"""

from __future__ import annotations

import os
import threading

import ray

from ray_harness.runtime._cluster import current_namespace, ensure_initialized
from ray_harness.runtime.pool import AgentPool

__all__ = ("POOL_SIZE_ENV", "default_pool", "default_pool_size", "pool_is_alive")

POOL_SIZE_ENV = "RAY_HARNESS_POOL_SIZE"
_MAX_DEFAULT_SIZE = 8
_pools: dict[str, AgentPool] = {}
_guard = threading.Lock()


def default_pool_size() -> int:
    """``RAY_HARNESS_POOL_SIZE``, else one host per CPU of the cluster (2 to 8): CPU-bound tools need processes."""
    configured = os.environ.get(POOL_SIZE_ENV)
    if configured:
        try:
            size = int(configured)
        except ValueError:
            raise ValueError(f"{POOL_SIZE_ENV} must be a positive int, got {configured!r}") from None
        if size < 1:
            raise ValueError(f"{POOL_SIZE_ENV} must be a positive int, got {configured!r}")
        return size
    cpus = int(ray.cluster_resources().get("CPU", 2))  # type: ignore[no-untyped-call]
    return max(2, min(_MAX_DEFAULT_SIZE, cpus))


def pool_is_alive(pool: AgentPool) -> bool:
    """Whether every host of ``pool`` is still the live actor registered under its name (a GCS lookup each)."""
    for name, host in zip(pool.host_names, pool.hosts, strict=True):
        try:
            current = ray.get_actor(name, namespace=pool.namespace)
        except ValueError:
            return False
        if current._actor_id != host._actor_id:
            return False
    return True


def default_pool(*, check: bool = True) -> AgentPool:
    """Return the shared pool of this driver's namespace; starts Ray (embedded) and the hosts on first use."""
    ensure_initialized()
    namespace = current_namespace()
    with _guard:
        pool = _pools.get(namespace)
        if pool is None or (check and not pool_is_alive(pool)):
            pool = _pools[namespace] = AgentPool(size=default_pool_size(), max_restarts=-1)  # hosts come back after a crash
        return pool
