"""The Ray runtime: agents, agent hosts and sandboxes in Ray actors.

Importing this package does not import Ray; each name below loads its module
(and Ray) on first use, so ``import ray_harness`` stays Ray-free.

* :func:`init` connects to a cluster (``address`` / ``RAY_ADDRESS``) or starts an
  embedded local Ray with small-machine defaults.
* :class:`RemoteAgent` is one agent in a dedicated, named async actor
  (``ray_harness:agent:<name>``) with the ``Agent`` call/stream/cancel surface.
* :class:`AgentPool` is a pre-started pool of async host actors
  (``ray_harness:host:<i>``), each serving hundreds of concurrent agent runs.
* :class:`RunHandle` broadcasts a cancel to every actor/slot of a run at once.
* :class:`RemoteSandbox` serves any ``Sandbox`` from its own actor
  (``ray_harness:sandbox:<name>``).
* Graphs and swarms (``runtime="ray"``) run their orchestration in an actor
  per instance (``ray_harness:graph:<id>`` / ``ray_harness:swarm:<id>``), see
  :mod:`ray_harness.runtime._orchestrator`.
* :func:`shutdown` kills this driver's orchestrator actors and disconnects.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = (
    "DEFAULT_NAMESPACE",
    "AgentPool",
    "FileAgentStore",
    "RemoteAgent",
    "RayRuntime",
    "RemoteSandbox",
    "RunHandle",
    "init",
    "is_initialized",
    "shutdown",
)

_LAZY = {
    "DEFAULT_NAMESPACE": "ray_harness.runtime._cluster",
    "init": "ray_harness.runtime._cluster",
    "is_initialized": "ray_harness.runtime._cluster",
    "FileAgentStore": "ray_harness.runtime._store",
    "RemoteAgent": "ray_harness.runtime.remote_agent",
    "AgentPool": "ray_harness.runtime.pool",
    "RunHandle": "ray_harness.runtime._cancel",
    "RemoteSandbox": "ray_harness.runtime.sandbox",
    "RayRuntime": "ray_harness.runtime.multiagent",
}


def shutdown() -> None:
    """Kill the orchestrator actors this process created, then disconnect (an embedded Ray stops with it)."""
    orchestrators = sys.modules.get("ray_harness.runtime._orchestrator")
    if orchestrators is not None:  # never imported: no orchestrator actor was created
        orchestrators.shutdown_all()
    from ray_harness.runtime._cluster import shutdown as disconnect

    disconnect()


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ray_harness.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
