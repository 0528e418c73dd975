"""Task updates for a subscriber on a replica that does not run the task: poll the task record, yield what changed.

The running replica streams its own events; any other replica serves SubscribeToTask with :class:`StorePoller`,
which turns each new version of the task record into the same update events (:func:`task_updates`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from a2a.server.cluster import TaskEventStream, TaskVersion, VersionedEvent
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent

from ray_harness.serve._store import TERMINAL, TaskRecords

__all__ = ("StorePoller", "task_updates")


class StorePoller(TaskEventStream):
    """Cross-replica subscriptions without extra writes: a remote subscriber polls the task record.

    ``publish`` does nothing (every event is already in the task record); ``subscribe`` reads the task each
    time its version moves on and yields what changed as the events the running replica streams: an artifact
    update per new or changed artifact (``append`` when only parts were added; ``lastChunk`` once the task
    ended), then a status update when the status moved. Polls may fold several events into one update, never
    drop one; so SubscribeToTask has the same shape on a replica that does not run the task.
    """

    def __init__(self, records: TaskRecords, interval: float = 0.2) -> None:
        self.records = records
        self.interval = interval

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        return None

    async def subscribe(self, task_id: str, *, after: TaskVersion) -> AsyncGenerator[VersionedEvent, None]:
        seen = after
        last: Task | None = None
        context = ServerCallContext()
        while True:
            stored = await self.records.get(task_id, context)
            if stored is None:
                return
            if stored.version == seen:
                last = stored.task  # what the subscriber got as its snapshot: updates are relative to it
            elif stored.version.is_after(seen):
                seen = stored.version
                for event in task_updates(last, stored.task):
                    yield VersionedEvent(event=event, version=stored.version)
                last = stored.task
                if stored.task.status.state in TERMINAL:
                    return
            await asyncio.sleep(self.interval)

    async def destroy(self, task_id: str) -> None:
        return None


def task_updates(before: Task | None, after: Task) -> list[TaskArtifactUpdateEvent | TaskStatusUpdateEvent]:
    """The update events that turn ``before`` (None: unknown) into ``after``, artifacts first, status last."""
    ended = after.status.state in TERMINAL
    known = {artifact.artifact_id: artifact for artifact in (before.artifacts if before is not None else [])}
    events: list[TaskArtifactUpdateEvent | TaskStatusUpdateEvent] = []
    for artifact in after.artifacts:
        previous = known.get(artifact.artifact_id)
        if previous is not None and previous == artifact:
            continue
        update = TaskArtifactUpdateEvent(task_id=after.id, context_id=after.context_id, last_chunk=ended)
        grown = previous is not None and len(artifact.parts) > len(previous.parts) \
            and list(artifact.parts[:len(previous.parts)]) == list(previous.parts)
        update.artifact.CopyFrom(artifact)
        if grown and previous is not None:
            del update.artifact.parts[:len(previous.parts)]  # only the new chunks, appended
            update.append = True
        events.append(update)
    if before is None or before.status != after.status:
        events.append(TaskStatusUpdateEvent(task_id=after.id, context_id=after.context_id, status=after.status))
    return events
