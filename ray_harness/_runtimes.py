"""The ``runtime=`` names Graph and Swarm accept, and what each one builds.

A registry, so the multi-agent core never imports a runtime by name: ``"local"`` is registered by
:mod:`ray_harness.multiagent.node_runner`, ``"ray"`` by the package root (:mod:`ray_harness`), which
imports :mod:`ray_harness.runtime` only when a ``runtime="ray"`` Graph/Swarm is built. A runtime
object (anything with ``node_runner()``, e.g. ``ray_harness.runtime.RayRuntime(pool=...)``) is
used as given.

It also holds :data:`EventFilter`, the one word the multi-agent core and the runtime's wire share about node
events (public as ``ray_harness.multiagent.node_runner.EventFilter``): here, a Ray host imports it without the
multi-agent package, which only orchestration requests need.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

__all__ = ("EventFilter", "node_runner", "register")

EventFilter = Literal["all", "agent", "result"]
"""Which events a caller wants from a node or an invocation, stated once by the caller:

* ``"all"``: every event (for an agent also the raw ``model_event`` provider chunks);
* ``"agent"``: every event but the raw provider chunks (``text_delta`` events carry the text);
* ``"result"``: only what the outcome needs (the result; an orchestrator also reports node interrupts): the
  callee runs quiet and does not even produce the other events.
"""

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
