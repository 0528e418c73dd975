"""Downstream of a chain of wrap hooks: run once, and kept out of reach of the hooks' cancels (cancel isolation).

The innermost handler steps downstream itself (:func:`boundary`) and waits on a proxy of each future
downstream waits on, so a cancel of the task stops the hooks' wait first, never downstream's. A hook's own
timeout around ``handler`` (``async with asyncio.timeout(5)``, or ``asyncio.wait_for`` run inline) then ends
its wait only: downstream stays where it waits, and resumes (to its end, once) as soon as a hook has taken the
cancel; the caller gets its real result. A cancel nobody withdrew (``Task.uncancel``, as a timeout does) is
the caller's: it reaches downstream next, as without hooks; the agent's own model-wait interrupter reaches it
first, so the hooks see the cancelled stop.

A hook that awaits ``handler`` in a task of its own (``asyncio.wait_for(handler(request), 5)``) gets
downstream run in a task of its own too, which only the call can cancel: a hook that stops waiting cannot
cancel a tool or a model request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from functools import partial
from typing import Any

from ray_harness.extensions._call import EMIT, MISSING, ChainCall

__all__ = ("after_entry", "boundary", "cancel_handled_downstream", "detach_inner", "own_cancel", "stop_detached")


def own_cancel(run: ChainCall, error: asyncio.CancelledError) -> asyncio.CancelledError:
    """A ``CancelledError`` out of a hook, if it is the hook's fault (a cancel it made and withdrew itself).

    Raises:
        asyncio.CancelledError: ``error``, when it is downstream's own or a cancel nobody withdrew (the caller's).
    """
    if error is run.failure or asyncio.current_task() is not run.task or _cancel_pending(run):
        raise error
    return error


def after_entry(run: ChainCall, index: int) -> Generator[Any, Any, None]:
    """What entry ``index`` settles after its hook (or downstream) ended, before answering the hook that awaits it."""
    if run.detached is not None and not run.detached.done():
        # a hook stopped waiting for a detached downstream (a timeout around handler): its outcome is the answer
        yield from _until_done(run.detached)


def _cancel_pending(run: ChainCall) -> bool:
    """Whether the call's task has a cancel request nobody withdrew since the call started (the caller's cancel)."""
    task = run.task
    return task is not None and task.cancelling() > run.baseline


def boundary(run: ChainCall, thrown: BaseException | None = None) -> Generator[Any, Any, None]:
    """Downstream (:func:`_inner`), stepped here on the innermost hook's behalf, so a cancel meets the hooks first.

    Each future downstream waits on is waited on through a proxy of its own (:func:`_linked`): a cancel of the
    task cancels the proxy, and arrives here instead of inside downstream. The agent's own interrupt of a wait,
    and any cancel once every hook has ended, go on into downstream as a Task would pass them (the future it
    waits on cancelled too). Any other cancel ends the hooks' wait only: downstream stays where it waits
    (``run.pending``, ``run.orphaned``) and the first hook that takes the cancel (a timeout around ``handler``
    turns it into ``TimeoutError``) resumes it here once the hook has ended (:func:`_settle`); the driver does
    if the cancel went through every hook. A resumed downstream first gets a cancel nobody withdrew: the caller's.
    """
    down = run.down
    item: Any = None
    wait = False
    if down is None:
        down = run.down = _inner(run)
    else:  # resumed after the hooks took a cancel: first the wait it was in, then on
        item, run.pending, run.orphaned = run.pending, None, False
        if thrown is None and _cancel_pending(run):
            thrown = asyncio.CancelledError()  # a real cancel a hook caught and did not pass on: the call's
        wait = thrown is None
    value: Any = None
    while True:
        if not wait:
            if thrown is not None and isinstance(thrown, asyncio.CancelledError) and asyncio.isfuture(item):
                item.cancel()  # what a Task's cancel does to the future it waits on
            try:
                item = down.send(value) if thrown is None else down.throw(thrown)
            except StopIteration:
                return
            value = thrown = None
        wait = False
        try:
            if asyncio.isfuture(item):
                item._asyncio_future_blocking = False  # taken, as a Task takes it
                if not item.done():
                    yield from _linked(item)
            else:  # a stream event (EMIT) or a bare yield
                value = yield item
        except asyncio.CancelledError as error:
            if run.hooks_gone or (run.interrupted is not None and run.interrupted()):
                thrown = error
                continue
            run.pending, run.orphaned = item, True
            raise
        except BaseException as error:  # _Abort and the like: downstream unwinds
            thrown = error


def _linked(future: Any) -> Generator[Any, Any, None]:
    """Wait until ``future`` is done, on a future of our own: cancelling the wait does not cancel ``future``."""
    waiter = future.get_loop().create_future()
    future.add_done_callback(partial(_wake, waiter))
    yield from waiter.__await__()


def _wake(waiter: asyncio.Future[None], _: Any) -> None:
    if not waiter.done():
        waiter.set_result(None)


def detach_inner(run: ChainCall) -> Generator[Any, Any, None]:
    """Downstream, entered from a task a hook started (``await asyncio.wait_for(handler(request), 5)``).

    It runs in a task of its own that only the call itself can cancel (see :func:`_drive`): a hook that
    stops waiting (a timeout, a cancel of its own task) ends its wait, never the model request or the tool;
    the caller still gets downstream's real outcome, once it is there.
    """
    task = run.detached = asyncio.get_running_loop().create_task(_downstream(run))
    yield from _until_done(task)


async def _downstream(run: ChainCall) -> None:
    try:
        await _InnerAwaitable(run)
    except BaseException:  # recorded on the run by _inner (error, failure): the chain raises it
        pass


class _InnerAwaitable:
    __slots__ = ("run",)

    def __init__(self, run: ChainCall) -> None:
        self.run = run

    def __await__(self) -> Generator[Any, Any, None]:
        return _inner(self.run)


def _until_done(task: asyncio.Task[None]) -> Generator[Any, Any, None]:
    """Wait for ``task`` without owning it: cancelling the waiter does not cancel the task."""
    if not task.done():
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def finished(_: Any) -> None:
            if not done.done():
                done.set_result(None)

        task.add_done_callback(finished)
        yield from done


def cancel_handled_downstream(run: ChainCall) -> bool:
    """Whether the call's cancel reached its detached downstream, which took it and ended with a result.

    An agent's cancel interrupts the provider wait by cancelling the invocation's task; with downstream in a
    task of its own that cancel lands on the hooks' wait instead, and :func:`stop_detached` passes it on. The
    model call then ends with its cancelled stop and withdraws the cancel request (``uncancel``): the caller gets
    that result, as without hooks. A cancel nobody withdrew still propagates.
    """
    task = asyncio.current_task()
    return (run.detached is not None and run.error is None and run.outcome is not MISSING and task is not None
            and task.cancelling() == 0)


async def stop_detached(run: ChainCall) -> None:
    """The call ends early (cancelled, or its consumer left): cancel a detached downstream and let it unwind first."""
    task = run.detached
    if task is not None and not task.done():
        task.cancel()
        await asyncio.wait([task])


def _inner(run: ChainCall) -> Generator[Any, Any, None]:
    """Downstream's events, once: the result is kept, the others go up to the driver (or into the buffer)."""
    events = run.inner(run.request)
    is_result = run.layers.is_result
    exhausted = at_emit = False
    try:
        while True:
            try:
                event = yield from events.__anext__()  # type: ignore[misc]
            except StopAsyncIteration:
                exhausted = True
                break
            if isinstance(event, is_result):
                run.outcome = event
            elif run.driving and asyncio.current_task() is run.task:
                run.emitted = event
                at_emit = True
                yield EMIT
                at_emit = False
            else:  # a hook awaits handler in another task: the driver passes these on later
                run.buffer.append(event)
    except GeneratorExit:
        exhausted = True  # closed without being resumed: nothing can be awaited here any more
        raise
    except BaseException as error:
        run.error = run.failure = error
        exhausted = not at_emit  # thrown into downstream, it ended downstream; thrown at our own yield, it waits
        raise
    finally:
        if not exhausted:
            yield from events.aclose()  # type: ignore[misc]
    if run.outcome is not MISSING:
        try:
            run.result = run.layers.unwrap(run.outcome)
        except Exception as error:  # a paused tool: every handler raises it, the caller gets the event
            run.failure = error
