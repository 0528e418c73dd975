"""The agent loop: a ``for`` over cycles (model → tools → repeat) with small helpers.

One invocation: normalize the prompt (or resume interrupts / a checkpoint),
``BeforeInvocationEvent``, the cycles, conversation management,
``AfterInvocationEvent`` (which may ``resume`` with a new prompt), then the
final ``{"type": "result"}`` event. Each cycle checks cancel and limits at its
top, runs the model half (:mod:`ray_harness.agent._model_turn`) unless an
interrupted tool batch is being resumed, then the tool half
(:mod:`ray_harness.agent._tool_phase`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, Awaitable
from typing import TYPE_CHECKING, Any, cast

from ray_harness._signal import Signal
from ray_harness.agent._arguments import check_invocation
from ray_harness.agent._history import rollback
from ray_harness.agent._model_call import _cancelled_stop, reads_directly
from ray_harness.agent._model_turn import ModelTurn, model_turn, model_turn_quiet
from ray_harness.agent._prompt import prepare_prompt
from ray_harness.agent._structured import StructuredOutput
from ray_harness.agent._tool_phase import ToolsOutcome, run_tools, run_tools_quiet, runs_tools_quietly
from ray_harness.agent.limits import Limits, check_limits
from ray_harness.agent.result import AgentResult
from ray_harness.agent.trace import CycleNote, note_cycle_end, note_no_model_call, note_recursion_end
from ray_harness.checkpoint import Checkpoint
from ray_harness.extensions._chain import ExtensionChain, assemble as assemble_extensions
from ray_harness.hooks.events import AfterInvocationEvent, BeforeInvocationEvent
from ray_harness.telemetry import metrics
from ray_harness.telemetry.metrics import live_sinks
from ray_harness.telemetry.tracing import agent_attributes, get_tracer
from ray_harness.types.content import Message
from ray_harness.types.exceptions import (
    ConcurrencyException,
    MaxTokensReachedException,
    StructuredOutputException,
)

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("Invocation", "begin_invocation", "end_invocation", "run_invocation")


class Invocation:
    """Per-invocation control state: cancel signal, limits, structured output, the model-wait interrupter."""

    def __init__(self, agent: Agent, cancel_signal: threading.Event, state: dict[str, Any],
                 limits: Limits | None, structured_output_model: type | None, *, quiet: bool = False,
                 structured_output_prompt: str | None = None) -> None:
        self.agent = agent
        self.quiet = quiet  # the caller wants only the result: per-chunk events are not produced
        self.cancel_signal = cancel_signal
        self.state = state
        self.limits = limits
        self.structured = StructuredOutput(structured_output_model,
                                           structured_output_prompt or agent.structured_output_prompt) \
            if structured_output_model else None
        self.deferred_cancel = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None
        # Up while the task is parked where a cancel may cancel it: on the provider's stream, a retry's sleep, a
        # tool provider starting (see wait_unless_cancelled); wait_interrupted says a cancel did.
        self.interruptible_wait = False
        self.wait_interrupted = False
        self.cycle_index = 0
        # Cycles that ran a resumed tool batch without calling the model: a turn for ``limits`` all the same
        # (as Strands counts every cycle), while the metrics count model cycles only.
        self.resumed_cycles = 0
        self.resumed_position: str | None = None
        self.first_appended: Message | None = None
        self.last_before: Message | None = None  # the history's last message when the invocation started
        self.tracer = get_tracer()
        self.agent_span: Any = None
        self.cycle_span: Any = None
        self.cycle_note: CycleNote | None = None  # the running cycle's notes for EventLoopMetrics.traces
        self.extensions: ExtensionChain | None = None  # contributed middleware of this chain

    baggage_token: Any = None
    """The context token of ``Agent(baggage_attributes=...)``'s baggage while the invocation runs (class default)."""

    @property
    def cancelled(self) -> bool:
        """Whether a cancel of the invocation was requested."""
        return self.cancel_signal.is_set()

    @property
    def may_stop(self) -> bool:
        """Whether a cycle's top may end the invocation (:func:`stop_at_cycle_top`): a cancel, or limits to check."""
        return self.cancel_signal.is_set() or self.deferred_cancel or self.limits is not None

    def request_cancel(self, *, model_too: bool) -> None:
        """Request a cancel; ``model_too=False`` waits for the running model call to finish first."""
        if not model_too:
            self.deferred_cancel = True
            return
        self.cancel_signal.set()
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._interrupt_model_wait)
            except RuntimeError:  # loop closed between the check and the call
                pass

    def _interrupt_model_wait(self) -> None:
        # Runs on the loop thread, so interruptible_wait cannot change under us: the task is parked at an
        # interruptible await (the model call, a retry's sleep, a provider starting) and the CancelledError lands there.
        if self.interruptible_wait and self.task is not None and not self.wait_interrupted:
            self.wait_interrupted = True
            self.task.cancel()

    async def wait_unless_cancelled(self, awaitable: Awaitable[Any]) -> bool:
        """Await ``awaitable`` where a cancel interrupts it (as it interrupts the model call); False when one did."""
        self.interruptible_wait = True
        try:
            await awaitable
        except asyncio.CancelledError:
            if not self.wait_interrupted:
                raise
            if self.task is not None:
                self.task.uncancel()
            return False
        finally:
            self.interruptible_wait = False
        return True

    def result(self, stop_reason: str, message: Message, **extra: Any) -> AgentResult:
        """The invocation's ``AgentResult`` with the agent's metrics and state (``extra``: more fields)."""
        return AgentResult(stop_reason=stop_reason, message=message, metrics=self.agent.event_loop_metrics,
                           state=self.agent.state, **extra)


def begin_invocation(agent: Agent, invocation_state: dict[str, Any] | None, limits: Limits | None,
                     structured_output_model: type | None, cancel_signal: threading.Event | None,
                     kwargs: dict[str, Any], *, quiet: bool) -> Invocation:
    """Check an invocation's arguments (``check_invocation``), take the agent and start the invocation.

    The caller ends it with :func:`end_invocation`, whatever happens after this returned.

    Raises:
        ConcurrencyException: The agent is running another invocation.
    """
    checked_limits, output_prompt, output_model = check_invocation(agent, invocation_state, limits,
                                                                   structured_output_model, kwargs)
    if not agent._lock.acquire(blocking=False):
        raise ConcurrencyException(
            f"agent {agent.name!r} is already running an invocation; wait for it or use another Agent"
        )
    try:
        state = invocation_state if invocation_state is not None else {}
        if kwargs:  # a new dict, as in Strands: the caller's invocation_state is not ours to change
            state = {**state, **kwargs}
        invocation = Invocation(agent, cancel_signal or Signal(), state, checked_limits, output_model,
                                quiet=quiet, structured_output_prompt=output_prompt)
    except BaseException:
        agent._lock.release()
        raise
    agent._cancel_message = None
    agent._cancel_after_tools = False
    agent._invocation = invocation
    return invocation


def end_invocation(agent: Agent) -> None:
    """End the invocation :func:`begin_invocation` started: the agent is free for the next one."""
    agent._invocation = None
    agent._lock.release()


async def run_invocation(agent: Agent, prompt: Any, inv: Invocation) -> AsyncGenerator[dict[str, Any], None]:
    """One invocation with its metrics and its ``invoke_agent`` span (one generator layer for both)."""
    chain, reporting = open_invocation(agent, inv)
    final: AgentResult | None = None
    error: BaseException | None = None
    try:
        if chain is not None:
            await chain.lifecycle("before_agent")
        events = _run_invocation(agent, prompt, inv)
        try:
            async for event in events:
                if event.get("type") == "result":
                    final = event["result"]
                    if chain is not None:
                        await chain.lifecycle("after_agent", final)
                yield event
        finally:
            await events.aclose()  # see _cycles: a caller that stops reading closes this layer only
    except BaseException as caught:
        error = caught
        raise
    finally:
        close_invocation(agent, inv, final, error, reporting)


def open_invocation(agent: Agent, inv: Invocation) -> tuple[ExtensionChain | None, bool]:
    """Assemble the invocation's extensions, count the agent active and open its span: (extensions, reporting)."""
    inv.extensions = chain = assemble_extensions(agent, inv)  # once per lead invocation / sub-agent execution
    reporting = bool(live_sinks)
    if reporting:
        metrics.active_agents(agent.name, 1)
    baggage = agent._baggage_attributes
    if baggage:  # before the span starts: span processors see it (as in Strands)
        from ray_harness.telemetry.baggage import attach_baggage

        inv.baggage_token = attach_baggage(baggage)
    tracer = inv.tracer
    if tracer.enabled:
        inv.agent_span = tracer.start_span(f"invoke_agent {agent.name}", None, agent_attributes(agent))
    return chain, reporting


def close_invocation(agent: Agent, inv: Invocation, final: AgentResult | None, error: BaseException | None,
                     reporting: bool) -> None:
    """End what :func:`open_invocation` opened: the span (with the result or error) and the agent's metrics."""
    if inv.agent_span is not None:
        inv.tracer.end_span(inv.agent_span, _invocation_attributes(agent, final, inv), error=error)
    if reporting:
        metrics.active_agents(agent.name, -1)
        metrics.interrupts_pending(agent.name, len(agent._interrupt_state.pending()))
    if inv.baggage_token is not None:
        from ray_harness.telemetry.baggage import detach_baggage

        detach_baggage(inv.baggage_token)
        inv.baggage_token = None


def _invocation_attributes(agent: Agent, result: AgentResult | None, inv: Invocation) -> dict[str, Any]:
    usage = agent.event_loop_metrics.invocation_usage
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.get("inputTokens", 0),
        "gen_ai.usage.output_tokens": usage.get("outputTokens", 0),
        "gen_ai.usage.total_tokens": usage.get("totalTokens", 0),
        # As on the chat spans: only when the provider reported cache tokens (None attributes are dropped).
        "gen_ai.usage.cache_read.input_tokens": usage.get("cacheReadInputTokens"),
        "gen_ai.usage.cache_creation.input_tokens": usage.get("cacheWriteInputTokens"),
        "ray_harness.cost_usd": agent.event_loop_metrics.invocation_cost_usd,
        "ray_harness.cycles": agent.event_loop_metrics.invocation_cycles,
    }
    if result is not None:
        attributes["gen_ai.response.finish_reasons"] = [result.stop_reason]
        if getattr(inv.tracer, "capture_content", False):
            import json

            attributes["gen_ai.output.messages"] = json.dumps([result.message], default=str)[:8192]
    return attributes


async def _run_invocation(agent: Agent, prompt: Any, inv: Invocation) -> AsyncGenerator[dict[str, Any], None]:
    if not await start_invocation(agent, inv):
        # Cancelled while an MCP server was starting: nothing was added to the history; the next call loads again.
        yield {"type": "result", "result": inv.result("cancelled", _cancelled_stop(agent).message)}
        return
    current: Any = prompt
    while True:
        start_length, new_messages = round_prompt(agent, inv, current)
        result: AgentResult | None = None
        try:
            result = await admit_prompt(agent, inv, new_messages)
            if result is None:
                cycles = _cycles(agent, inv) if inv.quiet else _lifecycle(inv, _cycles(agent, inv))
                try:
                    async for event in cycles:
                        if isinstance(event, AgentResult):
                            result = event
                        else:
                            yield event
                finally:
                    await cycles.aclose()
                agent.conversation_manager.apply_management(agent)
        except BaseException as error:
            await round_failed(agent, inv, start_length, error)
            raise
        current = await resume_after(agent, inv, result) if agent.hooks.has_callbacks(AfterInvocationEvent) else None
        if current is None:
            assert result is not None
            yield {"type": "result", "result": result}
            return


async def start_invocation(agent: Agent, inv: Invocation) -> bool:
    """Bind the invocation to its task, load the tool providers and reset the per-invocation metrics.

    False when a cancel stopped the providers' loading: nothing was started, the invocation ends ``cancelled``.
    """
    inv.loop = asyncio.get_running_loop()
    inv.task = asyncio.current_task()
    # Most agents have no tool provider: then no coroutine is made to load none.
    if inv.cancel_signal.is_set() or (inv.agent.tool_registry.has_providers and not await _load_providers(inv)):
        return False
    agent.event_loop_metrics.start_invocation()
    inv.last_before = agent.messages[-1] if agent.messages else None
    return True


def round_prompt(agent: Agent, inv: Invocation, prompt: Any) -> tuple[int, list[Message]]:
    """The history's length before this round (where a failure rolls back to) and the messages ``prompt`` adds."""
    new_messages = prepare_prompt(agent, prompt, inv)
    if inv.agent_span is not None and getattr(inv.tracer, "capture_content", False):
        import json

        inv.agent_span.set_attribute("gen_ai.input.messages", json.dumps(new_messages, default=str)[:8192])
    return len(agent.messages), new_messages


async def admit_prompt(agent: Agent, inv: Invocation, new_messages: list[Message]) -> AgentResult | None:
    """``BeforeInvocationEvent``, then the messages appended; a hook's veto ends the round with its result."""
    # Events are built only for registered callbacks: most agents have none, and a graph row makes dozens.
    veto, messages = await _before_invocation(agent, inv, new_messages) \
        if agent.hooks.has_callbacks(BeforeInvocationEvent) else (None, new_messages)
    if veto:
        text = veto if isinstance(veto, str) else "invocation denied by hook"
        # NOTE: not appended, so history keeps alternating roles (Strands appends it).
        return inv.result("end_turn", {"role": "assistant", "content": [{"text": text}]})
    for message in messages:
        await agent._append_message(message, inv.state)
    return None


async def round_failed(agent: Agent, inv: Invocation, start_length: int, error: BaseException) -> None:
    """A round raised ``error``: roll the history back and tell ``AfterInvocationEvent`` hooks (no result)."""
    if not isinstance(error, MaxTokensReachedException):  # that one keeps its partial answer (as Strands)
        rollback(agent, inv, start_length)
    await agent.hooks.invoke_callbacks_async(AfterInvocationEvent(agent=agent, invocation_state=inv.state))


async def resume_after(agent: Agent, inv: Invocation, result: AgentResult | None) -> Any:
    """``AfterInvocationEvent``; the prompt a hook's ``resume`` runs next, None when the invocation ends.

    Callers ask ``has_callbacks`` first: no event, nor coroutine, for nobody.
    """
    after, _ = await agent.hooks.invoke_callbacks_async(
        AfterInvocationEvent(agent=agent, invocation_state=inv.state, result=result)
    )
    # Also after interrupts: a hook may answer them (Strands).
    return after.resume if result is not None else None


async def _lifecycle(inv: Invocation, cycles: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
    """The cycles' events between Strands' lifecycle events, for a reader of events (not for a quiet caller).

    ``init_event_loop`` first (the prompt is in the history by then), ``force_stop`` (with ``force_stop_reason``)
    right before an error that stops the loop is raised — not for the errors Strands raises without one, which say
    themselves why the invocation ended. Each cycle starts with ``start`` and ``start_event_loop`` (:func:`_cycle`).
    """
    try:
        yield {"type": "init_event_loop", "init_event_loop": True}
        async for event in cycles:
            yield event
    except (MaxTokensReachedException, StructuredOutputException):
        raise
    except Exception as error:
        yield {"type": "force_stop", "force_stop": True, "force_stop_reason": str(error)}
        raise
    finally:
        await cycles.aclose()


async def _load_providers(inv: Invocation) -> bool:
    """Load the tool providers (an MCP server may take seconds to start); False when a cancel stopped it."""
    if inv.cancel_signal.is_set():
        return False
    return await inv.wait_unless_cancelled(inv.agent.tool_registry.load_providers())


async def _before_invocation(agent: Agent, inv: Invocation, messages: list[Message]) -> tuple[Any, list[Message]]:
    """``BeforeInvocationEvent``'s veto and the messages to add (a hook's ``None`` keeps the prompt, as Strands)."""
    before, _ = await agent.hooks.invoke_callbacks_async(
        BeforeInvocationEvent(agent=agent, invocation_state=inv.state, messages=messages)
    )
    return before.cancel, messages if before.messages is None else before.messages


async def _cycles(agent: Agent, inv: Invocation) -> AsyncGenerator[Any, None]:
    """The invocation's cycles; yields their events, the last an ``AgentResult``.

    Each layer of the loop closes the generator it reads from when it is closed itself: a caller that stops
    reading (``aclose()`` on the agent's stream) closes only the outermost, and an inner layer left to the event
    loop's finalizer would roll the history back, end its tools and close the model stream only after the agent
    had been released — and a next invocation started.
    """
    recursions: list[CycleNote] = []  # cycles whose "Recursive call" (Strands) lasts until the invocation ends
    try:
        while True:
            stop = await stop_at_cycle_top(agent, inv) if inv.may_stop else None  # no coroutine for most cycles
            if stop is not None:
                yield stop
                return
            ended = False
            cycle: AsyncGenerator[Any, None] | None = None
            started, note = open_cycle(agent, inv)
            error: BaseException | None = None
            try:
                begun = await begin_cycle(agent, inv)
                if isinstance(begun, AgentResult):
                    ended = True
                    yield begun
                elif begun is not None:
                    cycle = begun
                    async for event in cycle:
                        ended = ended or isinstance(event, AgentResult)
                        yield event
            except BaseException as caught:
                error = caught
                raise
            finally:
                if cycle is not None:
                    await cycle.aclose()
                end_cycle(inv, started, recursing=not ended and error is None, error=error)
            if ended:
                return
            recursions.append(note)
    finally:
        if recursions:
            end_recursions(recursions)


def open_cycle(agent: Agent, inv: Invocation) -> tuple[float, CycleNote]:
    """Start a cycle's timing, its trace note and its span: (its ``perf_counter`` start, its note)."""
    # One clock read starts the cycle's timing, its trace note and its model call's trace.
    started = time.perf_counter()
    inv.cycle_note = note = agent.event_loop_metrics.start_cycle(started)
    tracer = inv.tracer
    if tracer.enabled:
        inv.cycle_span = tracer.start_span("execute_event_loop_cycle", inv.agent_span,
                                           {"gen_ai.operation.name": "execute_event_loop_cycle",
                                            "ray_harness.cycle_index": inv.cycle_index,
                                            **agent.trace_attributes})
    return started, note


def end_recursions(recursions: list[CycleNote]) -> None:
    """The invocation ended: so do the "Recursive call"s of the cycles that went on to another one."""
    now = time.perf_counter()
    for recursion in recursions:
        note_recursion_end(recursion, now)


def end_cycle(inv: Invocation, started: float, *, recursing: bool, error: BaseException | None) -> None:
    """The cycle's duration, its trace note's end and its span's end."""
    stopped = time.perf_counter()  # the cycle's duration, its trace's end and its Recursive call's start
    inv.agent.event_loop_metrics.add_cycle_duration(stopped - started)
    assert inv.cycle_note is not None  # _cycles opened it
    note_cycle_end(inv.cycle_note, stopped, recursing=recursing)
    if inv.cycle_span is not None:
        inv.tracer.end_span(inv.cycle_span, error=error)
        inv.cycle_span = None


async def begin_cycle(agent: Agent, inv: Invocation) -> AgentResult | AsyncGenerator[Any, None] | None:
    """The cycle's events to read (:func:`_cycle`), after its model turn when that one runs quietly.

    Nobody reads a quiet model turn's events (``reads_directly``): it runs here as plain coroutines, with no
    generator layer. Its ``AgentResult`` when it ended the invocation; None when the cycle ends after it (the
    next one asks for the structured output, or runs after this cycle's quiet tool half); else the tool half's
    events. The tool half runs quietly too when nothing reads its events (``runs_tools_quietly``).
    """
    resumed = _tool_use_to_resume(agent, inv)
    if resumed is not None or not reads_directly(agent, inv):
        return _cycle(agent, inv, resumed)
    turn = ModelTurn()
    final = await model_turn_quiet(agent, inv, turn)
    if final is not None or turn.message is None:
        return final
    if runs_tools_quietly(agent, inv, turn.message):
        return await _tools_quiet(agent, inv, turn.message)
    return _cycle(agent, inv, turn.message, answered=True)


async def _tools_quiet(agent: Agent, inv: Invocation, message: Message) -> AgentResult | None:
    """The tool half of :func:`_cycle` as plain coroutines (nobody reads its events); the result if it ended."""
    inv.resumed_position = None
    tools = await run_tools_quiet(agent, inv, message)
    final_result = await _after_tools(agent, inv, message, tools)
    if final_result is None:
        inv.cycle_index += 1
    return final_result


async def _cycle(agent: Agent, inv: Invocation, message: Message | None,
                 *, answered: bool = False) -> AsyncGenerator[Any, None]:
    """One model → tools cycle; yields events and, when the invocation ends here, an ``AgentResult``.

    ``message``: the tool uses to run without calling the model — a resumed batch or checkpoint, or (``answered``)
    the answer of the quiet model turn :func:`begin_cycle` took.
    """
    if not inv.quiet:  # Strands' lifecycle events of a cycle ("start" is its deprecated form)
        yield {"type": "start", "start": True}
        yield {"type": "start_event_loop", "start_event_loop": True}
    if message is None:
        turn = ModelTurn()
        model = model_turn(agent, inv, turn)
        try:
            async for event in model:
                yield event
        finally:
            await model.aclose()
        if turn.message is None:
            return  # the invocation ended here (its result was yielded), or the next cycle goes on
        message = turn.message
    elif not answered:
        inv.resumed_cycles += 1
        assert inv.cycle_note is not None  # _cycles opened it
        note_no_model_call(inv.cycle_note)
    inv.resumed_position = None
    tools: ToolsOutcome | None = None
    batch = run_tools(agent, inv, message)
    try:
        async for event in batch:
            if isinstance(event, ToolsOutcome):
                tools = event
            else:
                yield event
    finally:
        await batch.aclose()
    assert tools is not None
    if inv.structured is not None and inv.structured.value is not None and not inv.quiet:
        yield {"type": "structured_output", "structured_output": inv.structured.value}  # Strands' event
    final_result = await _after_tools(agent, inv, message, tools)
    if final_result is not None:
        yield final_result
        return
    inv.cycle_index += 1


def _tool_use_to_resume(agent: Agent, inv: Invocation) -> Message | None:
    """The assistant message whose tools this cycle runs without calling the model, if it resumes one.

    That is an interrupted tool batch, or a checkpoint taken after the model answered (``after_model``).
    """
    if agent._interrupt_state.activated:
        message: Message = agent._interrupt_state.context["tool_use_message"]
        return message
    if inv.resumed_position == "after_model" and _has_unanswered_tool_use(agent.messages):
        return agent.messages[-1]
    return None


async def stop_at_cycle_top(agent: Agent, inv: Invocation) -> AgentResult | None:
    """The invocation's result when a cancel or a limit ends it at a cycle's top (callers ask ``inv.may_stop``)."""
    if agent._interrupt_state.activated:
        return None  # resuming an interrupted batch: its tools run before anything else is checked
    if inv.cancelled or inv.deferred_cancel:
        messages: list[Message] = agent.messages
        if messages and messages[-1]["role"] == "user":
            # Cancelled before the model answered (a hook, an early cancel): the history ends with the
            # cancel's text as when the cancel lands during the model call, not with the previous call's answer.
            message = _cancelled_stop(agent).message
            await agent._append_message(message, inv.state)
            return inv.result("cancelled", message)
        return inv.result("cancelled", _last_assistant(agent))
    if inv.limits is None:  # most invocations have none: nothing to check at every cycle
        return None
    reason = check_limits(inv.limits, agent.event_loop_metrics.invocation_cycles + inv.resumed_cycles,
                          agent.event_loop_metrics.invocation_usage, agent.event_loop_metrics.invocation_cost_usd)
    if reason is not None:
        return inv.result(reason, _last_assistant(agent))  # the model's last word, not the tool results after it
    return None


async def _after_tools(agent: Agent, inv: Invocation, message: Message, tools: ToolsOutcome) -> AgentResult | None:
    if tools.interrupts:
        return inv.result("interrupt", message, interrupts=tools.interrupts)
    if tools.end_turn:
        value = tools.end_turn
        content: list[Any] = list(value) if isinstance(value, list) else [
            {"text": value if isinstance(value, str) else "Turn ended early by hook after tool execution"}
        ]
        end_message: Message = {"role": "assistant", "content": content}
        await agent._append_message(end_message, inv.state)
        return inv.result("end_turn", end_message)
    if inv.cancelled or inv.deferred_cancel:
        final = message
        if agent._cancel_message is not None:
            final = {"role": "assistant", "content": [{"text": agent._cancel_message}]}
            await agent._append_message(final, inv.state)
        return inv.result("cancelled", final)
    if inv.structured is not None and inv.structured.value is not None:
        return inv.result("tool_use", message, structured_output=inv.structured.value)  # Strands' stop reason
    if agent.checkpointing:
        return inv.result("checkpoint", message,
                          checkpoint=Checkpoint(position="after_tools", cycle_index=inv.cycle_index))
    return None


def _has_unanswered_tool_use(messages: list[Message]) -> bool:
    return bool(messages) and messages[-1]["role"] == "assistant" and any(
        "toolUse" in block for block in messages[-1]["content"]
    )


def _last_assistant(agent: Agent) -> Message:
    messages: list[Message] = agent.messages
    for message in reversed(messages):
        if message["role"] == "assistant":
            return cast(Message, message)
    return _empty()


def _empty() -> Message:
    return {"role": "assistant", "content": []}
