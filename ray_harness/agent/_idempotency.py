"""``idempotency_token=``: a call naming the running invocation's token gets that invocation's result (as Strands).

A retried request (a client that timed out and sent it again) must not run the agent twice, nor fail with
``ConcurrencyException``: it waits for the invocation already running under its token and returns the same
``AgentResult``. Tokens are matched with ``==`` (they need not be hashable). The agent entry points come here only
when a token is given, so a call without one costs exactly what it did before.

The first call with a token claims the agent's slot (``agent._inflight``) *before* it takes the agent's lock: a
duplicate arriving while the first is between the two still finds it. The slot is freed and the waiters woken when
that call ends — with its result, with the exception it raised (each waiter raises the same), or with
:class:`~ray_harness.types.exceptions.IdempotencyAbortedError` when it was stopped without either (its task
cancelled, its stream closed early). Waiters may sit on other threads' event loops (``agent(...)`` from several
threads): each is woken through its own loop's ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ray_harness.types.exceptions import IdempotencyAbortedError

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.agent.result import AgentResult

__all__ = ("Inflight", "invoke_once", "stream_once")

# Guards every agent's ``_inflight`` slot; held for a read and an assignment only (token paths only).
_SLOTS = threading.Lock()


class Inflight:
    """The running invocation that claimed a token, and what it ended with once ``done`` is set."""

    __slots__ = ("done", "error", "result", "token")

    def __init__(self, token: Any) -> None:
        self.token = token
        self.result: AgentResult | None = None
        self.error: BaseException | None = None
        self.done: concurrent.futures.Future[None] = concurrent.futures.Future()  # thread-safe: waiters on any loop


async def invoke_once(agent: Agent, token: Any, start: Callable[[], Awaitable[AgentResult]]) -> AgentResult:
    """``invoke_async`` with a token: ``start()`` runs the invocation unless ``token``'s is running already."""
    inflight, first = _claim(agent, token)
    if inflight is not None and not first:
        outcome = await _outcome(inflight)
        if agent.callback_handler is not None:  # the handler hears the result, as a streamed duplicate's does
            agent.callback_handler(type="result", result=outcome)
        return outcome
    if inflight is None:  # another token's invocation runs: this call meets it as a call without a token would
        return await start()
    result: AgentResult | None = None
    error: BaseException | None = None
    try:
        result = await start()
        return result
    except Exception as caught:
        error = caught
        raise
    finally:
        _settle(agent, inflight, result, error)


async def stream_once(agent: Agent, token: Any, start: Callable[[], AsyncGenerator[dict[str, Any], None]]
                      ) -> AsyncGenerator[dict[str, Any], None]:
    """``stream_async`` with a token; a duplicate yields only the result event (the callback handler hears it)."""
    inflight, first = _claim(agent, token)
    if inflight is not None and not first:
        event = {"type": "result", "result": await _outcome(inflight)}
        if agent.callback_handler is not None:
            agent.callback_handler(**event)
        yield event
        return
    result: Any = None
    error: BaseException | None = None
    try:
        events = start()
        try:
            async for event in events:
                if event.get("type") == "result":
                    result = event["result"]  # the last one is the invocation's (as invoke_async takes it)
                yield event
        finally:
            await events.aclose()
    except Exception as caught:
        error = caught
        raise
    finally:
        if inflight is not None:  # None: another token's invocation owns the slot
            _settle(agent, inflight, result, error)


def _claim(agent: Agent, token: Any) -> tuple[Inflight | None, bool]:
    """``(slot, True)``: this call runs and owns the slot; ``(slot, False)``: a duplicate; ``(None, False)``: neither."""
    with _SLOTS:
        inflight = agent._inflight
        if inflight is None:
            agent._inflight = inflight = Inflight(token)
            return inflight, True
    # Compared outside the lock: ``__eq__`` is the caller's code. If that invocation ends meanwhile, the
    # duplicate finds it settled and returns its result at once.
    if inflight.token == token:
        return inflight, False
    return None, False


def _settle(agent: Agent, inflight: Inflight, result: AgentResult | None, error: BaseException | None) -> None:
    """Free the slot, then wake the waiters with the outcome (an exception wins over a result)."""
    with _SLOTS:
        if agent._inflight is inflight:
            del agent._inflight  # back to the class default (None): an idle agent's dict has no slot
    if error is None and result is None:
        error = IdempotencyAbortedError("the invocation this call waited on was stopped before it had a result")
    inflight.error, inflight.result = error, (None if error is not None else result)
    inflight.done.set_result(None)


async def _outcome(inflight: Inflight) -> AgentResult:
    """Wait (on this thread's loop) until ``inflight`` has settled; its result, or its exception raised."""
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def wake(_: object) -> None:
        try:
            loop.call_soon_threadsafe(_set, woken)
        except RuntimeError:  # a cancelled waiter's loop has closed: nobody to wake
            pass

    # Cancelling this waiter cancels ``woken`` only, never the shared future the other waiters sit on.
    inflight.done.add_done_callback(wake)
    await woken
    if inflight.error is not None:
        raise inflight.error
    assert inflight.result is not None  # _settle sets one of the two
    return inflight.result


def _set(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
