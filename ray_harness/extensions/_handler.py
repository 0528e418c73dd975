"""What a wrap hook's ``handler`` does, and the host's recovery when a hook misuses it (fault isolation).

Downstream runs once per call, tracked by the call itself, so recovering from a hook's fault never adds a
model request or a tool side effect: downstream always gets the original request, and the caller gets its
real result (or its exception). Interrupts raised downstream always propagate. A hook that raises, never
calls ``handler``, calls it twice or returns no awaitable gets a diagnostic, and the call goes on without it
(the whole table: docs/concepts/extensions.md, "Fault isolation").
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator
from functools import partial
from types import CoroutineType, GeneratorType
from typing import Any, TypeVar

from ray_harness.extensions._call import FINISHED, NEW, STARTED, ChainCall
from ray_harness.extensions._downstream import after_entry, boundary, detach_inner, own_cancel

__all__ = ("enter",)

F = TypeVar("F", bound=Callable[..., Any])


def _iterable_coroutine(function: F) -> F:
    """Make a generator function's generators awaitable and able to ``yield from`` a native coroutine.

    What ``types.coroutine`` does to a generator function, type-preserving.
    """
    function.__code__ = function.__code__.replace(co_flags=function.__code__.co_flags | inspect.CO_ITERABLE_COROUTINE)
    return function


@_iterable_coroutine
def enter(run: ChainCall, index: int, request: Any = None) -> Generator[Any, Any, Any]:
    """What awaiting a handler does: hook ``index`` around the rest of the chain, or downstream itself.

    ``request`` is ignored (observation only). Awaiting it runs the rest of the chain once and returns
    downstream's result (or raises its exception).

    The awaitable is a generator-based coroutine, so a hook's ``await`` delegates to it directly and each
    hook's coroutine is delegated to in turn: no awaitable object or wrapper per layer.

    Raises:
        RuntimeError: a second call of the same handler (the host returns the first result).
    """
    phase = run.phase
    if phase[index] != NEW:
        raise RuntimeError("handler was already called: a contributed wrap hook may call it once "
                           "(the host returns the first result)")
    phase[index] = STARTED
    layers = run.layers
    try:
        if index == layers.count:
            # a foreign task (a hook's own, e.g. wait_for's) awaits handler while the driver is not stepping
            yield from (boundary(run) if run.driving else detach_inner(run))
        else:
            hook_error: BaseException | None = None
            try:
                awaitable = layers.hooks[index](layers.view(run.request), partial(enter, run, index + 1))
                yield from (awaitable if type(awaitable) is CoroutineType  # type: ignore[misc]
                            else _awaited(awaitable, layers.hook_name))
            except asyncio.CancelledError as error:
                hook_error = own_cancel(run, error)
            except Exception as error:  # the hook's own fault, or the handler's exception it let through
                hook_error = error
            if hook_error is not None or phase[index + 1] != FINISHED or run.orphaned:
                yield from _settle(run, index + 1, hook_error)
    except BaseException as error:
        _record(run, index, error)
        raise
    finally:
        phase[index] = FINISHED
        if run.waiters is not None:
            _release(run, index)
    if run.detached is not None or run.failure is not None:
        yield from after_entry(run, index)
    if run.failure is not None and index:  # the driver's own entry (0) leaves the outcome to the driver
        _record(run, index, run.failure)
        raise run.failure
    return layers.handout(run) if index else None


def _record(run: ChainCall, index: int, error: BaseException) -> None:
    """Entry ``index`` raises ``error`` into the hook awaiting it (so that hook letting it through is no fault)."""
    if run.raised is None:
        run.raised = {}
    run.raised[index] = error


def _release(run: ChainCall, index: int) -> None:
    """Entry ``index`` ended: wake a settling hook that waits for it (see :func:`_settle`)."""
    waiter = run.waiters.pop(index, None) if run.waiters is not None else None
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _settle(run: ChainCall, index: int, hook_error: BaseException | None) -> Generator[Any, Any, None]:
    """After hook ``index - 1`` misbehaved or took a cancel: run entry ``index`` if it never ran, or wait for it.

    It waits for an entry that still runs, diagnoses, and resumes downstream if a cancel left it waiting (see
    :func:`boundary`).
    """
    wrapper = run.layers.wrappers[index - 1]
    hook_name = run.layers.hook_name
    phase = run.phase[index]
    if phase == NEW:
        wrapper.diagnostic(hook_name, hook_error if hook_error is not None
                           else "the hook did not call handler; the host called it")
        try:
            yield from enter(run, index)
        except Exception:  # downstream's outcome is on the run: the caller gets it from there
            pass
        return
    if phase != FINISHED:  # the hook returned while handler still runs in another task: its result is the answer
        if run.waiters is None:
            run.waiters = {}
        waiter = run.waiters[index] = asyncio.get_running_loop().create_future()
        yield from waiter
    if hook_error is not None and hook_error is not (run.raised or {}).get(index):
        wrapper.diagnostic(hook_name, hook_error)
    if run.orphaned:
        try:
            yield from boundary(run)
        except Exception:  # downstream's outcome is on the run: the caller gets it from there
            pass


def _awaited(awaitable: Any, hook_name: str) -> Any:
    """What ``yield from`` runs for a hook's return value that is not a native coroutine.

    A plain ``def`` hook may return ``handler(request)`` itself (a generator-based coroutine, which has no
    ``__await__``) or any other awaitable; anything else is the hook's fault.

    Raises:
        TypeError: the hook returned something that is not awaitable.
    """
    if inspect.isawaitable(awaitable):
        return awaitable if isinstance(awaitable, GeneratorType) else awaitable.__await__()
    raise TypeError(f"{hook_name} returned {type(awaitable).__name__}, not an awaitable (define it with async def)")
