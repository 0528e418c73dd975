"""The host pool graphs and swarms share by default (one per Ray namespace, started on first use).

Host actors cost ≈1 s and ≈50 MB each, so every ``runtime="ray"`` graph and
swarm of a driver places its agent nodes on the same pre-started
:class:`~ray_harness.runtime.AgentPool`. The pool's hosts are named
``ray_harness:host:<i>`` and shared with other pools of the namespace; when one
of them is gone (another driver shut its pool down, Ray restarted) the next
invocation builds a fresh pool instead of failing on a dead handle.

**Orchestration hosts.** Graph/Swarm orchestrations invoked from a driver run on
their own small pool of the same host class, ``ray_harness:orchestrator:<i>``
(``RAY_HARNESS_ORCHESTRATION_HOSTS``, default 1), pre-started with the node pool:
an orchestration never sends a node to its own host. (A Ray actor that consumes
a streaming generator of its own methods can wait forever for its next item,
reproduced on Ray 2.60; so the orchestration and its agent nodes live in
different processes.) An orchestration host attaches to the driver's node pool:
the request names its hosts' actor ids (``OrchestratorRequest.pool_hosts``, :func:`pool_for_call`), so the
host's check is a comparison, not a GCS look-up.

**Checks.** A driver checks a pool's hosts (a GCS look-up each) when it asks for the pool with ``check``;
a Graph/Swarm object does so at most every few seconds (see ``runtime._orchestrator``).
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from typing import Any

import ray

from ray_harness.runtime._cluster import current_namespace, ensure_initialized
from ray_harness.runtime._host import ORCHESTRATION_HOST_PREFIX
from ray_harness.runtime.pool import AgentPool, start_pools

__all__ = ("ORCHESTRATION_HOSTS_ENV", "POOL_SIZE_ENV", "default_pool", "default_pool_size", "orchestration_pool",
           "pool_for_call", "pool_is_alive", "reset_pool_for_call", "shipped_pool_ready")

POOL_SIZE_ENV = "RAY_HARNESS_POOL_SIZE"
ORCHESTRATION_HOSTS_ENV = "RAY_HARNESS_ORCHESTRATION_HOSTS"
_MAX_DEFAULT_SIZE = 8
_pools: dict[tuple[str, int], AgentPool] = {}
_orchestration_pools: dict[str, AgentPool] = {}
_guard = threading.Lock()
_CALL_HOSTS: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("ray_harness_pool_hosts",
                                                                                   default=None)
_shipped: dict[tuple[str, int], tuple[str, ...]] = {}  # (namespace, size) -> the driver's host ids it was built for


def pool_for_call(hosts: tuple[str, ...] | None) -> contextvars.Token[tuple[str, ...] | None]:
    """Within this context (and tasks started in it) the default pool is the driver's, whose hosts' ids these are."""
    return _CALL_HOSTS.set(hosts)


def reset_pool_for_call(token: contextvars.Token[tuple[str, ...] | None]) -> None:
    """Undo :func:`pool_for_call`."""
    _CALL_HOSTS.reset(token)


def default_pool_size() -> int:
    """``RAY_HARNESS_POOL_SIZE``, else one host per CPU of the cluster (2 to 8): CPU-bound tools need processes.

    In an orchestration shipped by a driver: the driver's size.
    """
    shipped = _CALL_HOSTS.get()
    if shipped is not None:
        return len(shipped)
    configured = os.environ.get(POOL_SIZE_ENV)
    if configured:
        try:
            size = int(configured)
        except ValueError:
            raise ValueError(f"{POOL_SIZE_ENV} must be a positive int, got {configured!r}") from None
        if size < 1:
            raise ValueError(f"{POOL_SIZE_ENV} must be a positive int, got {configured!r}")
        return size
    return max(2, min(_MAX_DEFAULT_SIZE, _cluster_cpus()))


_CPUS_TTL_S = 5.0
"""How long the cluster's CPU count is reused: asking the GCS costs about a millisecond, at every invocation."""
_cpus: list[tuple[float, int]] = []


def _cluster_cpus() -> int:
    """The cluster's CPUs, as of at most :data:`_CPUS_TTL_S` seconds ago (a node that joins counts after that)."""
    now = time.monotonic()
    if _cpus and now - _cpus[0][0] < _CPUS_TTL_S:
        return _cpus[0][1]
    cpus = int(ray.cluster_resources().get("CPU", 2))  # type: ignore[no-untyped-call]
    _cpus[:] = [(now, cpus)]
    return cpus


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
    """Return the shared pool of this driver's namespace; starts Ray (embedded) and the hosts on first use.

    ``check``: look each host up first (a GCS look-up each) and start a new pool if one is gone. In an
    orchestration shipped by a driver (:func:`pool_for_call`) the check is a comparison with the driver's hosts.
    """
    ensure_initialized()
    namespace = current_namespace()
    size = default_pool_size()
    expected = _CALL_HOSTS.get()
    key = (namespace, size)
    with _guard:
        pool = _pools.get(key)
        if expected is not None:
            started = pool is None or (pool.host_ids != expected and _shipped.get(key) != expected)
        else:
            started = pool is None or (check and not pool_is_alive(pool))
        if started:
            in_driver = ray.get_runtime_context().get_actor_id() is None
            node_config: dict[str, Any] = {"size": size, "max_restarts": -1}  # hosts come back after a crash
            orchestration = _orchestration_pools.get(namespace) if in_driver else None
            if in_driver and (orchestration is None or not pool_is_alive(orchestration)):
                # A driver's pool comes with its orchestration hosts (a new Graph/Swarm starts none), started
                # with the node hosts so that their processes start together; theirs first: a run goes there first.
                orchestration, pool = start_pools(_orchestration_config(), node_config)
                _orchestration_pools[namespace] = orchestration
            else:
                pool = AgentPool(**node_config)
            _pools[key] = pool
            if expected is not None:
                _shipped[key] = expected  # attached by name: not built again for the same driver pool
    assert pool is not None
    return pool


def shipped_pool_ready(hosts: tuple[str, ...]) -> bool:
    """Whether :func:`default_pool` under ``pool_for_call(hosts)`` returns at once (no blocking attach first)."""
    key = (current_namespace(), len(hosts))
    pool = _pools.get(key)
    return pool is not None and (pool.host_ids == hosts or _shipped.get(key) == hosts)


def orchestration_hosts() -> int:
    """``RAY_HARNESS_ORCHESTRATION_HOSTS``, else 1 (orchestrations wait on their nodes: I/O-bound)."""
    configured = os.environ.get(ORCHESTRATION_HOSTS_ENV)
    if not configured:
        return 1
    try:
        size = int(configured)
    except ValueError:
        size = 0
    if size < 1:
        raise ValueError(f"{ORCHESTRATION_HOSTS_ENV} must be a positive int, got {configured!r}")
    return size


def orchestration_pool(*, check: bool = True) -> AgentPool:
    """Return the orchestration hosts of this driver's namespace (``ray_harness:orchestrator:<i>``), started once."""
    ensure_initialized()
    namespace = current_namespace()
    with _guard:
        pool = _orchestration_pools.get(namespace)
        if pool is None or (check and not pool_is_alive(pool)):
            pool = _orchestration_pools[namespace] = AgentPool(**_orchestration_config())
        return pool


def _orchestration_config() -> dict[str, Any]:
    return {"size": orchestration_hosts(), "max_restarts": -1, "name_prefix": ORCHESTRATION_HOST_PREFIX}
