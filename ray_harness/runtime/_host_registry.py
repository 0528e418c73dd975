"""The host actors this process holds, shared by every ``AgentPool`` of the process.

A pool does not release its hosts when it is collected: Ray destroys a named actor asynchronously once its
last handle is gone, and the next pool's by-name lookup would get the dying actor (every row sent to it
fails). Live hosts are reused instead (warm, no start-up cost); ``AgentPool.shutdown()`` retires them, and a
later pool waits until a retired actor is gone before it creates a new one under its name.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import ray

from ray_harness.runtime._host import host_class
from ray_harness.types.exceptions import RemoteActorError

__all__ = ("acquire_host", "forget_host", "retirements")

_GONE_TIMEOUT_S = 60.0

_LIVE_HOSTS: dict[tuple[str, str, str], Any] = {}
_RETIRED_HOSTS: dict[tuple[str, str, str], Any] = {}
_HOSTS_LOCK = threading.Lock()
_retired_count = [0]  # hosts this process retired so far: a pool checked before may hold one of them


def retirements() -> int:
    """How many hosts this process has retired (``AgentPool.shutdown()``): a change means re-check cached pools."""
    return _retired_count[0]


def _host_key(namespace: str, name: str) -> tuple[str, str, str]:
    return ray.get_runtime_context().get_job_id(), namespace, name


def acquire_host(namespace: str, name: str, index: int, options: dict[str, Any]) -> Any:
    """Return the live handle of host ``name`` in this process, else a new (or same-named, reused) host actor."""
    key = _host_key(namespace, name)
    with _HOSTS_LOCK:
        live = _LIVE_HOSTS.get(key)
        current = None
        if live is not None:
            current = _registered(name, namespace)
            if current is not None and current._actor_id == live._actor_id:
                return live
            # Killed by another process (a driver's pool.shutdown() while a long-lived orchestration host
            # holds this handle): attach to whatever now holds the name (looked up just now), or start it again.
            del _LIVE_HOSTS[key]
        retired = _RETIRED_HOSTS.pop(key, None)
        if retired is not None:
            _wait_gone(name, namespace, retired)
            current = None
        handle = current if current is not None else host_class().options(name=name, **options).remote(index)
        _LIVE_HOSTS[key] = handle
        return handle


def forget_host(namespace: str, name: str, handle: Any, *, retired: bool) -> None:
    """Drop ``handle`` from the live hosts; ``retired``: it was killed, a new one waits until its name is free."""
    key = _host_key(namespace, name)
    with _HOSTS_LOCK:
        if _LIVE_HOSTS.get(key) is handle:
            del _LIVE_HOSTS[key]
        if retired:
            _RETIRED_HOSTS[key] = handle._actor_id
            _retired_count[0] += 1


def _registered(name: str, namespace: str) -> Any:
    """The actor registered under ``name`` now (a GCS lookup), else None."""
    try:
        return ray.get_actor(name, namespace=namespace)
    except ValueError:
        return None


def _wait_gone(name: str, namespace: str, actor_id: Any) -> None:
    """Until the actor ``actor_id`` no longer holds ``name`` (a killed actor frees its name within seconds)."""
    deadline = time.monotonic() + _GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            current = ray.get_actor(name, namespace=namespace)
        except ValueError:
            return
        if current._actor_id != actor_id:
            return
        time.sleep(0.05)
    raise RemoteActorError(f"host actor {name!r} was shut down but still holds its name after "
                           f"{_GONE_TIMEOUT_S:.0f} s", actor_name=name)


