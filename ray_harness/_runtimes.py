"""The ``runtime=`` names Graph and Swarm accept, and what each one builds.

A registry, so the multi-agent core never imports a runtime by name: ``"local"`` is registered by
:mod:`ray_harness.multiagent.node_runner`, ``"ray"`` by the package root (:mod:`ray_harness`), which
imports :mod:`ray_harness.runtime` only when a ``runtime="ray"`` Graph/Swarm is built. A runtime
object (anything with ``node_runner()``, e.g. ``ray_harness.runtime.RayRuntime(pool=...)``) is
used as given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ("node_runner", "register")

_FACTORIES: dict[str, Callable[[], Any]] = {}


def register(name: str, factory: Callable[[], Any]) -> None:
    """Make ``runtime=name`` build its node runner with ``factory()``."""
    _FACTORIES[name] = factory


def node_runner(runtime: Any) -> Any:
    """The node runner for ``runtime`` (a registered name or a runtime object)."""
    if isinstance(runtime, str):
        factory = _FACTORIES.get(runtime)
        if factory is None:
            names = " or ".join(repr(name) for name in sorted(_FACTORIES))
            raise ValueError(f"runtime must be {names} (or a runtime object), got {runtime!r}")
        return factory()
    build = getattr(runtime, "node_runner", None)
    if not callable(build):
        raise TypeError(f"runtime must be a name or an object with node_runner(), got {type(runtime).__name__}")
    return build()
