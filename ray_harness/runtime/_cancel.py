"""``RunHandle``: every actor and pooled slot one run involves, so a cancel reaches all of them at once.

A run (a graph, a swarm, an evaluation batch) registers what it starts: dedicated
agent actors (:meth:`RunHandle.add_agent`), pooled runs (:meth:`RunHandle.add_pool_run`)
or any actor with a ``cancel`` method (:meth:`RunHandle.add_actor`).
:meth:`RunHandle.cancel` sends every cancel concurrently (one message per host
actor, carrying all of that host's run ids) and waits for the acknowledgements;
each target handles it at once, even mid-call, because cancel runs outside the
busy invocation (a separate concurrency group / the async actor's loop).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from ray.exceptions import RayError

from ray_harness.agent.agent import run_sync

__all__ = ("RunHandle",)

logger = logging.getLogger(__name__)


@dataclass
class _HostTarget:
    actor: Any
    name: str
    run_ids: list[str] = field(default_factory=list)


class RunHandle:
    """The actors of one run; ``await handle.cancel()`` broadcasts to all of them concurrently."""

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id
        self._agents: dict[str, Any] = {}  # actor name -> actor handle (dedicated agents)
        self._hosts: dict[str, _HostTarget] = {}  # actor name -> host + the run ids it serves for us

    def add_agent(self, remote: Any) -> None:
        """A :class:`~ray_harness.runtime.RemoteAgent` (its running invocation is cancelled)."""
        self._agents[remote.actor_name] = remote.actor

    def add_actor(self, actor: Any, name: str) -> None:
        """Any actor whose ``cancel()`` method stops its current work."""
        self._agents[name] = actor

    def add_pool_run(self, host: Any, host_name: str, run_id: str) -> None:
        """A run on a pooled host (see :meth:`AgentPool.slot_of`)."""
        target = self._hosts.setdefault(host_name, _HostTarget(host, host_name))
        if run_id not in target.run_ids:
            target.run_ids.append(run_id)

    @property
    def actor_names(self) -> list[str]:
        return sorted([*self._agents, *self._hosts])

    async def cancel(self) -> int:
        """Cancel everywhere at once; returns how many targets acknowledged. Dead actors are skipped."""
        calls: list[tuple[str, Awaitable[Any]]] = [(name, actor.cancel.remote()) for name, actor in self._agents.items()]
        calls += [(t.name, t.actor.cancel.remote(list(t.run_ids))) for t in self._hosts.values()]
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
        return run_sync(self.cancel())  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"RunHandle(run_id={self.run_id!r}, actors={self.actor_names})"
