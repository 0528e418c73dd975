"""One invocation as plain coroutines, for a caller that wants only its result (``invoke_async``).

The same steps as :func:`ray_harness.agent.loop.run_invocation` — the same hooks, middleware, extensions, metrics,
spans, rollback and cancel — built from the same helpers, but with none of its generator layers: each costs
asyncio's first-iteration hook (a weak reference in the loop's set of generators), an ``asend`` per event and an
``aclose``, and nobody reads the events they carry. A cycle that produces events anyway (middleware, an extension,
a streamed tool half) still runs as the generator :func:`~ray_harness.agent.loop.begin_cycle` returns; its events
are dropped here, as ``invoke_async`` drops them.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from ray_harness.agent._model_call import _cancelled_stop
from ray_harness.agent.limits import Limits
from ray_harness.agent.loop import (
    admit_prompt,
    begin_cycle,
    begin_invocation,
    close_invocation,
    end_cycle,
    end_invocation,
    end_recursions,
    open_cycle,
    open_invocation,
    resume_after,
    round_failed,
    round_prompt,
    start_invocation,
    stop_at_cycle_top,
)
from ray_harness.agent.result import AgentResult
from ray_harness.agent.trace import CycleNote
from ray_harness.hooks.events import AfterInvocationEvent

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.agent.loop import Invocation

__all__ = ("invoke_quietly",)


async def invoke_quietly(agent: Agent, prompt: Any, invocation_state: dict[str, Any] | None, limits: Limits | None,
                         structured_output_model: type | None, cancel_signal: threading.Event | None,
                         kwargs: dict[str, Any]) -> AgentResult:
    """``invoke_async`` when no callback handler hears the events: the invocation's result only.

    Raises:
        TypeError, ValueError, ConcurrencyException: As ``stream_async`` (``loop.begin_invocation``).
    """
    inv = begin_invocation(agent, invocation_state, limits, structured_output_model, cancel_signal, kwargs,
                           quiet=True)
    try:
        # run_invocation's metrics and span around the rounds (in this coroutine: a layer costs a coroutine too).
        chain, reporting = open_invocation(agent, inv)
        final: AgentResult | None = None
        error: BaseException | None = None
        try:
            if chain is not None:
                await chain.lifecycle("before_agent")
            final = await _rounds(agent, prompt, inv)
            if chain is not None:
                await chain.lifecycle("after_agent", final)
            return final
        except BaseException as caught:
            error = caught
            raise
        finally:
            close_invocation(agent, inv, final, error, reporting)
    finally:
        end_invocation(agent)


async def _rounds(agent: Agent, prompt: Any, inv: Invocation) -> AgentResult:
    """The prompt's round and those an ``AfterInvocationEvent`` hook resumes with (``loop._run_invocation``)."""
    if not await start_invocation(agent, inv):
        return inv.result("cancelled", _cancelled_stop(agent).message)
    current: Any = prompt
    while True:
        start_length, new_messages = round_prompt(agent, inv, current)
        result: AgentResult | None = None
        try:
            result = await admit_prompt(agent, inv, new_messages)
            if result is None:
                result = await _cycles(agent, inv)
                agent.conversation_manager.apply_management(agent)
        except BaseException as error:
            await round_failed(agent, inv, start_length, error)
            raise
        # No event, nor coroutine, for nobody: most agents have no AfterInvocationEvent callback.
        current = await resume_after(agent, inv, result) if agent.hooks.has_callbacks(AfterInvocationEvent) else None
        if current is None:
            return result


async def _cycles(agent: Agent, inv: Invocation) -> AgentResult:
    """The invocation's cycles (``loop._cycles``); the result of the one that ended it."""
    recursions: list[CycleNote] = []  # cycles whose "Recursive call" (Strands) lasts until the invocation ends
    try:
        while True:
            stop = await stop_at_cycle_top(agent, inv) if inv.may_stop else None  # no coroutine for most cycles
            if stop is not None:
                return stop
            ended: AgentResult | None = None
            cycle: AsyncGenerator[Any, None] | None = None
            started, note = open_cycle(agent, inv)
            error: BaseException | None = None
            try:
                begun = await begin_cycle(agent, inv)
                if isinstance(begun, AgentResult):
                    ended = begun
                elif begun is not None:
                    cycle = begun
                    async for event in cycle:
                        if isinstance(event, AgentResult):
                            ended = event
            except BaseException as caught:
                error = caught
                raise
            finally:
                if cycle is not None:
                    await cycle.aclose()
                end_cycle(inv, started, recursing=ended is None and error is None, error=error)
            if ended is not None:
                return ended
            recursions.append(note)
    finally:
        if recursions:
            end_recursions(recursions)
