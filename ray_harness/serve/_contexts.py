"""One A2A ``contextId`` is one conversation, kept in the task store.

A new task in a context starts from the conversation its earlier tasks left, on whichever replica it lands (as
Strands' A2A server keeps an agent per context).

The conversation is an ``AgentSnapshot`` in the task store (``contexts/context_<hash>.json``, versioned). A task
of a served Agent restores it into the fresh agent before its run and, once the task is ``COMPLETED``, writes
the agent back. Turns finish in any order: a turn that started from an older version than the one it finds
appends only the messages it added, so concurrent turns in one context are all kept. A turn that ends
``FAILED`` or ``CANCELED`` adds nothing. An interrupted task remembers where its turn started
(``contexts/turn_<task id>.json``) and joins the conversation when its answer completes it. A Graph or Swarm
task starts afresh: their runs are workflows, not conversations.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ray_harness.serve._store import TaskRecords

__all__ = ("Conversations", "Turn")


@dataclass(frozen=True)
class Turn:
    """Where a task's run started: the context, the conversation version it restored and its message count."""

    context_id: str
    version: int
    base: int


def _context_key(context_id: str) -> str:
    # Context ids come from clients: hashed, so any string names one safe key.
    return f"contexts/context_{hashlib.sha256(context_id.encode()).hexdigest()[:40]}.json"


def _turn_key(task_id: str) -> str:
    return f"contexts/turn_{task_id}.json"


def _decode(raw: bytes | None) -> tuple[int, dict[str, Any] | None]:
    if raw is None:
        return 0, None
    data = json.loads(raw)
    return int(data["version"]), data["snapshot"]


def _encode(version: int, snapshot: dict[str, Any]) -> bytes:
    return json.dumps({"version": version, "snapshot": snapshot}, separators=(",", ":")).encode()


def keeps_conversation(target: Any) -> bool:
    from ray_harness.agent import Agent

    return isinstance(target, Agent)


class Conversations:
    """The conversations of the contexts a replica serves, kept in its task store."""

    def __init__(self, records: TaskRecords) -> None:
        self.records = records

    async def start(self, target: Any, context_id: str) -> Turn | None:
        """Restore ``context_id``'s conversation into ``target`` (a fresh Agent); None for a Graph/Swarm."""
        if not keeps_conversation(target):
            return None
        version, stored = _decode(await self.records.read_blob(_context_key(context_id)))
        if stored is not None:
            from ray_harness.agent.snapshot import AgentSnapshot

            # The factory may name each agent anew: the conversation belongs to the context, not to an agent id.
            snapshot = AgentSnapshot.model_validate({**stored, "agent_id": target.agent_id, "name": target.name})
            await asyncio.to_thread(target.restore, snapshot)
        return Turn(context_id, version, len(target.messages))

    async def park(self, task_id: str, turn: Turn) -> None:
        """The task is interrupted: remember where its turn started, for whichever replica completes it."""
        data = {"contextId": turn.context_id, "version": turn.version, "base": turn.base}
        await self.records.update_blob(_turn_key(task_id), lambda _: json.dumps(data).encode())

    async def parked(self, task_id: str) -> Turn | None:
        raw = await self.records.read_blob(_turn_key(task_id))
        if raw is None:
            return None
        data = json.loads(raw)
        return Turn(str(data["contextId"]), int(data["version"]), int(data["base"]))

    async def finish(self, target: Any, task_id: str, turn: Turn) -> None:
        """The task completed: its turn joins the conversation of its context."""
        mine = (await asyncio.to_thread(target.snapshot)).model_dump(mode="json")

        def merge(current: bytes | None) -> bytes:
            version, stored = _decode(current)
            if version == turn.version or stored is None:
                return _encode(version + 1, mine)
            # Another turn finished since this one started: keep its messages and add only this turn's.
            added = mine["messages"][turn.base:]
            return _encode(version + 1, {**mine, "messages": [*stored["messages"], *added]})

        await self.records.update_blob(_context_key(turn.context_id), merge)
        await self.records.delete_blob(_turn_key(task_id))
