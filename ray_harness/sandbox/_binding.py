"""One live sandbox per identity per process, held by the slots of the agents built with it.

Sandboxes follow agents: every :class:`~ray_harness.sandbox.Sandbox` gets an identity (``sandbox_id``, a
uuid) when it is constructed. Pickling keeps it, so the copies of one sandbox object that reach a process
separately (two graph nodes shipped to the same host, an agent shipped again) resolve here to **one live
object** (:func:`restore`): one container, one SSH connection. ``copy.copy`` / ``copy.deepcopy`` return the
sandbox itself (a sandbox names an environment; copying an agent does not fork its container). A second
object the user builds is a different sandbox, even with the same configuration.

Who closes a live sandbox? Its **holders**. A host builds an agent inside :func:`collecting` (every sandbox
unpickled or constructed meanwhile is recorded) and :func:`bind`-s what it found to a holder key (an
ephemeral run's id, a resident agent's key). :func:`release` drops a holder; a sandbox whose last holder
left is closed (a created container removed). A sandbox that was never bound (a driver-side object, an
in-process ``runtime="local"`` run) keeps its own lifetime: ``async with`` or ``close()``, as before.
Sandboxes whose ``closes_with_holders`` is false (``RemoteSandbox``: its actor owns the sandbox) are held but
never closed here.

Containers a process creates carry :func:`owner_labels` (the host sets its actor id), so a restarted host or
a pool shutdown removes what a dead process left behind. Ray-free: the runtime's hosts call this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ray_harness.sandbox.base import Sandbox

__all__ = (
    "acquire",
    "bind",
    "collecting",
    "engine_listeners",
    "held",
    "holders",
    "live_sandbox",
    "note_created",
    "note_pickled",
    "owner_labels",
    "pickled_identities",
    "release",
    "release_all",
    "restore",
    "set_engine_listener",
    "set_owner_labels",
    "settled",
)

logger = logging.getLogger(__name__)

_lock = threading.RLock()
_live: weakref.WeakValueDictionary[str, Sandbox] = weakref.WeakValueDictionary()
"""identity → the live object of this process (weak: an unbound sandbox dies with its last reference)."""
_held: dict[str, Sandbox] = {}
"""identity → the live object while it has holders (strong)."""
_holders: dict[str, set[str]] = {}
_by_holder: dict[str, set[str]] = {}
_closing: dict[str, asyncio.Task[None]] = {}
_owner_labels: dict[str, str] = {}
_engine_listener: list[Callable[[list[str]], None]] = []

T = TypeVar("T")

_collector: ContextVar[list[Sandbox] | None] = ContextVar("ray_harness_sandbox_collector", default=None)
_pickled: ContextVar[list[str] | None] = ContextVar("ray_harness_sandbox_pickled", default=None)


# -- identity across pickling ------------------------------------------------------------------------------


def restore(cls: type[Sandbox], identity: str, state: dict[str, Any]) -> Sandbox:
    """Unpickle a sandbox: the live object of ``identity`` in this process, or a new one from ``state``."""
    with _lock:
        sandbox = _live.get(identity)
        if sandbox is None:
            sandbox = cls.__new__(cls)
            setstate = getattr(sandbox, "__setstate__", None)
            if setstate is not None:
                setstate(state)
            else:
                sandbox.__dict__.update(state)
            sandbox.__dict__["_sandbox_id"] = identity
            _live[identity] = sandbox
    note_created(sandbox)
    return sandbox


def note_pickled(sandbox: Sandbox) -> None:
    """Called while ``sandbox`` is pickled: a copy unpickled in this process resolves to it."""
    identity = sandbox.sandbox_id
    with _lock:
        _live.setdefault(identity, sandbox)
    found = _pickled.get()
    if found is not None and identity not in found:
        found.append(identity)


def note_created(sandbox: Sandbox) -> None:
    """Called when a sandbox is constructed or unpickled: recorded by an active :func:`collecting`."""
    found = _collector.get()
    if found is not None and all(item is not sandbox for item in found):
        found.append(sandbox)


def collecting() -> contextlib.AbstractContextManager[list[Sandbox]]:
    """Record the sandboxes constructed or unpickled in this block (an agent being built), in order."""
    return _recording(_collector)


def pickled_identities() -> contextlib.AbstractContextManager[list[str]]:
    """Record the identities of the sandboxes pickled in this block (an agent being shipped), in order."""
    return _recording(_pickled)


@contextlib.contextmanager
def _recording(var: ContextVar[list[T] | None]) -> Iterator[list[T]]:
    found: list[T] = []
    token = var.set(found)
    try:
        yield found
    finally:
        var.reset(token)


# -- holders -------------------------------------------------------------------------------------------------


def bind(holder: str, sandboxes: Iterable[Sandbox]) -> list[Sandbox]:
    """Hold ``sandboxes`` for ``holder``; return the live objects held (one per identity)."""
    bound: list[Sandbox] = []
    with _lock:
        for sandbox in sandboxes:
            identity = sandbox.sandbox_id
            live = _live.get(identity)
            if live is None:
                _live[identity] = live = sandbox
            _held[identity] = live
            _holders.setdefault(identity, set()).add(holder)
            _by_holder.setdefault(holder, set()).add(identity)
            if all(item is not live for item in bound):
                bound.append(live)
    return bound


async def acquire(holder: str, sandboxes: Iterable[Sandbox]) -> list[Sandbox]:
    """:func:`bind`, after any close of these sandboxes still running has finished (they then start afresh)."""
    bound = bind(holder, sandboxes)
    for sandbox in bound:
        with _lock:
            task = _closing.get(sandbox.sandbox_id)
        if task is not None:
            await _wait(task)
    return bound


async def settled(holder: str) -> None:
    """Wait until no close of a sandbox ``holder`` holds is still running (it then starts afresh on use)."""
    with _lock:
        tasks = [_closing[identity] for identity in _by_holder.get(holder, ()) if identity in _closing]
    for task in tasks:
        await _wait(task)


async def release(holder: str) -> list[Sandbox]:
    """Drop ``holder``; close the sandboxes it was the last holder of (errors are logged); return them."""
    with _lock:
        closing: list[tuple[Sandbox, asyncio.Task[None]]] = []
        for identity in sorted(_by_holder.pop(holder, ())):
            others = _holders.get(identity)
            if others is not None:
                others.discard(holder)
                if others:
                    continue
                del _holders[identity]
            sandbox = _held.pop(identity, None)
            if sandbox is not None and sandbox.closes_with_holders:
                closing.append((sandbox, _start_close(sandbox)))
    for _, task in closing:
        await _wait(task)
    return [sandbox for sandbox, _ in closing]


async def release_all() -> list[Sandbox]:
    """Release every holder of this process (a host going away); return the sandboxes closed."""
    with _lock:
        everyone = sorted(_by_holder)
    closed: list[Sandbox] = []
    for holder in everyone:
        closed += await release(holder)
    return closed


def _start_close(sandbox: Sandbox) -> asyncio.Task[None]:
    identity = sandbox.sandbox_id
    previous = _closing.get(identity)

    async def close() -> None:
        if previous is not None:
            await _wait(previous)
        try:
            await sandbox.close()
        except Exception:  # a sandbox that cannot close must not fail the run that released it
            logger.warning("closing sandbox %r failed", sandbox, exc_info=True)
        finally:
            with _lock:
                if _closing.get(identity) is task:
                    del _closing[identity]

    task = asyncio.get_running_loop().create_task(close(), name=f"ray_harness-close-sandbox-{identity[:8]}")
    _closing[identity] = task
    return task


async def _wait(task: asyncio.Task[None]) -> None:
    if task.get_loop() is asyncio.get_running_loop():
        await asyncio.shield(task)
        return
    # A close started on another thread's loop: its done callback wakes this loop.
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle() -> None:
        if not done.done():
            done.set_result(None)

    def wake(_: object) -> None:
        loop.call_soon_threadsafe(settle)

    task.add_done_callback(wake)
    await done


# -- inspection ------------------------------------------------------------------------------------------------


def live_sandbox(identity: str) -> Sandbox | None:
    """The live sandbox of ``identity`` in this process, if any."""
    with _lock:
        return _live.get(identity)


def holders(identity: str) -> frozenset[str]:
    """Who holds the sandbox ``identity`` in this process."""
    with _lock:
        return frozenset(_holders.get(identity, ()))


def held() -> dict[str, frozenset[str]]:
    """Every held sandbox identity of this process and its holders."""
    with _lock:
        return {identity: frozenset(keys) for identity, keys in _holders.items()}


# -- ownership of created resources ---------------------------------------------------------------------------


def set_owner_labels(labels: dict[str, str]) -> None:
    """Labels every container this process creates from now on carries (a host: its actor id)."""
    with _lock:
        _owner_labels.clear()
        _owner_labels.update(labels)


def owner_labels() -> dict[str, str]:
    """The labels :func:`set_owner_labels` set (empty in a driver)."""
    with _lock:
        return dict(_owner_labels)


def set_engine_listener(listener: Callable[[list[str]], None] | None) -> None:
    """Call ``listener(engines)`` whenever this process creates a container on an engine it had not used.

    Held here, not in :mod:`ray_harness.sandbox.docker`, so a host sets it at start without importing that module
    (which no host needs until an agent brings a ``DockerSandbox``). This one does not report engines used before
    it was set: :func:`ray_harness.sandbox.docker.set_engine_listener` does.
    """
    with _lock:
        _engine_listener[:] = [listener] if listener is not None else []


def engine_listeners() -> list[Callable[[list[str]], None]]:
    """The listener :func:`set_engine_listener` set (none, or one)."""
    with _lock:
        return list(_engine_listener)
