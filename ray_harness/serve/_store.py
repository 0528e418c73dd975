"""The durable task store of a served agent: A2A tasks, leases, cancel requests and interrupted agents.

One store URL (``file:///abs/dir``, ``s3://bucket/prefix`` or ``None`` for memory) holds, under one root::

    tasks/task_<id>.json          {"version": n, "task": <A2A Task, ProtoJSON>}
    leases/lease_<id>.json        {"owner": replica, "expires": unix time} while a replica runs the task
    cancels/cancel_<id>.json      a CancelTask that reached a replica not running the task
    contexts/context_<hash>.json  {"version": n, "snapshot": <AgentSnapshot>}: the conversation of a contextId
    contexts/index.json           each context's last use and tasks in flight (for eviction beyond max_contexts)
    contexts/turn_<id>.json       where an interrupted task's turn started in its context's conversation
    session_<id>/...              the interrupted Agent/Graph/Swarm (ray_harness.session layout)

A task that ends (``COMPLETED``, ``FAILED``, ``CANCELED``, ``REJECTED``) leaves only its record: its lease,
cancel request, interrupted target and turn go with the write that ends it, whichever replica makes it.

Every replica opens the same store, so any of them answers GetTask/ListTasks and resumes an interrupted
task. Writes of a task are compare-and-swap on its version (a lock file per task for ``file://``, a
conditional ``PutObject`` for S3), which is the contract of a2a-sdk's ``VersionedTaskStore``: a stale
writer gets ``ConcurrentTaskModificationError`` and the SDK's consumer stops that run.

Liveness: a replica running a task refreshes its lease. Whoever reads a ``SUBMITTED``/``WORKING`` task
whose lease expired (its replica died) finishes it: ``CANCELED`` when a cancel was requested, else
``FAILED`` with a message saying so. A task is therefore never left ``WORKING`` forever.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from a2a.server.cluster import ConcurrentTaskModificationError, StoredTask, TaskVersion, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import (
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict, ParseDict

from ray_harness.serve._blobs import MemoryRepository, _Swap, open_repository, replace_file
from ray_harness.session.file import FileSessionRepository
from ray_harness.session.records import validate_id
from ray_harness.session.repository import BlobSessionRepository
from ray_harness.types.exceptions import RayHarnessError, SessionException

logger = logging.getLogger("ray_harness.serve")

__all__ = ("DEAD_REPLICA_TEXT", "TERMINAL", "MemoryRepository", "TaskRecords", "open_repository", "replica_id")

TERMINAL = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_FAILED,
                      TaskState.TASK_STATE_REJECTED})
_RUNNING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})
DEAD_REPLICA_TEXT = ("The replica running this task stopped (its lease expired without a heartbeat), so the run "
                     "was lost; the task is marked FAILED. Send a new message to start again.")
_DEFAULT_PAGE = 50


def _task_key(task_id: str) -> str:
    return f"tasks/task_{task_id}.json"


def _lease_key(task_id: str) -> str:
    return f"leases/lease_{task_id}.json"


def _cancel_key(task_id: str) -> str:
    return f"cancels/cancel_{task_id}.json"


def _safe_id(task_id: str) -> str | None:
    try:
        return validate_id(task_id, "task id")
    except ValueError:
        return None


def _encode(version: int, task: Task) -> bytes:
    return json.dumps({"version": version, "task": MessageToDict(task)}, separators=(",", ":")).encode()


def _decode(raw: bytes, where: str) -> tuple[int, Task]:
    try:
        data = json.loads(raw)
        version = int(data["version"])
        return version, ParseDict(data["task"], Task(), ignore_unknown_fields=True)
    except (ValueError, KeyError, TypeError) as error:
        raise SessionException(f"unreadable task record {where}: {error}") from None


class _LeaseHeld(RayHarnessError):
    """Raised inside a lease swap when a live lease is already there (internal; it never leaves this module)."""


class TaskRecords(VersionedTaskStore):
    """a2a-sdk's ``VersionedTaskStore`` over a blob repository, with leases and cancel requests.

    Args:
        repo: Where blobs live (see :func:`open_repository`).
        owner: This replica's id, written into the leases it takes.
        lease_seconds: How long a lease lasts without a refresh.
    """

    def __init__(self, repo: BlobSessionRepository, *, owner: str, lease_seconds: float = 30.0) -> None:
        if lease_seconds <= 0:
            raise ValueError(f"lease_seconds must be positive, got {lease_seconds!r}")
        self.repo = repo
        self.owner = owner
        self.lease_seconds = float(lease_seconds)
        self.local: set[str] = set()
        """Tasks this replica is running right now (never expired by a reader here)."""
        self.settle_hooks: list[Callable[[str], None]] = []
        """Called (in the writing thread) with a task's id once a write ended it, to drop what it kept."""
        self._swap = _Swap(repo)

    # -- blocking helpers, run in a thread (file and S3 I/O must not stall the event loop) --------------

    async def _io(self, fn: Callable[..., Any], *args: Any) -> Any:
        if isinstance(self.repo, MemoryRepository):
            return fn(*args)
        return await asyncio.to_thread(fn, *args)

    def _read_task(self, task_id: str) -> tuple[int, Task] | None:
        key = _task_key(task_id)
        raw = self.repo._read(key)
        return None if raw is None else _decode(raw, self.repo._location(key))

    def _save_sync(self, task: Task, prev_version: int) -> int:
        outcome: dict[str, int] = {}
        cancelling = task.status.state == TaskState.TASK_STATE_CANCELED

        def swap(current: bytes | None) -> bytes:
            stored = None if current is None else _decode(current, task.id)
            stored_version = 0 if stored is None else stored[0]
            if cancelling:  # the SDK's rule: CANCELED overrides any live state, never a finished or absent task
                if stored is None or stored[1].status.state in TERMINAL:
                    raise ConcurrentTaskModificationError(task.id)
            elif stored_version != prev_version:
                raise ConcurrentTaskModificationError(task.id)
            outcome["version"] = stored_version + 1
            return _encode(stored_version + 1, task)

        settled = task.status.state in TERMINAL or task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        # fsync only where the task settles (an answer, a finished task); the steps in between are rewritten
        # within milliseconds and, after a power cut, the lease check fails the task anyway.
        self._swap.update(_task_key(task.id), swap, durable=settled)
        if settled:
            # Nobody runs it now: drop the lease and any cancel request (a resume takes a new lease).
            self.repo._delete(_lease_key(task.id))
            self.repo._delete(_cancel_key(task.id))
        if task.status.state in TERMINAL:
            try:
                self._forget(task.id)
            except Exception:  # the task has ended either way; what is left is only storage, not its outcome
                logger.warning("could not clean up after task %s in the task store", task.id, exc_info=True)
        return outcome["version"]

    def _forget(self, task_id: str) -> None:
        """An ended task keeps only its record: nothing can resume it, so what a resume would need goes."""
        self.repo._delete_tree(f"session_{task_id}")
        self.drop_lock(_lease_key(task_id))  # left by an answer's claim
        for hook in self.settle_hooks:
            hook(task_id)

    def drop_lock(self, key: str) -> None:
        """Remove the lock file a compare-and-swap of ``key`` left (file stores), once ``key`` has no writer."""
        self._swap.drop_lock(key)

    @property
    def blobs(self) -> _Swap:
        """Atomic operations on one blob (blocking): compare-and-swap, versioned read, conditional delete."""
        return self._swap

    # -- VersionedTaskStore ---------------------------------------------------------------------------

    async def save(self, task: Task, *, event: Any, prev: Task | None, prev_version: TaskVersion,
                   context: ServerCallContext) -> TaskVersion:
        if _safe_id(task.id) is None:
            raise ValueError(f"task id {task.id!r} cannot be stored")
        previous = 0 if prev_version.is_missing else int(prev_version._value)
        return TaskVersion(await self._io(self._save_sync, task, previous))

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        if _safe_id(task_id) is None:
            return None
        found = await self._io(self._read_task, task_id)
        if found is None:
            return None
        version, task = found
        if task.status.state in _RUNNING and task_id not in self.local:
            finished = await self._io(self._finish_if_abandoned, task_id, version, task)
            if finished is not None:
                version, task = finished
        return StoredTask(task, TaskVersion(version))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        names = await self._io(self.repo._list_dir, "tasks")
        tasks: list[Task] = []
        for name in names:
            if name.startswith("task_") and name.endswith(".json"):
                stored = await self.get(name[len("task_"):-len(".json")], context)
                if stored is not None:
                    tasks.append(stored.task)
        return _page(tasks, params)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        if _safe_id(task_id) is None:
            return
        for key in (_task_key(task_id), _lease_key(task_id), _cancel_key(task_id)):
            await self._io(self.repo._delete, key)
        await self._io(self._forget, task_id)

    # -- leases and cancel requests -------------------------------------------------------------------

    async def take_lease(self, task_id: str) -> None:
        """Record that this replica runs ``task_id`` (call before its first event, and periodically)."""
        self.local.add(task_id)
        payload = json.dumps({"owner": self.owner, "expires": time.time() + self.lease_seconds}).encode()
        await self._io(self._write_volatile, _lease_key(task_id), payload)

    def _write_volatile(self, key: str, data: bytes) -> None:
        """A lease needs no fsync: it only matters while its replica's process lives."""
        if isinstance(self.repo, FileSessionRepository):
            replace_file(self.repo._path(key), data)
        else:
            self.repo._write(key, data)

    def drop_local(self, task_id: str) -> None:
        self.local.discard(task_id)

    async def claim(self, task_id: str) -> bool:
        """Take the lease of ``task_id`` unless a live one exists (compare-and-swap); False when it does.

        An answer to an ``INPUT_REQUIRED`` task claims it first: of two answers racing on two replicas only one
        runs the approved tools; the other sees the lease.
        """
        payload = json.dumps({"owner": self.owner, "expires": time.time() + self.lease_seconds}).encode()

        def swap(current: bytes | None) -> bytes:
            if _lease_expires(current) > time.time():
                raise _LeaseHeld(task_id)
            return payload

        try:
            await self._io(self._swap.update, _lease_key(task_id), swap)
        except _LeaseHeld:
            return False
        return True

    async def release(self, task_id: str) -> None:
        """Give up a claim whose answer did not start a run (the task may be answered again at once)."""
        if task_id not in self.local:
            await self._io(self.repo._delete, _lease_key(task_id))

    async def lease_alive(self, task_id: str) -> bool:
        raw = await self._io(self.repo._read, _lease_key(task_id))
        return _lease_expires(raw) > time.time()

    # -- other blobs of the store (a context's conversation) ---------------------------------------------

    async def read_blob(self, key: str) -> bytes | None:
        return await self._io(self.repo._read, key)  # type: ignore[no-any-return]

    async def update_blob(self, key: str, fn: Callable[[bytes | None], bytes]) -> None:
        """Write ``fn(current)`` atomically (compare-and-swap; ``fn`` may run again after a lost race)."""
        await self._io(self._swap.update, key, fn)

    async def write_blob(self, key: str, data: bytes) -> None:
        """Write ``data`` at ``key`` (one writer: no compare-and-swap)."""
        await self._io(self.repo._write, key, data)

    async def delete_blob(self, key: str) -> None:
        await self._io(self.repo._delete, key)

    async def io(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run blocking store code ``fn(*args)`` off the event loop (inline for the memory store)."""
        return await self._io(fn, *args)

    def update_blob_sync(self, key: str, fn: Callable[[bytes | None], bytes]) -> None:
        self._swap.update(key, fn)

    def in_flight(self, task_id: str) -> bool:
        """Whether ``task_id`` is in flight: running here, running under a live lease, or waiting for input.

        Reads only (no write): it is called while another blob of the store is locked.
        """
        if task_id in self.local:
            return True
        if _safe_id(task_id) is None:
            return False
        found = self._read_task(task_id)
        if found is not None and found[1].status.state in TERMINAL:
            return False
        if found is not None and found[1].status.state not in _RUNNING:
            return True  # INPUT_REQUIRED (or AUTH_REQUIRED): an answer continues it
        # Running, or not written yet (its replica takes the lease before the task's first write).
        return _lease_expires(self.repo._read(_lease_key(task_id))) > time.time()

    async def request_cancel(self, task_id: str) -> None:
        await self._io(self.repo._write, _cancel_key(task_id), json.dumps({"by": self.owner}).encode())

    async def cancel_requested(self, task_id: str) -> bool:
        return await self._io(self.repo._read, _cancel_key(task_id)) is not None

    def _finish_if_abandoned(self, task_id: str, version: int, task: Task) -> tuple[int, Task] | None:
        if _lease_expires(self.repo._read(_lease_key(task_id))) > time.time():
            return None
        cancelled = self.repo._read(_cancel_key(task_id)) is not None
        ended = Task()
        ended.CopyFrom(task)
        if ended.status.HasField("message"):
            ended.history.append(ended.status.message)
        ended.status.Clear()
        ended.status.state = TaskState.TASK_STATE_CANCELED if cancelled else TaskState.TASK_STATE_FAILED
        ended.status.timestamp.FromDatetime(datetime.now(UTC))
        ended.status.message.CopyFrom(Message(
            message_id=f"{task_id}-lost", role=Role.ROLE_AGENT, task_id=task_id, context_id=task.context_id,
            parts=[Part(text="The task was cancelled; its replica stopped before the run ended."
                        if cancelled else DEAD_REPLICA_TEXT)]))
        try:
            new_version = self._save_sync(ended, version)
        except ConcurrentTaskModificationError:
            found = self._read_task(task_id)  # someone else moved it on meanwhile: report what is there
            return found
        return new_version, ended


def _lease_expires(raw: bytes | None) -> float:
    if raw is None:
        return 0.0
    try:
        return float(json.loads(raw)["expires"])
    except (ValueError, KeyError, TypeError):
        return 0.0


def _sort_key(task: Task) -> tuple[int, str]:
    stamp = task.status.timestamp.ToNanoseconds() if task.status.HasField("timestamp") else 0
    return stamp, task.id


def _page(tasks: list[Task], params: ListTasksRequest) -> ListTasksResponse:
    if params.context_id:
        tasks = [task for task in tasks if task.context_id == params.context_id]
    if params.status:
        tasks = [task for task in tasks if task.status.state == params.status]
    if params.HasField("status_timestamp_after"):
        after = params.status_timestamp_after.ToNanoseconds()
        tasks = [task for task in tasks if task.status.HasField("timestamp")
                 and task.status.timestamp.ToNanoseconds() >= after]
    tasks.sort(key=_sort_key, reverse=True)  # newest first
    start = 0
    if params.page_token:
        try:
            start = int(base64.urlsafe_b64decode(params.page_token.encode()).decode().removeprefix("offset:"))
        except ValueError:
            from a2a.utils.errors import InvalidParamsError

            raise InvalidParamsError(message=f"Invalid page token: {params.page_token}") from None
    size = params.page_size or _DEFAULT_PAGE
    end = start + size
    token = base64.urlsafe_b64encode(f"offset:{end}".encode()).decode() if end < len(tasks) else None
    return ListTasksResponse(tasks=tasks[start:end], next_page_token=token, total_size=len(tasks), page_size=size)


def replica_id() -> str:
    """A name for this process in leases: host, pid and a random suffix."""
    import socket

    return f"{socket.gethostname()}:{os.getpid()}:{base64.urlsafe_b64encode(os.urandom(4)).decode().rstrip('=')}"

