"""ray_harness: a model-driven agent harness that stays under control and scales on Ray.

Importing this package never imports Ray; the Ray runtime lives in
:mod:`ray_harness.runtime` and is imported on demand.
"""

from __future__ import annotations

import importlib
from typing import Any

from ray_harness import _runtimes
from ray_harness._version import __version__
from ray_harness.agent.agent import Agent
from ray_harness.agent.limits import Limits
from ray_harness.agent.result import AgentResult
from ray_harness.hooks.registry import HookOrder, HookProvider, HookRegistry
from ray_harness.interrupts import Interrupt
from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import tool

__all__ = [
    "Agent",
    "AgentResult",
    "Graph",
    "GraphBuilder",
    "HookOrder",
    "HookProvider",
    "HookRegistry",
    "Interrupt",
    "Limits",
    "MultiAgentResult",
    "NodeResult",
    "Status",
    "Swarm",
    "ToolContext",
    "__version__",
    "tool",
]

def _ray_node_runner() -> Any:
    """``runtime="ray"``: the package root is the one place that maps the name to the Ray runtime."""
    try:
        runner_class = importlib.import_module("ray_harness.runtime.multiagent").RayNodeRunner
    except (ImportError, AttributeError) as error:
        raise ImportError(
            "runtime='ray' needs ray_harness.runtime.multiagent.RayNodeRunner, which could not be imported "
            f"({error}). Install ray_harness with Ray support, or use runtime='local'."
        ) from error
    return runner_class()


_runtimes.register("ray", _ray_node_runner)

_MULTIAGENT = {"Graph", "GraphBuilder", "MultiAgentResult", "NodeResult", "Status", "Swarm"}
# Names Strands exports from its package root, where a switched `from strands import X` looks for them (not in
# __all__: the contract's top level stays what API.md lists).
_STRANDS_ROOT = {
    "AgentBase": "ray_harness.agent.base",
    "ModelRetryStrategy": "ray_harness.agent.retry",
    "InterventionHandler": "ray_harness.interventions",
    "Sandbox": "ray_harness.sandbox",
    "PosixShellSandbox": "ray_harness.sandbox",
    "SandboxTimeoutError": "ray_harness.sandbox",
    "SandboxPathNotFoundError": "ray_harness.sandbox",
    "Snapshot": "ray_harness.agent.field_snapshot",
    "Plugin": "ray_harness.plugins",
    "MultiAgentPlugin": "ray_harness.plugins",
    "BackgroundTasksConfig": "ray_harness.background_tasks",
}


def __getattr__(name: str) -> Any:
    # Multi-agent classes load on first use: they are heavier and most scripts use one agent.
    if name in _MULTIAGENT:
        return getattr(importlib.import_module("ray_harness.multiagent"), name)
    if name in _STRANDS_ROOT:
        return getattr(importlib.import_module(_STRANDS_ROOT[name]), name)
    raise AttributeError(f"module 'ray_harness' has no attribute {name!r}")
