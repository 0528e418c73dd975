"""``RunHandle``: every actor and pooled slot one run involves, so a cancel reaches all of them at once.

A run (a graph, a swarm, an evaluation batch) registers what it starts: dedicated
agent actors and their invocations (:meth:`RunHandle.add_agent`) and pooled runs
(:meth:`RunHandle.add_pool_run`). :meth:`RunHandle.cancel` sends every cancel
concurrently (one ``CancelRequest`` per actor, carrying all of that actor's
invocation ids) and waits for the acknowledgements;
each target handles it at once, even mid-call, because cancel runs outside the
busy invocation (a separate concurrency group / the async actor's loop).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from ray.exceptions import RayError

from ray_harness.agent.agent import run_sync
from ray_harness.runtime._client import ActorClient
from ray_harness.runtime._wire import CancelRequest

__all__ = ("RunHandle",)

logger = logging.getLogger(__name__)


@dataclass
class _Target:
    actor: Any
    name: str
    invocation_ids: list[str] | None = None  # None: whatever the actor runs now


class RunHandle:
    """The actors of one run; ``await handle.cancel()`` broadcasts to all of them concurrently.

    One :class:`~ray_harness.runtime._wire.CancelRequest` per actor: a host gets the ids of the runs it serves
    for this run, a dedicated agent the ids of its invocations (or none: its running invocation).
    """

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id
        self._targets: dict[str, _Target] = {}  # actor name -> actor and what to cancel there

    def add_agent(self, remote: Any, invocation_id: str | None = None) -> None:
        """Add a :class:`~ray_harness.runtime.RemoteAgent`: its running invocation, or ``invocation_id``.

        A cancel for ``invocation_id`` lands even before that invocation starts.
        """
        if invocation_id is None:
            self._targets[remote.actor_name] = _Target(remote.actor, remote.actor_name)
        else:
            self._add(remote.actor, remote.actor_name, invocation_id)

    def add_pool_run(self, host: Any, host_name: str, run_id: str) -> None:
        """Add a run on a pooled host (see :meth:`AgentPool.slot_of`)."""
        self._add(host, host_name, run_id)

    def _add(self, actor: Any, name: str, invocation_id: str) -> None:
        target = self._targets.setdefault(name, _Target(actor, name, []))
        if target.invocation_ids is not None and invocation_id not in target.invocation_ids:
            target.invocation_ids.append(invocation_id)

    @property
    def actor_names(self) -> list[str]:
        """The names of the actors a cancel goes to."""
        return sorted(self._targets)

    async def cancel(self) -> int:
        """Cancel everywhere at once; returns how many targets acknowledged. Dead actors are skipped."""
        calls: list[tuple[str, Awaitable[Any]]] = [
            (t.name, ActorClient(t.actor, t.name).submit("cancel", CancelRequest(
                invocation_ids=None if t.invocation_ids is None else tuple(t.invocation_ids))))
            for t in self._targets.values()]
        outcomes = await asyncio.gather(*(ref for _, ref in calls), return_exceptions=True)
        acknowledged = 0
        for (name, _), outcome in zip(calls, outcomes, strict=True):
            if isinstance(outcome, RayError):
                logger.warning("actor=<%s> | cancel not delivered: %s", name, outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                acknowledged += 1
        return acknowledged

    def cancel_sync(self) -> int:
        """:meth:`cancel` from synchronous code."""
        return run_sync(self.cancel())  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"RunHandle(run_id={self.run_id!r}, actors={self.actor_names})"
