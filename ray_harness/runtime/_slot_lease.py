"""``SlotLease``: a driver's claim on one Graph/Swarm's node slots and resident orchestrator, released once.

Only the node runner built in the driver holds one (:class:`~ray_harness.runtime.multiagent.RayNodeRunner`; its
copies on orchestration hosts do not). It is released by ``shutdown()``, by a weakref finalizer when the
Graph/Swarm is garbage collected — the finalizer only queues it; a reaper thread sends the release, since
garbage collection can happen inside Ray's own code — and, for every lease of the process, by
:func:`release_all_slots` (``ray_harness.runtime.shutdown()``). It holds the pool, the slot prefix and the
orchestration host's client and key only, never the driver's objects: a lease outlives its Graph/Swarm in the
finalizer.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import weakref
from typing import Any

from ray_harness.runtime.pool import AgentPool

__all__ = ("SlotLease", "leases", "ray_is_connected", "release_all_slots", "release_later")

logger = logging.getLogger(__name__)


class SlotLease:
    """The driver's claim on one node runner's slots (``"<uid>/"`` on its pool's hosts); released once."""

    __slots__ = ("__weakref__", "orchestration", "pool", "prefix")

    def __init__(self, prefix: str, pool: AgentPool | None) -> None:
        self.prefix = prefix
        self.pool: AgentPool | None = None
        self.orchestration: tuple[Any, str] | None = None  # (host client, key) of the resident orchestrator
        if pool is not None:
            self.attach(pool)

    def attach(self, pool: AgentPool) -> None:
        """The slots live on ``pool``'s hosts (the reaper thread is started here, never in a finalizer)."""
        if self.pool is None:
            _start_reaper()
        self.pool = pool

    def attach_orchestration(self, host: Any, key: str) -> None:
        """The resident orchestrator is kept under ``key`` on ``host`` (an ActorClient); released with the slots."""
        if self.pool is None and self.orchestration is None:
            _start_reaper()
        self.orchestration = (host, key)

    def release(self) -> None:
        """Drop the resident orchestrator and the slots on every host of the pool (dead hosts skipped)."""
        if (self.pool is None and self.orchestration is None) or not ray_is_connected():
            return
        if self.orchestration is not None:
            host, key = self.orchestration
            try:  # fire and forget (a lost message leaves the copy to the idle timeout)
                host.submit("release_orchestrations", [key])
            except Exception as error:
                logger.debug("key=<%s>, error=<%s> | resident orchestrator not released", key, error)
        pool = self.pool
        if pool is None:
            return
        try:
            pool.release_slots_sync([self.prefix])
        except Exception as error:  # shutting down: a failed release leaves the slots to the idle timeout
            logger.debug("prefix=<%s>, error=<%s> | node slots not released", self.prefix, error)


leases: weakref.WeakSet[SlotLease] = weakref.WeakSet()

# A finalizer runs inside garbage collection, which can happen inside Ray's own code: it only queues the lease,
# a thread sends the release (as the orchestrator module does for its actors).
_doomed: queue.SimpleQueue[SlotLease] = queue.SimpleQueue()
_reaper: list[threading.Thread] = []
_reaper_guard = threading.Lock()


def release_later(lease: SlotLease) -> None:
    if lease.pool is not None or lease.orchestration is not None:  # else it never used a host
        _doomed.put(lease)  # SimpleQueue.put is safe in finalizers


def _start_reaper() -> None:
    with _reaper_guard:
        if not _reaper:
            thread = threading.Thread(target=_release_forever, name="ray_harness-slot-reaper", daemon=True)
            thread.start()
            _reaper.append(thread)


def _release_forever() -> None:
    while True:
        lease = _doomed.get()
        try:
            lease.release()
        except SystemExit:  # Ray ends a thread blocked in ray.get this way when this process disconnects
            return


def release_all_slots() -> None:
    """Release the node slots of every Graph/Swarm of this process (``ray_harness.runtime.shutdown()``).

    One message per host of each pool, naming every Graph/Swarm's prefix.
    """
    by_pool: dict[int, tuple[AgentPool, list[str]]] = {}
    by_host: dict[int, tuple[Any, list[str]]] = {}
    for lease in list(leases):
        if lease.pool is not None:
            by_pool.setdefault(id(lease.pool), (lease.pool, []))[1].append(lease.prefix)
        if lease.orchestration is not None:
            host, key = lease.orchestration
            by_host.setdefault(id(host), (host, []))[1].append(key)
    if not (by_pool or by_host) or not ray_is_connected():
        return
    for host, keys in by_host.values():  # the resident orchestrators, one message per orchestration host
        try:
            host.call_sync("release_orchestrations", keys, timeout=10.0)
        except Exception as error:
            logger.debug("error=<%s> | resident orchestrators not released", error)
    for pool, prefixes in by_pool.values():
        try:
            pool.release_slots_sync(prefixes)
        except Exception as error:
            logger.debug("error=<%s> | node slots not released", error)


def ray_is_connected() -> bool:
    """Whether this process is connected to Ray (a release after disconnecting has nowhere to go).

    Looked up, not imported: the reaper thread and finalizers call it at any time, also when ``import ray`` would
    fail or start importing Ray in a process that never used it.
    """
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())
