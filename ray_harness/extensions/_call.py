"""One downstream call behind a chain of wrap hooks: its state, shared by the modules that drive it.

Entry ``k`` of a chain runs hook ``k`` (see ``_handler``); the last entry runs downstream (see ``_downstream``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Generator
from typing import TYPE_CHECKING, Any

from ray_harness.extensions.types import ExtensionData

if TYPE_CHECKING:
    from ray_harness.extensions._isolation import Layers

__all__ = ("EMIT", "FINISHED", "MISSING", "NEW", "STARTED", "ChainCall", "Inner", "ResultType")

Inner = Callable[[Any], AsyncGenerator[Any, None]]
ResultType = type | tuple[type, ...]
"""The type(s) of the event that is downstream's result (an isinstance check per event, not a call)."""
MISSING: Any = object()

EMIT: Any = object()
"""What the innermost handler yields up through every hook of a chain for a stream event (in ``ChainCall.emitted``)."""
NEW, STARTED, FINISHED = 0, 1, 2
"""The phases of one entry of a chain (``ChainCall.phase``): not entered yet, running, done."""


class ChainCall:
    """One downstream call behind a chain's hooks: its events on their way out and its real outcome.

    Entry ``k`` of the chain runs hook ``k`` (entry ``count`` runs downstream); entry 0 is the driver's own,
    and the handler hook ``k`` receives enters ``k + 1``. ``phase[k]`` tracks entry ``k``, so a handler is a
    plain ``partial`` of :func:`enter` (no object, no Python call of its own).
    """

    __slots__ = ("baseline", "buffer", "detached", "down", "driving", "emitted", "error", "failure", "handed",
                 "hooks_gone", "inner", "interrupted", "layers", "orphaned", "outcome", "pending", "phase", "raised",
                 "request", "result", "store", "task", "waiters")

    def __init__(self, layers: Layers, inner: Inner, request: Any, store: ExtensionData,
                 interrupted: Callable[[], bool] | None = None) -> None:
        self.layers = layers
        self.inner = inner
        self.request = request
        self.store = store
        self.phase = [NEW] * (layers.count + 1)
        self.outcome: Any = MISSING
        self.result: Any = None  # downstream's real result: the caller gets it, the hooks a copy (``handed``)
        self.handed: Any = MISSING  # the copy of the result last handed to a hook (see shared_copy)
        self.error: BaseException | None = None  # downstream's own exception: the caller gets it
        self.failure: BaseException | None = None  # what every handler raises (the error, or a paused tool)
        self.raised: dict[int, BaseException] | None = None  # entry -> what it raised into the hook awaiting it
        self.waiters: dict[int, asyncio.Future[None]] | None = None  # entry -> a settling hook waiting for it
        self.buffer: list[Any] = []  # events produced while a hook awaits handler in another task
        self.emitted: Any = None
        self.driving = False
        self.task: Any = None
        self.detached: asyncio.Task[None] | None = None  # downstream in a task of its own (see detach_inner)
        self.interrupted = interrupted
        self.baseline = 0  # the task's cancel requests when the call started: more are pending cancels
        self.down: Generator[Any, Any, None] | None = None  # downstream, stepped by boundary
        self.pending: Any = None  # what downstream waits on while orphaned
        self.orphaned = False  # a cancel ended the hooks' wait while downstream waits: it resumes after them
        self.hooks_gone = False  # every hook has ended: a cancel now is downstream's
