"""Observation-only, fault-isolated wrappers around contributed hooks (see docs/concepts/extensions.md).

A wrap hook is an ``async def hook(request, handler)`` that awaits ``handler(request)`` once. The host
drives the outermost hook's coroutine itself (as a Task would) instead of awaiting it, so the downstream
stream events still flow out of the loop's generators *while* the hooks wait on ``handler``. The hooks of
one placement nest by generator delegation: awaiting a handler runs the next hook in the same chain of
frames, and only the innermost handler iterates downstream. It passes each stream event up (as the
``EMIT`` marker) through every hook's ``await`` to the one driver, which yields it; anything else the hooks
yield (futures, bare yields) goes to the event loop unchanged. The whole call stays in the invocation's
task, so cancel and the model-wait interrupter work as without hooks.

This module composes a placement's hooks (``Layers``) and drives them; ``_handler`` holds what awaiting a
handler does and the recovery from a hook's fault, ``_downstream`` how downstream runs once and how a cancel
meets the hooks first, ``_call`` the state of one call, ``_wrapper`` the contributions and their diagnostic,
``_lifecycle`` the lifecycle hooks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

from ray_harness.extensions._call import EMIT, MISSING, ChainCall, Inner, ResultType
from ray_harness.extensions._downstream import boundary, cancel_handled_downstream, stop_detached
from ray_harness.extensions._handler import enter
from ray_harness.extensions._lifecycle import run_lifecycle
from ray_harness.extensions._wrapper import Wrapper, diagnostic, logger
from ray_harness.extensions.types import ExtensionData, _current_store

# With the names _chain (and the E1 benchmark) import from the modules split off this one.
__all__ = ("Layers", "Wrapper", "diagnostic", "logger", "run_lifecycle", "shared_copy")


class Layers:
    """The wrap hooks of one placement, composed once; :meth:`run` drives all of them around one downstream call.

    The hooks nest as plain generator delegation (``yield from``): each ``await handler(...)`` runs the next
    hook in the same frame chain, and only the innermost handler iterates downstream. A stream event then
    costs each layer one resumed frame, and a layer costs one handler, one view and one generator per call.
    """

    __slots__ = ("count", "handout", "hook_name", "hooks", "is_result", "unwrap", "view", "wrappers")

    def __init__(self, wrappers: list[Wrapper], hook_name: str, view: Callable[[Any], Any], is_result: ResultType,
                 unwrap: Callable[[Any], Any], handout: Callable[[ChainCall], Any] | None = None) -> None:
        """Compose ``wrappers`` (outer first).

        Args:
            wrappers: the contributions at this placement, outer to inner.
            hook_name: the wrap hook each one implements (``awrap_model_call`` or ``awrap_tool_call``).
            view: what a hook sees of the request: a view of its own, whose parts are copied when the hook
                reads them, so nothing it does to them reaches downstream or another hook.
            is_result: the type(s) of the event that is downstream's result.
            unwrap: the real result of that event (it may raise, for a paused tool).
            handout: what ``handler`` returns to a hook, given the call (its real result is ``run.result``): a
                view or copy of its own (see :func:`shared_copy`); None: the real result itself.
        """
        self.wrappers = tuple(wrappers)
        self.hook_name = hook_name
        self.hooks = tuple(getattr(wrapper.middleware, hook_name) for wrapper in wrappers)
        self.count = len(self.hooks)
        self.view = view
        self.is_result = is_result
        self.unwrap = unwrap
        self.handout = _real if handout is None else handout

    def run(self, inner: Inner, request: Any, store: ExtensionData,
            interrupted: Callable[[], bool] | None = None) -> AsyncGenerator[Any, None]:
        """The events of ``inner(request)``, run once, with every hook around it and ``store`` as the task store.

        ``interrupted`` says whether a cancel of the task right now is the agent's own interrupt of a wait
        downstream (which then reaches downstream before the hooks).
        """
        return _drive(ChainCall(self, inner, request, store, interrupted))


def _real(run: ChainCall) -> Any:
    return run.result


def shared_copy(detach: Callable[[Any], Any]) -> Callable[[ChainCall], Any]:
    """A ``handout``: ``detach(result)``, one copy per call shared by the hooks while none changes it.

    Before the copy is handed on, it is compared with the real result (in C, for JSON-shaped data), and copied
    afresh if a hook changed it in place.
    """

    def handout(run: ChainCall) -> Any:
        handed = run.handed
        if handed is not MISSING:
            if handed is run.result:  # an immutable result (or one that cannot be copied): handed as it is
                return handed
            try:
                if handed == run.result:
                    return handed
            except Exception:  # an __eq__ that raises or is ambiguous: copy afresh
                pass
        handed = run.handed = detach(run.result)
        return handed

    return handout


class _Forward:
    """Hands one item the hooks yielded (a future, or None for a bare yield) to the event loop."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item

    def __await__(self) -> Any:
        return (yield self.item)


class _Abort(BaseException):
    """Thrown into the hooks when their consumer went away, so each ``await handler`` unwinds (closing downstream)."""


_DONE: Any = object()


def _step(run: ChainCall, steps: Generator[Any, Any, Any], value: Any, thrown: BaseException | None,
          store: ExtensionData | None) -> Any:
    """Resume the hooks once (``store`` set around it unless None): what they yield, or ``_DONE`` at their end."""
    token = _current_store.set(store) if store is not None else None
    run.driving = True
    try:
        return steps.send(value) if thrown is None else steps.throw(thrown)
    except StopIteration:
        return _DONE
    finally:
        run.driving = False
        if token is not None:
            _current_store.reset(token)  # set in this very step, so in this context


def _advance(run: ChainCall, steps: Generator[Any, Any, Any], value: Any, thrown: BaseException | None,
             store: ExtensionData | None) -> tuple[Generator[Any, Any, Any], Any]:
    """One step of the call (see :func:`_step`): the steps it now takes, and what they yielded.

    Once a cancel went through every hook with downstream still waiting (see :func:`boundary`), the cancel is
    the call's: from then on the steps are downstream's own, and it gets the cancel first.
    """
    while True:
        try:
            yielded = _step(run, steps, value, thrown, store)
        except asyncio.CancelledError as error:
            if not run.orphaned:
                raise
            thrown = error
        else:
            if yielded is not _DONE or not run.orphaned:
                return steps, yielded
            thrown = None  # (defensive) every hook ended with downstream still waiting: it ends here
        run.hooks_gone = True
        steps, value, thrown = boundary(run, thrown), None, None


async def _drive(run: ChainCall) -> AsyncGenerator[Any, None]:
    """The one async generator of a call: steps the outermost hook (as a Task would) and yields the events.

    The task store is set around each step only by the outermost chain (inner chains run inside its steps).
    """
    store = run.store
    task = run.task = asyncio.current_task()
    run.baseline = task.cancelling() if task is not None else 0
    outer = _current_store.get() is not store
    steps: Generator[Any, Any, Any] = enter(run, 0)
    value: Any = None
    thrown: BaseException | None = None
    try:
        while True:
            steps, yielded = _advance(run, steps, value, thrown, store if outer else None)
            if yielded is _DONE:
                break
            value = thrown = None
            try:
                while run.buffer:
                    yield run.buffer.pop(0)
                if yielded is EMIT:
                    yield run.emitted
                    continue
            except GeneratorExit:
                await _abort(run, steps)
                raise
            try:
                value = await _Forward(yielded)
            except BaseException as error:  # cancellation and the like go into the hooks, as a Task would
                thrown = error
    except BaseException as error:
        await stop_detached(run)
        if not (isinstance(error, asyncio.CancelledError) and cancel_handled_downstream(run)):
            raise
    while run.buffer:
        yield run.buffer.pop(0)
    if run.error is not None:
        raise run.error
    if run.outcome is not MISSING:
        yield run.outcome


async def _abort(run: ChainCall, steps: Generator[Any, Any, Any]) -> None:
    """The consumer left mid-call: unwind the hooks (the innermost ``await handler`` closes downstream), then stop.

    A downstream a cancel left waiting while a hook was still busy (see :func:`boundary`) unwinds after them.
    """
    await _unwind(steps, _Abort())
    if run.orphaned:
        run.hooks_gone = True
        await _unwind(boundary(run, _Abort()), None)  # a new generator: it throws its own _Abort in


async def _unwind(steps: Generator[Any, Any, Any], thrown: BaseException | None) -> None:
    """Step ``steps`` to their end, throwing ``thrown`` in first; the stream events they still emit are dropped."""
    value: Any = None
    while True:
        try:
            yielded = steps.send(value) if thrown is None else steps.throw(thrown)
        except BaseException:
            return
        thrown = value = None
        if yielded is EMIT:
            continue
        try:
            value = await _Forward(yielded)
        except BaseException as error:
            thrown = error
