"""``Orchestrations``: the Graph/Swarm runs one host process serves (``AgentHost.orchestrate``).

With ``runtime="ray"`` a Graph or Swarm invoked from a driver runs its orchestration (readiness, joins,
conditions, limits, failure policies, hooks, interrupts) in a slot of a pre-started orchestration host
(:mod:`ray_harness.runtime._orchestrator`): no actor is started per Graph/Swarm object. This module is the
host's half: one :class:`Orchestrations` per host process runs each shipped
:class:`~ray_harness.runtime._wire.OrchestratorRequest` under placement ``"orchestrator"`` (a per-call context
variable, so the host's agent calls keep theirs) and streams its events, session writes and end state back.

**Cancel** arrives on another thread (the host's control concurrency group) and is handed to the run's event
loop; a cancel that arrives before its run starts is remembered (bounded) and applied when it starts. An
:class:`AbortRequest` (the driver's caller stopped reading the run's stream) stops the run where it is, as closing
the stream does in one process, and the run still sends its end state.

**Resident copies.** A Graph/Swarm object's orchestrator stays here between its invocations
(:mod:`ray_harness.runtime._resident`): the first invocation ships it, later ones name it and send what changed in
the driver. :meth:`Orchestrations.release` drops copies by key prefix (with the object's node slots).

The run itself is a function given to :class:`Orchestrations` (:func:`ray_harness.runtime._orchestrator.run_request`
on a host), so the bookkeeping here is tested without Ray.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable
from typing import Any, Protocol

from ray_harness.runtime import _asyncgens as asyncgens
from ray_harness.runtime._early import EarlyCancels
from ray_harness.runtime._placement import placed
from ray_harness.runtime._resident import Residents
from ray_harness.runtime._wire import CancelRequest, OrchestratorRequest

__all__ = ("AbortRequest", "Orchestrations", "Run")


class AbortRequest(CancelRequest):
    """Stop runs the way closing their stream stops an in-process run (``aclose()``, the caller's task cancelled).

    Unlike a cancel (``graph.cancel()``: the running nodes end with their agents' cancelled results and the run
    ``CANCELLED``), the running nodes are stopped where they are (``CANCELLED``, their runs undone) and the run
    ends ``FAILED``; its end state is still sent, so the driver's objects show what ``runtime="local"`` shows. One
    that overtakes its run is applied as a cancel.
    """


class Run(Protocol):
    """What :class:`Orchestrations` needs of a running orchestrator: ``cancel()`` and ``abort()``."""

    def cancel(self) -> None:
        """Stop the run (every slot it involves)."""

    def abort(self) -> None:
        """Stop the run as closing its stream does (see :class:`AbortRequest`)."""


Starter = Callable[[OrchestratorRequest, Callable[[Run], None], Residents], AsyncGenerator[Any, None]]
"""Runs one request: calls ``started(run)`` once the run exists, then yields its wire items; takes and
keeps resident orchestrators in the :class:`~ray_harness.runtime._resident.Residents` given."""


class Orchestrations:
    """The orchestrations running in this process, by invocation id (see the module docstring).

    Args:
        start: Runs one request (see :data:`Starter`).
        residents: The orchestrators kept here between invocations (:mod:`ray_harness.runtime._resident`).

    """

    def __init__(self, start: Starter, residents: Residents | None = None) -> None:
        self._start = start
        self.residents = residents if residents is not None else Residents()
        self._runs: dict[str, tuple[Run, asyncio.AbstractEventLoop]] = {}
        self._early = EarlyCancels()
        self._guard = threading.Lock()  # cancel() comes from the control group's thread

    def running(self) -> list[str]:
        """The ids of the runs in progress."""
        with self._guard:
            return list(self._runs)

    async def stream(self, request: OrchestratorRequest) -> AsyncGenerator[Any, None]:
        """Run ``request`` under placement ``"orchestrator"``, yielding its wire items."""
        invocation_id = request.invocation_id
        loop = asyncio.get_running_loop()
        asyncgens.untrack_here()

        def started(run: Run) -> None:
            with self._guard:
                self._runs[invocation_id] = (run, loop)
                early = self._early.take(invocation_id)
            if early:
                # After the run's first step, once it holds its lock (cancel() needs it).
                loop.call_soon(run.cancel)

        try:
            # The run's steps (and the tasks it starts, which copy this context) run under "orchestrator".
            with placed("orchestrator"):
                async for item in self._start(request, started, self.residents):
                    yield item
        finally:
            with self._guard:
                self._runs.pop(invocation_id, None)

    def release(self, prefixes: list[str]) -> int:
        """Drop the resident orchestrators whose keys start with any of ``prefixes``; return how many."""
        return self.residents.release(prefixes)

    def cancel(self, request: CancelRequest) -> int:
        """Cancel (or abort, :class:`AbortRequest`) the request's runs (all when it names none) from any thread.

        Returns how many were running. Ids not running yet start cancelled.
        """
        found: list[tuple[Run, asyncio.AbstractEventLoop]] = []
        with self._guard:
            for invocation_id in request.invocation_ids or tuple(self._runs):
                entry = self._runs.get(invocation_id)
                if entry is None:
                    self._early.remember(invocation_id)
                else:
                    found.append(entry)
        abort = isinstance(request, AbortRequest)
        for run, loop in found:
            try:
                loop.call_soon_threadsafe(run.abort if abort else run.cancel)
            except RuntimeError:  # the run's loop is closed: nothing left to stop
                continue
        return len(found)
