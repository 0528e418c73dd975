"""Where a ``runtime="ray"`` Graph/Swarm places its work, as stated by the actor that runs it.

The core never asks which process it is in. Instead the runtime's actors say, for the calls they
serve, what an orchestration started there may do (a context variable, so it follows the call into
its tasks and nowhere else):

* ``"driver"`` (default, user code): the orchestration runs on an orchestration host and its agent
  nodes on the host pool.
* ``"orchestrator"`` (set by the orchestration host around the run it was sent): run the
  orchestration here, agent nodes on the pool; nested Graph/Swarm nodes run here too.
* ``"in_process"`` (set by host and agent actors around each invocation: an evaluation row's graph,
  a tool that runs a graph): everything in this process, as ``runtime="local"`` — fanning out again
  from a host could wait on the host's own event loop.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Literal

__all__ = ("Placement", "current_placement", "placed")

Placement = Literal["driver", "orchestrator", "in_process"]

_PLACEMENT: ContextVar[Placement] = ContextVar("ray_harness_placement", default="driver")


def current_placement() -> Placement:
    return _PLACEMENT.get()


def placed(where: Placement) -> _Placed:
    """Within this block (and tasks started in it), orchestrations place their work as ``where`` says."""
    return _Placed(where)


class _Placed:
    """:func:`placed`'s context manager: a class, not a generator (entered at every invocation on a host)."""

    __slots__ = ("_token", "_where")

    def __init__(self, where: Placement) -> None:
        self._where = where

    def __enter__(self) -> None:
        self._token = _PLACEMENT.set(self._where)

    def __exit__(self, *exc_info: object) -> None:
        # An async generator may be finalized in another context; there the variable is not ours to reset.
        try:
            _PLACEMENT.reset(self._token)
        except ValueError:
            pass
