"""Observation-only, fault-isolated wrappers around contributed hooks (see docs/concepts/extensions.md).

A wrap hook is an ``async def hook(request, handler)`` that awaits ``handler(request)`` once. The host
drives the hook's coroutine itself (as a Task would) instead of awaiting it, so the downstream stream
events still flow out of the loop's generators *while* the hook waits on ``handler``: the handler's
awaitable passes each event up (as the ``_EMIT`` marker) through the hook's ``await`` to the driver, which
yields it; anything else the coroutine yields (futures, bare yields) goes to the event loop unchanged. The
whole call stays in the invocation's task, so cancel and the model-wait interrupter work as without hooks.

The driver tracks the downstream call, so recovering from a hook's fault never adds a model request or a
tool side effect: downstream always runs once, with the original request, and the caller gets its real
result (or its exception). Interrupts raised downstream always propagate.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncGenerator, Callable
from types import CoroutineType
from typing import Any

from ray_harness.extensions.types import (
    AgentMiddleware,
    ExtensionData,
    LifecycleContext,
    Placement,
    _current_store,
    reset_task_store,
    set_task_store,
)

__all__ = ("Wrapper", "diagnostic", "logger", "run_lifecycle", "wrap_layer")

logger = logging.getLogger("ray_harness.extensions")

Inner = Callable[[Any], AsyncGenerator[Any, None]]
ResultType = type | tuple[type, ...]
"""The type(s) of the event that is downstream's result (an isinstance check per event, not a call)."""
_MISSING: Any = object()


def diagnostic(use: str, owner: str, hook: str, error: Any) -> None:
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
"""What the handler's awaitable yields up through the hook for a stream event (in ``_Call.emitted``)."""


class _Forward:
    """Hands one item the hook's coroutine yielded (a future, or None for a bare yield) to the event loop."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item

    def __await__(self) -> Any:
        return (yield self.item)


class _Abort(BaseException):
    """Thrown into a hook whose consumer went away, so its ``await handler`` unwinds (and closes downstream)."""


class _Call:
    """One downstream call behind one hook invocation."""

    __slots__ = ("buffer", "calls", "driving", "emitted", "error", "finished", "inner", "is_result", "outcome",
                 "request", "started", "task", "unwrap", "waiter")

    def __init__(self, inner: Inner, request: Any, is_result: ResultType,
                 unwrap: Callable[[Any], Any]) -> None:
        self.inner = inner
        self.request = request
        self.is_result = is_result
        self.unwrap = unwrap
        self.calls = 0
        self.started = False
        self.finished = False
        self.driving = False
        self.outcome: Any = _MISSING
        self.error: BaseException | None = None
        self.task: Any = None
        self.buffer: list[Any] = []
        self.waiter: asyncio.Future[None] | None = None
        self.emitted: Any = None


class _Handler:
    """The ``handler`` a wrap hook receives. Whatever request it is given, downstream gets the original."""

    __slots__ = ("_call",)

    def __init__(self, call: _Call) -> None:
        self._call = call

    def __call__(self, request: Any = None) -> _Pending:
        call = self._call
        call.calls += 1
        if call.calls > 1:
            raise RuntimeError("handler was already called: a contributed wrap hook may call it once "
                               "(the host returns the first result)")
        return _Pending(call)


class _Pending:
    __slots__ = ("_call",)

    def __init__(self, call: _Call) -> None:
        self._call = call

    def __await__(self) -> Any:
        call = self._call
        if call.started:
            raise RuntimeError("the awaitable returned by handler() was already awaited")
        call.started = True
        inner = call.inner(call.request)
        exhausted = at_emit = False
        try:
            while True:
                try:
                    event = yield from inner.__anext__().__await__()
                except StopAsyncIteration:
                    exhausted = True
                    break
                if isinstance(event, call.is_result):
                    call.outcome = event
                elif call.driving and asyncio.current_task() is call.task:
                    at_emit = True
                    call.emitted = event
                    yield _EMIT
                    at_emit = False
                else:  # the hook awaits handler in another task: the driver passes these on later
                    call.buffer.append(event)
        except GeneratorExit:
            call.finished = True
            raise
        except BaseException as error:
            call.error = error
            exhausted = not at_emit  # thrown into inner, it ended inner; thrown at our own yield, inner waits
            raise
        finally:
            if not exhausted and not call.finished:
                yield from inner.aclose().__await__()
            call.finished = True
            if call.waiter is not None and not call.waiter.done():
                call.waiter.set_result(None)
        return call.unwrap(call.outcome)


def wrap_layer(wrapper: Wrapper, hook_name: str, view: Callable[[Any], Any], inner: Inner,
               is_result: ResultType, unwrap: Callable[[Any], Any], store: ExtensionData,
               pass_through: Callable[[BaseException], bool] = lambda error: False) -> Inner:
    """The layer ``request -> events`` that runs ``wrapper``'s ``hook_name`` around ``inner``.

    ``view(request)`` is what the hook sees (a shallow copy); ``unwrap(result_event)`` is what ``handler``
    returns; ``pass_through(error)`` marks a downstream exception that stands for a result event (a
    paused tool) rather than a failure.
    """
    hook = getattr(wrapper.middleware, hook_name)

    def layer(request: Any) -> AsyncGenerator[Any, None]:
        return _drive(wrapper, hook_name, hook, view, request, _Call(inner, request, is_result, unwrap), store,
                      pass_through)

    return layer


def _start_hook(hook: Any, view: Callable[[Any], Any], request: Any, call: _Call,
                store: ExtensionData, outer: bool) -> tuple[Any, BaseException | None]:
    """Call the hook on ``view(request)`` with the extension's store current: its coroutine's steps, or the error.

    Only the outermost layer of a chain (``outer``) sets the store: inner layers run inside its steps.
    """
    token = _current_store.set(store) if outer else None
    try:
        awaitable = hook(view(request), _Handler(call))
        return (awaitable if type(awaitable) is CoroutineType else awaitable.__await__()), None  # a coroutine steps itself
    except Exception as error:  # a hook that is not a coroutine function, or raised when called
        return None, error
    finally:
        if token is not None:
            _current_store.reset(token)


async def _drive(wrapper: Wrapper, hook_name: str, hook: Any, view: Callable[[Any], Any], request: Any, call: _Call,
                 store: ExtensionData, pass_through: Callable[[BaseException], bool]) -> AsyncGenerator[Any, None]:
    # Per call and per event on every layer: no allocation beyond the call's own objects, and the task store is
    # set only by the outermost layer of a chain (inner layers run inside its steps, where it is already set).
    call.task = asyncio.current_task()
    outer = _current_store.get() is not store
    steps, hook_error = _start_hook(hook, view, request, call, store, outer)
    value: Any = None
    thrown: BaseException | None = None
    while steps is not None:
        token = _enter(store, outer)
        call.driving = True
        try:
            yielded = steps.send(value) if thrown is None else steps.throw(thrown)
        except StopIteration:
            break
        except _Abort:
            raise GeneratorExit from None
        except Exception as error:
            hook_error = error
            break
        finally:
            call.driving = False
            _leave(token)
        value = thrown = None
        while call.buffer:
            yield call.buffer.pop(0)
        if yielded is _EMIT:
            try:
                yield call.emitted
            except GeneratorExit:
                await _abort(steps)
                raise
            continue
        try:
            value = await _Forward(yielded)
        except BaseException as error:  # cancellation and the like go into the hook, as a Task would
            thrown = error
    if _well_behaved(call, hook_error):  # the common case: one call of handler, its outcome returned
        if call.outcome is not _MISSING:
            yield call.outcome
        return
    async for event in _settle(wrapper, hook_name, request, call, hook_error, pass_through):
        yield event


def _enter(store: ExtensionData, outer: bool) -> Any:
    return _current_store.set(store) if outer else None


def _leave(token: Any) -> None:
    if token is not None:
        reset_task_store(token)


def _well_behaved(call: _Call, hook_error: BaseException | None) -> bool:
    return hook_error is None and call.finished and call.error is None and not call.buffer


async def _settle(wrapper: Wrapper, hook_name: str, request: Any, call: _Call, hook_error: BaseException | None,
                  pass_through: Callable[[BaseException], bool]) -> AsyncGenerator[Any, None]:
    """After the hook: run downstream if it never ran, then give the caller downstream's real outcome."""
    if not call.started:
        reason = hook_error if hook_error is not None else "the hook did not call handler; the host called it"
        wrapper.diagnostic(hook_name, reason)
        async for event in call.inner(request):
            yield event
        return
    if not call.finished:  # the hook returned while handler still runs elsewhere: its result is the answer
        call.waiter = asyncio.get_running_loop().create_future()
        await call.waiter
    while call.buffer:
        yield call.buffer.pop(0)
    if call.error is not None:
        paused = pass_through(call.error)
        if hook_error is not None and hook_error is not call.error and not paused:
            wrapper.diagnostic(hook_name, hook_error)
        if paused and call.outcome is not _MISSING:
            yield call.outcome
            return
        raise call.error
    if hook_error is not None:
        wrapper.diagnostic(hook_name, hook_error)
    if call.outcome is not _MISSING:
        yield call.outcome


async def _abort(steps: Any) -> None:
    """The consumer left mid-call: unwind the hook (its ``await handler`` closes downstream), then stop."""
    thrown: BaseException | None = _Abort()
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
