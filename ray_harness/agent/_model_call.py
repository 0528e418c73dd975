"""One model call: hooks, the ``InvokeModelStage`` middleware chain, retries, overflow recovery, cancel."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ray_harness.agent.agent_metadata import agent_metadata_kwargs
from ray_harness.agent.streaming import StreamState, process_stream, read_stream
from ray_harness.hooks.events import AfterModelCallEvent, BeforeModelCallEvent, ModelStopResponse
from ray_harness.middleware.types import InvokeModelContext, InvokeModelStage, MiddlewareError, ModelStopReason
from ray_harness.models.base import estimate_tokens
from ray_harness.models.rate_limit import rate_limited
from ray_harness.telemetry.metrics import live_sinks, model_call as report_model_call
from ray_harness.telemetry.tracing import chat_attributes, chat_result_attributes
from ray_harness.types.exceptions import (
    ContextWindowOverflowException,
    EventLoopException,
    ModelThrottledException,
)

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.agent.loop import Invocation

__all__ = ("call_model", "call_model_quiet", "reads_directly")

logger = logging.getLogger(__name__)

CANCELLED_TEXT = "Cancelled by user"


@dataclass
class _Attempt:
    """What one model call left: its stop reason, or the error for hooks and the retry strategy."""

    stop: ModelStopReason | None = None
    error: Exception | None = None
    overflowed: bool = False
    """The context overflowed and the conversation manager reduced it: the call is made again."""
    # Not fields: set on the rare vetoed or retried attempt only, so every other attempt is made as cheaply as
    # before (a quiet turn makes one per model call). ``vetoed``: a BeforeModelCallEvent hook cancelled the call
    # (``stop`` is its text, and nothing is accounted). ``waited``: the seconds the retry strategy slept after it.
    vetoed = False
    waited: float | None = None


def reads_directly(agent: Agent, inv: Invocation) -> bool:
    """Whether this model turn can run as plain coroutines (:func:`call_model_quiet`).

    So it can when nobody reads its events: a quiet caller, no extension, no ``InvokeModelStage`` middleware.
    Middleware and extensions see (and may yield) the chunk events, so they keep the generator form.
    """
    return inv.quiet and inv.extensions is None and not agent._middleware.has(InvokeModelStage)


async def call_model(agent: Agent, inv: Invocation) -> AsyncGenerator[Any, None]:
    """Yield stream events; the last event is the ``ModelStopReason``."""
    attempt = 0
    while True:
        outcome = await _prepare_call(agent, inv)
        if outcome.stop is None:  # not vetoed
            async with contextlib.aclosing(_attempt(agent, inv, outcome)) as events:
                async for event in events:
                    yield event
            if outcome.overflowed:
                continue  # a reduced conversation is not a retry
        attempt += 1
        stop = await _settle(agent, inv, outcome, attempt)
        if stop is not None:
            yield stop
            return
        if outcome.waited is not None:  # Strands' throttle event, after the wait, before the call again
            yield {"type": "event_loop_throttled", "event_loop_throttled_delay": outcome.waited}


async def call_model_quiet(agent: Agent, inv: Invocation) -> ModelStopReason:
    """:func:`call_model` for a turn nobody reads the events of (:func:`reads_directly`): only its stop.

    The same hooks, retries, overflow recovery, cancel and accounting, with no generator layer (each costs
    asyncio's first-iteration hook, its ``aclose`` and a pass per event; a quiet model turn had five).
    """
    attempt = 0
    while True:
        outcome = await _prepare_call(agent, inv)
        if outcome.stop is None:  # not vetoed
            await _attempt_quiet(agent, inv, outcome)
            if outcome.overflowed:
                continue  # a reduced conversation is not a retry
        attempt += 1
        stop = await _settle(agent, inv, outcome, attempt)
        if stop is not None:
            return stop


def _vetoed(veto: Any) -> ModelStopReason:
    text = veto if isinstance(veto, str) else "model call denied by hook"
    return ModelStopReason(stop_reason="end_turn", message={"role": "assistant", "content": [{"text": text}]})


async def _settle(agent: Agent, inv: Invocation, outcome: _Attempt, attempt: int) -> ModelStopReason | None:
    """After one attempt: ``AfterModelCallEvent`` and the retry strategy; the stop to end with, None to call again.

    Raises:
        Exception: the attempt's error, when neither a hook nor the retry strategy retries it.
    """
    stop, error = outcome.stop, outcome.error
    hooked = agent.hooks.has_callbacks(AfterModelCallEvent)  # no event, nor coroutine, for nobody
    if stop is not None and stop.stop_reason == "cancelled":
        if stop.usage.get("totalTokens"):
            _account(agent, stop)  # a stream cut mid-way was still (partly) processed and billed
        # Hooks hear the call end, as in Strands (a BeforeModelCallEvent is always paired), but no
        # AfterModelCallEvent retry can undo a user's cancel.
        if hooked:
            await _after_model_call_retries(agent, inv, stop, None)
        return stop
    if hooked and await _after_model_call_retries(agent, inv, stop, error):
        if stop is not None and not outcome.vetoed:
            _account(agent, stop)  # the answer a hook discards was still processed and billed (as Strands)
        return None
    if error is not None:
        outcome.waited = await _wait_to_retry(agent, inv, error, attempt)
        if inv.cancelled:
            return _cancelled_stop(agent)
        return None
    assert stop is not None
    _account(agent, stop)
    return stop


async def _prepare_call(agent: Agent, inv: Invocation) -> _Attempt:
    """Before each attempt: proactive compression, then ``BeforeModelCallEvent``; the attempt to make.

    A hook's veto settles the attempt there (its ``stop`` set): no call is made.

    In this order, as in Strands (where compression is a ``BeforeModelCallEvent`` callback the conversation
    manager registers before any other): hooks see the history the model will get, also when one vetoes the
    call; ``projected_input_tokens`` is the estimate from before compression, as there.
    """
    if not agent.hooks.has_callbacks(BeforeModelCallEvent):  # no event built for nobody
        await agent.conversation_manager.before_model_call_async(agent)
        return _Attempt()
    projected = await _projected_input_tokens(agent)
    await agent.conversation_manager.before_model_call_async(agent)
    before, _ = await agent.hooks.invoke_callbacks_async(BeforeModelCallEvent(
        agent=agent, invocation_state=inv.state, projected_input_tokens=projected))
    outcome = _Attempt()
    if before.cancel:
        outcome.stop, outcome.vetoed = _vetoed(before.cancel), True
    return outcome


async def _projected_input_tokens(agent: Agent) -> int | None:
    """About how many input tokens the next call sends, as Strands estimates it (``None``: the count failed).

    The latest call's prompt and answer as the provider counted them, plus the model's ``count_tokens`` of the
    messages added since the last assistant message; before any call (or after a restore), ``count_tokens`` of the
    whole request. ``count_tokens`` is the estimate unless the model counts natively (``use_native_token_count``);
    a model without one is estimated. A failed count leaves the projection out, as Strands does.
    """
    baseline = agent.event_loop_metrics.projected_context_size
    messages = agent.messages
    if baseline is None:
        return await _count_tokens(agent, messages, list(agent.tool_registry.get_all_specs()), agent.system_prompt)
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"), -1)
    added = messages[last + 1:]
    if not added:
        return baseline
    counted = await _count_tokens(agent, added, None, None)
    return None if counted is None else baseline + counted


async def _count_tokens(agent: Agent, messages: Any, specs: Any, system_prompt: Any) -> int | None:
    from ray_harness.models.base import estimate_tokens

    count = getattr(agent.model, "count_tokens", None)
    if count is None:  # a duck-typed model: the estimate
        return estimate_tokens(messages, system_prompt, specs)
    try:
        return int(await count(messages, tool_specs=specs, system_prompt=system_prompt))
    except Exception as error:  # the call goes ahead without a projection (Strands)
        logger.debug("error=<%s> | token count failed; the model call goes ahead without a projection", error)
        return None


async def _attempt(agent: Agent, inv: Invocation, outcome: _Attempt) -> AsyncGenerator[Any, None]:
    """One call through the middleware chain in a ``chat`` span: yields its events and fills ``outcome``."""
    span = inv.tracer.start_span("chat", inv.cycle_span or inv.agent_span, chat_attributes(agent)) \
        if inv.tracer.enabled else None
    events = _invoke_chain(agent, inv)
    try:
        async for event in events:
            if isinstance(event, ModelStopReason):
                outcome.stop = event
            else:
                yield event
        if outcome.stop is None:
            # As a failed call (Strands): AfterModelCallEvent sees it and may retry; otherwise it is raised.
            raise MiddlewareError.no_result(InvokeModelStage)
    except Exception as caught:
        await _failed(agent, outcome, caught)
    finally:
        await events.aclose()
        if span is not None:
            _end_chat_span(inv, span, outcome)


async def _attempt_quiet(agent: Agent, inv: Invocation, outcome: _Attempt) -> None:
    """:func:`_attempt` read directly from the provider (:func:`reads_directly`): fills ``outcome``."""
    span = inv.tracer.start_span("chat", inv.cycle_span or inv.agent_span, chat_attributes(agent)) \
        if inv.tracer.enabled else None
    try:
        if agent._middleware.has(InvokeModelStage):
            # Added by a hook since the turn started: the chain runs; its events have no reader in a quiet turn.
            outcome.stop = await _last_stop(_invoke_chain(agent, inv))
            if outcome.stop is None:
                raise MiddlewareError.no_result(InvokeModelStage)  # as _attempt
        else:
            outcome.stop = await _read_quietly(agent, inv)
    except Exception as caught:
        await _failed(agent, outcome, caught)
    finally:
        if span is not None:
            _end_chat_span(inv, span, outcome)


async def _failed(agent: Agent, outcome: _Attempt, error: Exception) -> None:
    """An attempt raised ``error``: keep it for ``AfterModelCallEvent`` and the retry strategy.

    A context overflow is not kept: the conversation manager reduces the history and the call is made again.

    Raises:
        EventLoopException: ``error`` itself (the loop's own errors are not retried).
        ContextWindowOverflowException: ``error``, when the manager could not reduce the history.
    """
    if isinstance(error, ContextWindowOverflowException):
        await _reduce_context(agent, error)
        outcome.overflowed = True
    elif isinstance(error, EventLoopException):
        raise error
    else:
        outcome.error = error


def _end_chat_span(inv: Invocation, span: Any, outcome: _Attempt) -> None:
    stop = outcome.stop
    result_attributes = chat_result_attributes(stop, inv.tracer.capture_content) if stop is not None else None
    inv.tracer.end_span(span, result_attributes, error=outcome.error)


async def _last_stop(events: AsyncGenerator[Any, None]) -> ModelStopReason | None:
    stop: ModelStopReason | None = None
    try:
        async for event in events:
            if isinstance(event, ModelStopReason):
                stop = event
    finally:
        await events.aclose()
    return stop


async def _read_quietly(agent: Agent, inv: Invocation) -> ModelStopReason:
    """The provider terminal of :func:`_terminal` for a quiet turn, without middleware: a plain coroutine.

    The same request, rate limit, cancel and redaction; the stream is read to its end in one interruptible
    wait (as the terminal's one wait on a quiet ``process_stream``, which yields nothing before the stop).
    """
    if inv.cancelled:
        return _cancelled_stop(agent)
    messages, system_prompt = agent.messages, agent.system_prompt
    specs = list(agent.tool_registry.get_all_specs())
    tool_choice = None
    if inv.structured is not None and inv.structured.value is None:
        specs.append(inv.structured.spec)
        tool_choice = inv.structured.tool_choice()
    offered = specs if inv.structured is None else _offered(inv, specs, tool_choice)  # most invocations: no call
    stream = agent.model.stream(messages, offered or None, system_prompt, tool_choice=tool_choice,  # type: ignore[arg-type]
                                **agent_metadata_kwargs(agent.model, agent.session_manager))
    stream = rate_limited(agent.model, stream, lambda: estimate_tokens(messages, system_prompt, offered or None))
    received = StreamState()
    stop: ModelStopReason | None = None
    requested = not inv.cancelled
    try:
        if requested:
            inv.interruptible_wait = True  # parked on the provider only: this coroutine yields to nobody
            try:
                stop = await read_stream(stream, received)
            except asyncio.CancelledError:
                if not inv.wait_interrupted:
                    raise
                _uncancel(inv)
            finally:
                inv.interruptible_wait = False
    finally:
        try:
            await stream.aclose()
        except Exception:  # as in the terminal: a provider failing to close does not fail the call
            pass
    if stop is not None and received.redact_user is not None and agent.messages:
        _redact_prompt(agent.messages[-1], received.redact_user)  # before anyone reads the stop
    if inv.cancelled or stop is None:
        # The provider saw the request (and maybe streamed part of an answer): estimate what that cost.
        return _cancelled_stop(agent, received.cut_usage(estimate_tokens(messages, system_prompt, offered))
                               if requested else None)
    return stop


async def _reduce_context(agent: Agent, overflow: ContextWindowOverflowException) -> None:
    """Let the conversation manager shorten the history after ``overflow``; it raises when it cannot.

    Raises:
        ContextWindowOverflowException: ``overflow``, also when the manager returned without changing the
            history: calling the model again with the same request would overflow forever.
    """
    before = copy.deepcopy(agent.messages)
    await agent.conversation_manager.reduce_context_async(agent, overflow)
    if agent.messages == before:
        logger.warning("%s.reduce_context left the history unchanged after a context-window overflow; not retrying",
                       type(agent.conversation_manager).__name__)
        raise overflow


async def _after_model_call_retries(agent: Agent, inv: Invocation, stop: ModelStopReason | None,
                                    error: Exception | None) -> bool:
    """Fire ``AfterModelCallEvent`` (the caller asked ``has_callbacks``); True when a hook asked to call again."""
    response = ModelStopResponse(message=stop.message, stop_reason=stop.stop_reason) if stop else None
    after, _ = await agent.hooks.invoke_callbacks_async(
        AfterModelCallEvent(agent=agent, invocation_state=inv.state, stop_response=response, exception=error)
    )
    return bool(after.retry)


async def _wait_to_retry(agent: Agent, inv: Invocation, error: Exception, attempt: int) -> float:
    """Sleep the retry strategy's delay before calling again; return the delay (check ``inv.cancelled`` after).

    Raises:
        Exception: ``error`` itself, when the strategy does not retry it.
    """
    delay = _retry_delay(agent, error, attempt)
    if delay is None:
        raise error
    await _sleep_unless_cancelled(agent, inv, delay)
    return delay


def _retry_delay(agent: Agent, error: Exception, attempt: int) -> float | None:
    strategy = agent.retry_strategy
    if strategy is None:
        return None
    is_retryable = getattr(strategy, "is_retryable", None)  # a duck-typed strategy may have only delay and clock
    if not (is_retryable(error) if callable(is_retryable) else isinstance(error, ModelThrottledException)):
        return None
    hint = getattr(error, "retry_after", None)
    return strategy.delay(attempt, hint if isinstance(hint, int | float) else None)


async def _sleep_unless_cancelled(agent: Agent, inv: Invocation, delay: float) -> None:
    assert agent.retry_strategy is not None
    await inv.wait_unless_cancelled(agent.retry_strategy.clock.sleep(delay))


def _account(agent: Agent, stop: ModelStopReason) -> None:
    prices = getattr(agent.model, "prices", None)
    cost = prices.cost(stop.usage) if prices is not None else 0.0
    latency_ms = int(stop.metrics.get("latencyMs", 0))
    agent.event_loop_metrics.add_usage(stop.usage, latency_ms, cost)
    if live_sinks:
        report_model_call(agent.name, stop.usage, latency_ms / 1000, cost)


def _cancelled_stop(agent: Agent, usage: dict[str, int] | None = None) -> ModelStopReason:
    # ``agent.cancel(message=...)`` ends the history with the caller's text, wherever the cancel landed.
    text = agent._cancel_message if agent._cancel_message is not None else CANCELLED_TEXT
    message: Any = {"role": "assistant", "content": [{"text": text}]}
    if usage is None:
        return ModelStopReason(stop_reason="cancelled", message=message)
    return ModelStopReason(stop_reason="cancelled", message=message, usage=usage)


def _invoke_chain(agent: Agent, inv: Invocation) -> AsyncGenerator[Any, None]:
    specs = list(agent.tool_registry.get_all_specs())
    tool_choice = None
    if inv.structured is not None and inv.structured.value is None:
        specs.append(inv.structured.spec)
        tool_choice = inv.structured.tool_choice()
    middleware = agent._middleware
    if not middleware.has(InvokeModelStage):
        # Fast path: no middleware, no defensive copies (the terminal does not mutate its inputs). Nobody
        # between the model and a quiet caller reads the chunk events, so they are not even produced.
        terminal = _terminal(agent, inv, chunk_events=not inv.quiet)
        if inv.extensions is not None:
            terminal = inv.extensions.physical(terminal)  # MODEL_PHYSICAL: at the provider request
        ctx = InvokeModelContext(agent, agent.messages, agent.system_prompt, specs, tool_choice, inv.state)
        return terminal(ctx)  # type: ignore[no-any-return]
    ctx = InvokeModelContext(agent, copy.deepcopy(agent.messages), agent.system_prompt, copy.deepcopy(specs),
                             copy.deepcopy(tool_choice), inv.state)
    terminal = _terminal(agent, inv, chunk_events=True)
    if inv.extensions is not None:
        terminal = inv.extensions.physical(terminal)
    return middleware.compose(InvokeModelStage, terminal)(ctx)


def _terminal(agent: Agent, inv: Invocation, *, chunk_events: bool) -> Any:
    async def terminal(ctx: InvokeModelContext) -> AsyncGenerator[Any, None]:
        if inv.cancelled:
            yield _cancelled_stop(agent)
            return
        specs = _offered_specs(inv, ctx)
        stream = agent.model.stream(ctx.messages, specs or None, ctx.system_prompt,
                                    tool_choice=ctx.tool_choice,  # type: ignore[arg-type]
                                    **agent_metadata_kwargs(agent.model, agent.session_manager))
        # A rate-limited model waits for its (cluster-wide) permit here, inside the cancellable wait below.
        stream = rate_limited(agent.model, stream, lambda: estimate_tokens(ctx.messages, ctx.system_prompt,
                                                                          specs or None))
        received = StreamState()
        events = process_stream(stream, raw_events=chunk_events, deltas=chunk_events,  # type: ignore[arg-type]
                                state=received)
        requested = False
        try:
            while not inv.cancelled:
                requested = True
                # The flag is up only while parked on the provider, never across our own yields: a cancel
                # then interrupts the wait itself instead of whatever the consumer awaits.
                inv.interruptible_wait = True
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    break
                except asyncio.CancelledError:
                    if not inv.wait_interrupted:
                        raise
                    _uncancel(inv)
                    break
                finally:
                    inv.interruptible_wait = False
                if received.redact_user is not None and isinstance(event, ModelStopReason) and agent.messages:
                    _redact_prompt(agent.messages[-1], received.redact_user)  # before anyone reads the stop
                yield event
        finally:
            with contextlib.suppress(Exception):
                await events.aclose()
            with contextlib.suppress(Exception):
                await stream.aclose()
        if inv.cancelled:
            # The provider saw the request (and maybe streamed part of an answer): estimate what that cost.
            yield _cancelled_stop(agent, received.cut_usage(estimate_tokens(ctx.messages, ctx.system_prompt, specs))
                                  if requested else None)

    return terminal


def _redact_prompt(message: Any, text: str) -> None:
    """Replace what the provider's guardrail blocked (``redactUserContentMessage``): the prompt, as in Strands.

    A tool-result turn keeps its results (the model's tool calls need them), their content replaced by ``text``;
    any other turn becomes the one text block. The session rewrites the edited message at the end of the invocation.
    """
    results = [block for block in message["content"] if "toolResult" in block]
    for block in results:
        block["toolResult"]["content"] = [{"text": text}]
    message["content"] = results or [{"text": text}]


def _offered_specs(inv: Invocation, ctx: InvokeModelContext) -> list[Any]:
    """The tool specs sent to the provider: on the forced structured-output turn only the forced tool (as Strands).

    A provider that ignores ``tool_choice`` (many OpenAI-compatible servers) would otherwise call the agent's other
    tools again and again instead of answering; middleware still sees every spec in ``ctx``.
    """
    return _offered(inv, ctx.tool_specs, ctx.tool_choice)


def _offered(inv: Invocation, specs: list[Any], choice: dict[str, Any] | None) -> list[Any]:
    if inv.structured is None or not inv.structured.forced or not choice or "tool" not in choice:
        return specs
    forced = choice["tool"]["name"]
    return [spec for spec in specs if spec["name"] == forced]


def _uncancel(inv: Invocation) -> None:
    task = inv.task
    if task is not None:
        task.uncancel()
