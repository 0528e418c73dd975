"""Observation-only, fault-isolated wrappers around contributed hooks (see docs/concepts/extensions.md).

A wrap hook is an ``async def hook(request, handler)`` that awaits ``handler(request)`` once. The host
drives the outermost hook's coroutine itself (as a Task would) instead of awaiting it, so the downstream
stream events still flow out of the loop's generators *while* the hooks wait on ``handler``. The hooks of
one placement nest by generator delegation: awaiting a handler runs the next hook in the same chain of
frames, and only the innermost handler iterates downstream. It passes each stream event up (as the
``_EMIT`` marker) through every hook's ``await`` to the one driver, which yields it; anything else the hooks
yield (futures, bare yields) goes to the event loop unchanged. The whole call stays in the invocation's
task, so cancel and the model-wait interrupter work as without hooks.

The innermost handler steps downstream itself (:func:`_boundary`) and waits on a proxy of each future
downstream waits on, so a cancel of the task stops the hooks' wait first, never downstream's. A hook's own
timeout around ``handler`` (``async with asyncio.timeout(5)``, or ``asyncio.wait_for`` run inline) then ends
its wait only: downstream stays where it waits, and resumes (to its end, once) as soon as a hook has taken the
cancel; the caller gets its real result. A cancel nobody withdrew (``Task.uncancel``, as a timeout does) is
the caller's: it reaches downstream next, as without hooks; the agent's own model-wait interrupter reaches it
first, so the hooks see the cancelled stop.

Downstream runs once per call, tracked by the call itself, so recovering from a hook's fault never adds a
model request or a tool side effect: downstream always gets the original request, and the caller gets its
real result (or its exception). Interrupts raised downstream always propagate. A hook that awaits ``handler``
in a task of its own (``asyncio.wait_for(handler(request), 5)``) gets downstream run in a task of its own too,
which only the call can cancel: a hook that stops waiting cannot cancel a tool or a model request.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncGenerator, Callable, Generator
from functools import partial
from types import CoroutineType, GeneratorType
from typing import Any, TypeVar

from ray_harness.extensions.types import (
    AgentMiddleware,
    ExtensionData,
    LifecycleContext,
    Placement,
    _current_store,
    reset_task_store,
    set_task_store,
)

__all__ = ("Layers", "Wrapper", "diagnostic", "logger", "run_lifecycle", "shared_copy")

logger = logging.getLogger("ray_harness.extensions")

Inner = Callable[[Any], AsyncGenerator[Any, None]]
ResultType = type | tuple[type, ...]
"""The type(s) of the event that is downstream's result (an isinstance check per event, not a call)."""
_MISSING: Any = object()
F = TypeVar("F", bound=Callable[..., Any])


def diagnostic(use: str, owner: str, hook: str, error: Any) -> None:
    if isinstance(error, BaseException) and not str(error):  # TimeoutError(), CancelledError(): say which
        error = type(error).__name__
    logger.warning("Extension %s: %s.%s failed and was skipped: %s", use, owner, hook, error)


class Wrapper:
    """One contribution in one chain: ``name`` is its trace identity (``extension_<use>_<Class>_<n>``)."""

    __slots__ = ("middleware", "name", "order", "placement", "use")

    def __init__(self, use: str, middleware: AgentMiddleware, placement: Placement, order: int, name: str) -> None:
        self.use = use
        self.middleware = middleware
        self.placement = placement
        self.order = order
        self.name = name

    def diagnostic(self, hook: str, error: Any) -> None:
        diagnostic(self.use, type(self.middleware).__name__, hook, error)

    def __repr__(self) -> str:
        return f"<{self.name} at {self.placement.name}>"


_EMIT: Any = object()
"""What the innermost handler yields up through every hook of a chain for a stream event (in ``_Run.emitted``)."""
_NEW, _STARTED, _FINISHED = 0, 1, 2
"""The phases of one entry of a chain (``_Run.phase``): not entered yet, running, done."""


class Layers:
    """The wrap hooks of one placement, composed once; :meth:`run` drives all of them around one downstream call.

    The hooks nest as plain generator delegation (``yield from``): each ``await handler(...)`` runs the next
    hook in the same frame chain, and only the innermost handler iterates downstream. A stream event then
    costs each layer one resumed frame, and a layer costs one handler, one view and one generator per call.
    """

    __slots__ = ("count", "handout", "hook_name", "hooks", "is_result", "unwrap", "view", "wrappers")

    def __init__(self, wrappers: list[Wrapper], hook_name: str, view: Callable[[Any], Any], is_result: ResultType,
                 unwrap: Callable[[Any], Any], handout: Callable[[_Run], Any] | None = None) -> None:
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
        return _drive(_Run(self, inner, request, store, interrupted))


class _Run:
    """One downstream call behind a chain's hooks: its events on their way out and its real outcome.

    Entry ``k`` of the chain runs hook ``k`` (entry ``count`` runs downstream); entry 0 is the driver's own,
    and the handler hook ``k`` receives enters ``k + 1``. ``phase[k]`` tracks entry ``k``, so a handler is a
    plain ``partial`` of :func:`_enter` (no object, no Python call of its own).
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
        self.phase = [_NEW] * (layers.count + 1)
        self.outcome: Any = _MISSING
        self.result: Any = None  # downstream's real result: the caller gets it, the hooks a copy (``handed``)
        self.handed: Any = _MISSING  # the copy of the result last handed to a hook (see shared_copy)
        self.error: BaseException | None = None  # downstream's own exception: the caller gets it
        self.failure: BaseException | None = None  # what every handler raises (the error, or a paused tool)
        self.raised: dict[int, BaseException] | None = None  # entry -> what it raised into the hook awaiting it
        self.waiters: dict[int, asyncio.Future[None]] | None = None  # entry -> a settling hook waiting for it
        self.buffer: list[Any] = []  # events produced while a hook awaits handler in another task
        self.emitted: Any = None
        self.driving = False
        self.task: Any = None
        self.detached: asyncio.Task[None] | None = None  # downstream in a task of its own (see _detach_inner)
        self.interrupted = interrupted
        self.baseline = 0  # the task's cancel requests when the call started: more are pending cancels
        self.down: Generator[Any, Any, None] | None = None  # downstream, stepped by _boundary
        self.pending: Any = None  # what downstream waits on while orphaned
        self.orphaned = False  # a cancel ended the hooks' wait while downstream waits: it resumes after them
        self.hooks_gone = False  # every hook has ended: a cancel now is downstream's


def _iterable_coroutine(function: F) -> F:
    """Make a generator function's generators awaitable and able to ``yield from`` a native coroutine.

    What ``types.coroutine`` does to a generator function, type-preserving.
    """
    function.__code__ = function.__code__.replace(co_flags=function.__code__.co_flags | inspect.CO_ITERABLE_COROUTINE)
    return function


@_iterable_coroutine
def _enter(run: _Run, index: int, request: Any = None) -> Generator[Any, Any, Any]:
    """What awaiting a handler does: hook ``index`` around the rest of the chain, or downstream itself.

    ``request`` is ignored (observation only). Awaiting it runs the rest of the chain once and returns
    downstream's result (or raises its exception).

    The awaitable is a generator-based coroutine, so a hook's ``await`` delegates to it directly and each
    hook's coroutine is delegated to in turn: no awaitable object or wrapper per layer.

    Raises:
        RuntimeError: a second call of the same handler (the host returns the first result).
    """
    phase = run.phase
    if phase[index] != _NEW:
        raise RuntimeError("handler was already called: a contributed wrap hook may call it once "
                           "(the host returns the first result)")
    phase[index] = _STARTED
    layers = run.layers
    try:
        if index == layers.count:
            # a foreign task (a hook's own, e.g. wait_for's) awaits handler while the driver is not stepping
            yield from (_boundary(run) if run.driving else _detach_inner(run))
        else:
            hook_error: BaseException | None = None
            try:
                awaitable = layers.hooks[index](layers.view(run.request), partial(_enter, run, index + 1))
                yield from (awaitable if type(awaitable) is CoroutineType  # type: ignore[misc]
                            else _awaited(awaitable, layers.hook_name))
            except asyncio.CancelledError as error:
                hook_error = _own_cancel(run, error)
            except Exception as error:  # the hook's own fault, or the handler's exception it let through
                hook_error = error
            if hook_error is not None or phase[index + 1] != _FINISHED or run.orphaned:
                yield from _settle(run, index + 1, hook_error)
    except BaseException as error:
        _record(run, index, error)
        raise
    finally:
        phase[index] = _FINISHED
        if run.waiters is not None:
            _release(run, index)
    if run.detached is not None or run.failure is not None:
        yield from _after_entry(run, index)
    if run.failure is not None and index:  # the driver's own entry (0) leaves the outcome to the driver
        _record(run, index, run.failure)
        raise run.failure
    return layers.handout(run) if index else None


def _own_cancel(run: _Run, error: asyncio.CancelledError) -> asyncio.CancelledError:
    """A ``CancelledError`` out of a hook, if it is the hook's fault (a cancel it made and withdrew itself).

    Raises:
        asyncio.CancelledError: ``error``, when it is downstream's own or a cancel nobody withdrew (the caller's).
    """
    if error is run.failure or asyncio.current_task() is not run.task or _cancel_pending(run):
        raise error
    return error


def _record(run: _Run, index: int, error: BaseException) -> None:
    """Entry ``index`` raises ``error`` into the hook awaiting it (so that hook letting it through is no fault)."""
    if run.raised is None:
        run.raised = {}
    run.raised[index] = error


def _release(run: _Run, index: int) -> None:
    """Entry ``index`` ended: wake a settling hook that waits for it (see :func:`_settle`)."""
    waiter = run.waiters.pop(index, None) if run.waiters is not None else None
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _after_entry(run: _Run, index: int) -> Generator[Any, Any, None]:
    """What entry ``index`` settles after its hook (or downstream) ended, before answering the hook that awaits it."""
    if run.detached is not None and not run.detached.done():
        # a hook stopped waiting for a detached downstream (a timeout around handler): its outcome is the answer
        yield from _until_done(run.detached)


def _cancel_pending(run: _Run) -> bool:
    """Whether the call's task has a cancel request nobody withdrew since the call started (the caller's cancel)."""
    task = run.task
    return task is not None and task.cancelling() > run.baseline


def _boundary(run: _Run, thrown: BaseException | None = None) -> Generator[Any, Any, None]:
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
            else:  # a stream event (_EMIT) or a bare yield
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


def _detach_inner(run: _Run) -> Generator[Any, Any, None]:
    """Downstream, entered from a task a hook started (``await asyncio.wait_for(handler(request), 5)``).

    It runs in a task of its own that only the call itself can cancel (see :func:`_drive`): a hook that
    stops waiting (a timeout, a cancel of its own task) ends its wait, never the model request or the tool;
    the caller still gets downstream's real outcome, once it is there.
    """
    task = run.detached = asyncio.get_running_loop().create_task(_downstream(run))
    yield from _until_done(task)


async def _downstream(run: _Run) -> None:
    try:
        await _InnerAwaitable(run)
    except BaseException:  # recorded on the run by _inner (error, failure): the chain raises it
        pass


class _InnerAwaitable:
    __slots__ = ("run",)

    def __init__(self, run: _Run) -> None:
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


def _cancel_handled_downstream(run: _Run) -> bool:
    """Whether the call's cancel reached its detached downstream, which took it and ended with a result.

    An agent's cancel interrupts the provider wait by cancelling the invocation's task; with downstream in a
    task of its own that cancel lands on the hooks' wait instead, and :func:`_stop_detached` passes it on. The
    model call then ends with its cancelled stop and withdraws the cancel request (``uncancel``): the caller gets
    that result, as without hooks. A cancel nobody withdrew still propagates.
    """
    task = asyncio.current_task()
    return (run.detached is not None and run.error is None and run.outcome is not _MISSING and task is not None
            and task.cancelling() == 0)


async def _stop_detached(run: _Run) -> None:
    """The call ends early (cancelled, or its consumer left): cancel a detached downstream and let it unwind first."""
    task = run.detached
    if task is not None and not task.done():
        task.cancel()
        await asyncio.wait([task])


def _real(run: _Run) -> Any:
    return run.result


def shared_copy(detach: Callable[[Any], Any]) -> Callable[[_Run], Any]:
    """A ``handout``: ``detach(result)``, one copy per call shared by the hooks while none changes it.

    Before the copy is handed on, it is compared with the real result (in C, for JSON-shaped data), and copied
    afresh if a hook changed it in place.
    """

    def handout(run: _Run) -> Any:
        handed = run.handed
        if handed is not _MISSING:
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


def _inner(run: _Run) -> Generator[Any, Any, None]:
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
                yield _EMIT
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
    if run.outcome is not _MISSING:
        try:
            run.result = run.layers.unwrap(run.outcome)
        except Exception as error:  # a paused tool: every handler raises it, the caller gets the event
            run.failure = error


def _settle(run: _Run, index: int, hook_error: BaseException | None) -> Generator[Any, Any, None]:
    """After hook ``index - 1`` misbehaved or took a cancel: run entry ``index`` if it never ran, or wait for it.

    It waits for an entry that still runs, diagnoses, and resumes downstream if a cancel left it waiting (see
    :func:`_boundary`).
    """
    wrapper = run.layers.wrappers[index - 1]
    hook_name = run.layers.hook_name
    phase = run.phase[index]
    if phase == _NEW:
        wrapper.diagnostic(hook_name, hook_error if hook_error is not None
                           else "the hook did not call handler; the host called it")
        try:
            yield from _enter(run, index)
        except Exception:  # downstream's outcome is on the run: the caller gets it from there
            pass
        return
    if phase != _FINISHED:  # the hook returned while handler still runs in another task: its result is the answer
        if run.waiters is None:
            run.waiters = {}
        waiter = run.waiters[index] = asyncio.get_running_loop().create_future()
        yield from waiter
    if hook_error is not None and hook_error is not (run.raised or {}).get(index):
        wrapper.diagnostic(hook_name, hook_error)
    if run.orphaned:
        try:
            yield from _boundary(run)
        except Exception:  # downstream's outcome is on the run: the caller gets it from there
            pass


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


def _step(run: _Run, steps: Generator[Any, Any, Any], value: Any, thrown: BaseException | None,
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


def _advance(run: _Run, steps: Generator[Any, Any, Any], value: Any, thrown: BaseException | None,
             store: ExtensionData | None) -> tuple[Generator[Any, Any, Any], Any]:
    """One step of the call (see :func:`_step`): the steps it now takes, and what they yielded.

    Once a cancel went through every hook with downstream still waiting (see :func:`_boundary`), the cancel is
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
        steps, value, thrown = _boundary(run, thrown), None, None


async def _drive(run: _Run) -> AsyncGenerator[Any, None]:
    """The one async generator of a call: steps the outermost hook (as a Task would) and yields the events.

    The task store is set around each step only by the outermost chain (inner chains run inside its steps).
    """
    store = run.store
    task = run.task = asyncio.current_task()
    run.baseline = task.cancelling() if task is not None else 0
    outer = _current_store.get() is not store
    steps: Generator[Any, Any, Any] = _enter(run, 0)
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
                if yielded is _EMIT:
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
        await _stop_detached(run)
        if not (isinstance(error, asyncio.CancelledError) and _cancel_handled_downstream(run)):
            raise
    while run.buffer:
        yield run.buffer.pop(0)
    if run.error is not None:
        raise run.error
    if run.outcome is not _MISSING:
        yield run.outcome


async def _abort(run: _Run, steps: Generator[Any, Any, Any]) -> None:
    """The consumer left mid-call: unwind the hooks (the innermost ``await handler`` closes downstream), then stop.

    A downstream a cancel left waiting while a hook was still busy (see :func:`_boundary`) unwinds after them.
    """
    await _unwind(steps, _Abort())
    if run.orphaned:
        run.hooks_gone = True
        await _unwind(_boundary(run, _Abort()), None)  # a new generator: it throws its own _Abort in


async def _unwind(steps: Generator[Any, Any, Any], thrown: BaseException | None) -> None:
    """Step ``steps`` to their end, throwing ``thrown`` in first; the stream events they still emit are dropped."""
    value: Any = None
    while True:
        try:
            yielded = steps.send(value) if thrown is None else steps.throw(thrown)
        except BaseException:
            return
        thrown = value = None
        if yielded is _EMIT:
            continue
        try:
            value = await _Forward(yielded)
        except BaseException as error:
            thrown = error


async def run_lifecycle(wrappers: list[Wrapper], hook: str, ctx: LifecycleContext, store: ExtensionData) -> None:
    """Run ``hook`` (async form preferred) of each wrapper; a returned dict updates ``agent.state``.

    A hook that raises, or returns something that is neither None nor a JSON-serializable dict, gets the
    diagnostic and changes nothing.
    """
    for wrapper in wrappers:
        middleware = wrapper.middleware
        function = getattr(middleware, "a" + hook, None) or getattr(middleware, hook, None)
        if function is None:
            continue
        name = function.__name__ if hasattr(function, "__name__") else hook
        token = set_task_store(store)
        try:
            update = function(ctx)
            if inspect.isawaitable(update):
                update = await update
        except Exception as error:
            wrapper.diagnostic(name, error)
            continue
        finally:
            reset_task_store(token)
        if update is None:
            continue
        try:
            _apply_state(ctx.agent, update)
        except (TypeError, ValueError) as error:
            wrapper.diagnostic(name, error)


def _apply_state(agent: Any, update: Any) -> None:
    import json

    if not isinstance(update, dict):
        raise TypeError(f"a lifecycle hook returns a dict (an agent.state update) or None, got {type(update).__name__}")
    for key, value in update.items():  # checked whole first: a bad entry means no update at all
        if not isinstance(key, str) or not key:
            raise ValueError(f"state key must be a non-empty string, got {key!r}")
        json.dumps(value)
    for key, value in update.items():
        agent.state.set(key, value)
