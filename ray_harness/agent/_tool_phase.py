"""The tool half of a cycle: ``BeforeToolsEvent``, each tool (hooks + ``ExecuteToolStage``), ``AfterToolsEvent``.

Interrupts raised anywhere in the batch are collected; the batch then stops
with the completed results stored in the interrupt state, so a resume runs only
the tools that have no result yet and keeps the others in their place.

Two forms: :func:`run_tools` (async generators: streamed invocations, tool middleware, extensions, custom
executors, concurrent batches) and :func:`run_tools_quiet` (plain coroutines, when nothing reads the per-tool
events), with the same hooks, results, metrics, traces and spans.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ray_harness.agent.trace import note_tool
from ray_harness.hooks.events import AfterToolCallEvent, AfterToolsEvent, BeforeToolCallEvent, BeforeToolsEvent
from ray_harness.interrupts import Interrupt, InterruptException
from ray_harness.middleware.types import ExecuteToolContext, ExecuteToolStage, MiddlewareError, ToolResultEvent
from ray_harness.telemetry.metrics import live_sinks, tool_call as report_tool_call
from ray_harness.telemetry.tracing import tool_attributes, tool_result_attributes
from ray_harness.tools.base import ToolContext, error_result
from ray_harness.tools.decorator import DecoratedFunctionTool
from ray_harness.tools.executors import ConcurrentToolExecutor, SequentialToolExecutor, ToolInterruptedMarker
from ray_harness.types.content import Message, ToolResult, ToolUse
from ray_harness.types.validation import copy_json

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.agent.loop import Invocation
    from ray_harness.tools.base import AgentTool

__all__ = ("ToolsOutcome", "execute_tool", "run_tools", "run_tools_quiet", "runs_tools_quietly")

CANCELLED_TOOL_TEXT = "Tool execution cancelled"


@dataclass
class ToolsOutcome:
    interrupts: list[Interrupt] = field(default_factory=list)
    end_turn: Any = False


@dataclass
class _ToolDone:
    tool_use: ToolUse
    result: ToolResult


@dataclass
class _ToolInterrupted(ToolInterruptedMarker):
    tool_use: ToolUse
    interrupts: list[Interrupt]


async def run_tools(agent: Agent, inv: Invocation, message: Message) -> AsyncGenerator[Any, None]:
    """Yield tool events; the last event is a ``ToolsOutcome``."""
    tool_uses, results, pending, cancel_text = _start_batch(agent, inv, message)
    # Events are built only for registered callbacks, as for the model call: most tool calls have none to hear them.
    if agent.hooks.has_callbacks(BeforeToolsEvent):
        before = await _before_tools_event(agent, inv, message, results)
        if isinstance(before, ToolsOutcome):
            yield before
            return
        cancel_text = before
    interrupts: list[Interrupt] = []
    if cancel_text is not None:
        for use in pending:
            results[use["toolUseId"]] = error_result(use["toolUseId"], cancel_text)
            yield {"type": "tool_result", "tool_result": results[use["toolUseId"]]}
    else:
        executed = _execute_pending(agent, inv, pending)  # read here, not through one more generator layer
        try:
            async for event in executed:
                passed = _collect(event, results, interrupts, inv.quiet)
                if passed is not None:
                    yield passed
        except Exception:
            await _after_unfinished_batch(agent, inv, tool_uses, results)
            raise
        finally:
            await executed.aclose()  # closed mid-batch: the running tools end before the agent is released
    if interrupts:
        await _interrupt_batch(agent, inv, message, tool_uses, results, interrupts)
        yield {"type": "interrupt", "interrupts": interrupts}
        yield ToolsOutcome(interrupts=interrupts)
        return
    result_message = _results_message(agent, tool_uses, results)
    end_turn: Any = False
    if agent.hooks.has_callbacks(AfterToolsEvent):
        end_turn = await _after_tools_event(agent, inv, result_message)
    await agent._append_message(result_message, inv.state)
    if not inv.quiet:
        yield {"type": "message", "message": result_message}
    yield ToolsOutcome(end_turn=end_turn)


def runs_tools_quietly(agent: Agent, inv: Invocation, message: Message) -> bool:
    """Whether the tool half may run as plain coroutines (:func:`run_tools_quiet`): nobody reads its events.

    That is a quiet invocation with no ``ExecuteToolStage`` middleware and no extension, whose executor is one
    of ours running the batch in order (sequential, or a concurrent one with one tool to run). A custom
    executor, and a concurrent batch of several tools, keep the generator form.
    """
    if not inv.quiet or inv.extensions is not None or agent._middleware.has(ExecuteToolStage):
        return False
    executor = type(agent.tool_executor)
    if executor is SequentialToolExecutor:
        return True
    return executor is ConcurrentToolExecutor and sum("toolUse" in block for block in message["content"]) <= 1


async def run_tools_quiet(agent: Agent, inv: Invocation, message: Message) -> ToolsOutcome:
    """:func:`run_tools` without its events, as plain coroutines (see :func:`runs_tools_quietly`)."""
    tool_uses, results, pending, cancel_text = _start_batch(agent, inv, message)
    if agent.hooks.has_callbacks(BeforeToolsEvent):
        before = await _before_tools_event(agent, inv, message, results)
        if isinstance(before, ToolsOutcome):
            return before
        cancel_text = before
    interrupts: list[Interrupt] = []
    if cancel_text is not None:
        for use in pending:
            results[use["toolUseId"]] = error_result(use["toolUseId"], cancel_text)
    else:
        try:
            # As SequentialToolExecutor: cancel is checked before each tool, an interrupt stops the batch.
            for use in pending:
                done = _ToolDone(use, error_result(use["toolUseId"], CANCELLED_TOOL_TEXT)) \
                    if inv.cancel_signal.is_set() else await execute_tool_quiet(agent, inv, use)
                if isinstance(done, _ToolInterrupted):
                    interrupts.extend(done.interrupts)
                    break
                results[use["toolUseId"]] = done.result
        except Exception:
            await _after_unfinished_batch(agent, inv, tool_uses, results)
            raise
    if interrupts:
        await _interrupt_batch(agent, inv, message, tool_uses, results, interrupts)
        return ToolsOutcome(interrupts=interrupts)
    result_message = _results_message(agent, tool_uses, results)
    end_turn: Any = False
    if agent.hooks.has_callbacks(AfterToolsEvent):
        end_turn = await _after_tools_event(agent, inv, result_message)
    await agent._append_message(result_message, inv.state)
    return ToolsOutcome(end_turn=end_turn)


def _start_batch(agent: Agent, inv: Invocation, message: Message
                 ) -> tuple[list[ToolUse], dict[str, ToolResult], list[ToolUse], str | None]:
    """``message``'s tool uses, the results the batch has, the tool uses still to run, and their cancel text.

    A resumed batch has the results of the tools that ran before its interrupt. The cancel text is what the pending
    tools get instead of running when the invocation was cancelled (None: they run).
    """
    tool_uses = [block["toolUse"] for block in message["content"] if "toolUse" in block]
    state = agent._interrupt_state
    results: dict[str, ToolResult] = {}
    if state.activated:
        results = {r["toolUseId"]: r for r in state.context.get("tool_results", [])}
    pending = [use for use in tool_uses if use["toolUseId"] not in results]
    return tool_uses, results, pending, _batch_cancel_text(False, inv)


async def _before_tools_event(agent: Agent, inv: Invocation, message: Message,
                        results: dict[str, ToolResult]) -> ToolsOutcome | str | None:
    """``BeforeToolsEvent``: the batch's cancel text as the hooks leave it, or its outcome when they interrupted it."""
    before, interrupts = await agent.hooks.invoke_callbacks_async(
        BeforeToolsEvent(agent=agent, message=message, invocation_state=inv.state)
    )
    if interrupts:
        _suspend(agent, message, results, interrupts)
        return ToolsOutcome(interrupts=interrupts)
    return _batch_cancel_text(before.cancel, inv)  # after the hooks: one of them may have cancelled the invocation


async def _interrupt_batch(agent: Agent, inv: Invocation, message: Message, tool_uses: list[ToolUse],
                       results: dict[str, ToolResult], interrupts: list[Interrupt]) -> None:
    """Keep an interrupted batch's results for its resume, then pair its ``BeforeToolsEvent``."""
    _suspend(agent, message, results, interrupts)  # first: a raising hook must not lose the interrupts
    await _after_unfinished_batch(agent, inv, tool_uses, results)


def _results_message(agent: Agent, tool_uses: list[ToolUse], results: dict[str, ToolResult]) -> Message:
    """The finished batch's results, in its tool uses' order, as the user message that answers them."""
    agent._interrupt_state.deactivate()
    return {"role": "user", "content": [{"toolResult": results[use["toolUseId"]]} for use in tool_uses]}


async def _after_tools_event(agent: Agent, inv: Invocation, result_message: Message) -> Any:
    """``AfterToolsEvent``, before the results are added (as in Strands, then ``MessageAddedEvent``): its end_turn."""
    after, _ = await agent.hooks.invoke_callbacks_async(
        AfterToolsEvent(agent=agent, message=result_message, invocation_state=inv.state)
    )
    return after.end_turn


async def _after_unfinished_batch(agent: Agent, inv: Invocation, tool_uses: list[ToolUse],
                                 results: dict[str, ToolResult]) -> None:
    """``AfterToolsEvent`` for a batch that stopped on interrupts or an error, with the results it has.

    As in Strands, every executed batch's ``BeforeToolsEvent`` is paired with one; its ``end_turn`` is not
    applied (the batch is not over) and its message is not added to the history.
    """
    if agent.hooks.has_callbacks(AfterToolsEvent):
        done: Message = {"role": "user", "content": [{"toolResult": results[use["toolUseId"]]}
                                                     for use in tool_uses if use["toolUseId"] in results]}
        await agent.hooks.invoke_callbacks_async(AfterToolsEvent(agent=agent, message=done, invocation_state=inv.state))


def _batch_cancel_text(cancel: Any, inv: Invocation) -> str | None:
    """The error text every pending tool gets, or None when the tools run.

    A text when ``BeforeToolsEvent`` cancelled the batch or the invocation was cancelled.
    """
    if cancel:
        return cancel if isinstance(cancel, str) else "Tool cancelled by hook"
    return CANCELLED_TOOL_TEXT if inv.cancelled else None


def _execute_pending(agent: Agent, inv: Invocation, pending: list[ToolUse]) -> AsyncGenerator[Any, None]:
    """The agent's tool executor running ``pending``: its events, to read with :func:`_collect`."""
    # TOOL_VISIBLE extensions wrap each whole tool call; without any, nothing wraps.
    run_one = (lambda use: execute_tool(agent, inv, use)) if inv.extensions is None \
        else inv.extensions.tool_runner(execute_tool)
    return agent.tool_executor.execute(pending, run_one, inv.cancel_signal, _skipped)


def _collect(event: Any, results: dict[str, ToolResult], interrupts: list[Interrupt], quiet: bool) -> Any:
    """Keep an executor event's result or interrupts; the event to pass on, if any."""
    if isinstance(event, _ToolDone):
        results[event.tool_use["toolUseId"]] = event.result
        return {"type": "tool_result", "tool_result": event.result}
    if isinstance(event, _ToolInterrupted):
        interrupts.extend(event.interrupts)
        return None
    return None if quiet else event


def _suspend(agent: Agent, message: Message, results: dict[str, ToolResult], interrupts: list[Interrupt]) -> None:
    state = agent._interrupt_state
    for item in interrupts:
        state.interrupts.setdefault(item.id, item)
    state.context = {"tool_use_message": message, "tool_results": list(results.values())}
    state.activate()


async def _skipped(tool_use: ToolUse) -> AsyncGenerator[Any, None]:
    yield _ToolDone(tool_use, error_result(tool_use["toolUseId"], CANCELLED_TOOL_TEXT))


async def execute_tool(agent: Agent, inv: Invocation, tool_use: ToolUse) -> AsyncGenerator[Any, None]:
    """One tool call with its hooks; yields stream events then ``_ToolDone`` or ``_ToolInterrupted``."""
    while True:
        attempt = await _open_attempt(agent, inv, tool_use)
        if isinstance(attempt, _ToolInterrupted):
            yield attempt
            return
        yield {"type": "tool_start", "tool_use": attempt.call}
        started = time.perf_counter()
        attempt.result = _settled_without_call(inv, attempt)
        if attempt.result is None and agent._background_tasks is not None:
            acknowledged = await _to_background(agent, inv, attempt)
            if acknowledged is not None:
                yield _ToolDone(tool_use, acknowledged)
                return
        if attempt.result is None:
            async with contextlib.aclosing(_call_selected(agent, inv, attempt, started)) as events:
                async for event in events:
                    yield event
            if attempt.interrupts is not None:
                yield _ToolInterrupted(tool_use, attempt.interrupts)
                return
        final = await _close_attempt(agent, inv, attempt, started)
        if final is not None:
            yield _ToolDone(tool_use, final)
            return


async def execute_tool_quiet(agent: Agent, inv: Invocation, tool_use: ToolUse) -> _ToolDone | _ToolInterrupted:
    """:func:`execute_tool` as a coroutine for :func:`run_tools_quiet`: the same hooks, without the events."""
    while True:
        attempt = await _open_attempt(agent, inv, tool_use)
        if isinstance(attempt, _ToolInterrupted):
            return attempt
        started = time.perf_counter()
        attempt.result = _settled_without_call(inv, attempt)
        if attempt.result is None and agent._background_tasks is not None:
            acknowledged = await _to_background(agent, inv, attempt)
            if acknowledged is not None:
                return _ToolDone(tool_use, acknowledged)
        if attempt.result is None:
            await _call_selected_quiet(agent, inv, attempt, started)
            if attempt.interrupts is not None:
                return _ToolInterrupted(tool_use, attempt.interrupts)
        final = await _close_attempt(agent, inv, attempt, started)
        if final is not None:
            return _ToolDone(tool_use, final)


class _Attempt:
    """One attempt at a tool call: as the ``BeforeToolCallEvent`` hooks left it, then what running it left.

    Both forms of a call share it: ``result`` (and ``exception``) once the tool ran or was settled without a call,
    ``interrupts`` when the tool paused on them instead.
    """

    __slots__ = ("call", "cancel_message", "exception", "interrupts", "name", "paused_in_tool", "registered", "result",
                 "selected", "tool_use")

    def __init__(self, tool_use: ToolUse, name: str, registered: AgentTool | None, selected: AgentTool | None,
                 call: ToolUse, cancel_message: str | None) -> None:
        self.tool_use, self.name, self.registered, self.selected = tool_use, name, registered, selected
        self.call, self.cancel_message = call, cancel_message
        self.result: Any = None
        self.exception: BaseException | None = None
        self.interrupts: list[Interrupt] | None = None
        self.paused_in_tool = False  # the interrupt came from the tool itself, not from a middleware around it


async def _open_attempt(agent: Agent, inv: Invocation, tool_use: ToolUse) -> _Attempt | _ToolInterrupted:
    """Look the tool up and run the ``BeforeToolCallEvent`` hooks (which may pick, edit, cancel or interrupt it)."""
    name = tool_use.get("name", "")
    registered = selected = agent.tool_registry.get(name)
    # The call as hooks and the tool see it: a copy, so neither edits the history's block by accident.
    call = shown = copy_json(tool_use)
    cancel_tool: bool | str = False
    if agent.hooks.has_callbacks(BeforeToolCallEvent):
        before, interrupts = await _before_tool_call(agent, inv, tool_use, registered, shown)
        if interrupts:
            return _ToolInterrupted(tool_use, interrupts)
        selected, call, cancel_tool = before.selected_tool, before.tool_use, before.cancel_tool
    cancel_message = (cancel_tool if isinstance(cancel_tool, str) else "tool cancelled by user") if cancel_tool else None
    return _Attempt(tool_use, name, registered, selected, call, cancel_message)


def _settled_without_call(inv: Invocation, attempt: _Attempt) -> ToolResult | None:
    """The result of a call no tool runs for (cancelled by a hook, the structured-output tool, an unknown name)."""
    use_id = attempt.tool_use["toolUseId"]
    if attempt.cancel_message is not None:
        return error_result(use_id, attempt.cancel_message)
    if inv.structured is not None and attempt.name == inv.structured.name and attempt.registered is None:
        return inv.structured.handle(attempt.call)
    if attempt.selected is None:
        return error_result(use_id, f"Unknown tool: {attempt.name}")
    return None


async def _to_background(agent: Agent, inv: Invocation, attempt: _Attempt) -> ToolResult | None:
    """``Agent(background_tasks=...)``: the dispatch acknowledgement when the call goes to the background, else None.

    As in Strands, an acknowledged call gets no ``AfterToolCallEvent`` here (its background run does) and is not
    counted as a tool call; a foreground call loses the model's ``_background_execution`` flag from its input.
    """
    acknowledged: ToolResult | None = await agent._background_tasks.admit(inv, attempt.call, attempt.registered,
                                                                          attempt.selected)
    return acknowledged


async def _close_attempt(agent: Agent, inv: Invocation, attempt: _Attempt, started: float) -> ToolResult | None:
    """Normalise the attempt's result, count the call and let ``AfterToolCallEvent`` hooks see or replace it.

    ``None``: a hook asked to run the call again.
    """
    use_id = attempt.tool_use["toolUseId"]
    final = _normalize(use_id, attempt.result)
    if attempt.cancel_message is None:
        # As Strands: every attempt that went to the tool's chain is counted, with its outcome before
        # AfterToolCallEvent may replace it; a call a BeforeToolCallEvent hook cancelled never ran and is not.
        _count_tool_call(agent, attempt.tool_use, final["status"], started)
    if agent.hooks.has_callbacks(AfterToolCallEvent):
        after, _ = await agent.hooks.invoke_callbacks_async(
            AfterToolCallEvent(agent=agent, selected_tool=attempt.selected, tool_use=attempt.call,
                               result=final, invocation_state=inv.state, exception=attempt.exception,
                               cancel_message=attempt.cancel_message, duration=time.perf_counter() - started)
        )
        if after.retry and not inv.cancelled:  # a cancel is terminal: a retrying hook must not outlast it
            return None
        final = _normalize(use_id, after.result)
    return final


async def _before_tool_call(agent: Agent, inv: Invocation, tool_use: ToolUse, registered: AgentTool | None,
                            shown: ToolUse) -> tuple[BeforeToolCallEvent, list[Interrupt]]:
    """``BeforeToolCallEvent`` for the model's ``tool_use``, shown to the hooks as its copy ``shown``."""
    before, interrupts = await agent.hooks.invoke_callbacks_async(
        BeforeToolCallEvent(agent=agent, selected_tool=registered, tool_use=shown, invocation_state=inv.state)
    )
    if not interrupts and before.tool_use is shown and shown != tool_use:
        # Edited in place: in Strands the hook holds the history's own block, so the history shows the edit
        # (the model then sees the result of the call that ran). A tool_use *assigned* anew stays out of it.
        for key in ("name", "input"):
            if key in shown:
                tool_use[key] = copy_json(shown[key])
    return before, interrupts


async def _call_selected(agent: Agent, inv: Invocation, attempt: _Attempt, started: float
                         ) -> AsyncGenerator[Any, None]:
    """Run the hooks' selected tool through the ``ExecuteToolStage`` chain in an ``execute_tool`` span.

    The model's call is ``attempt.tool_use``, the one the hooks let through ``attempt.call``; fills ``attempt``.
    """
    tool_use, call, selected = attempt.tool_use, attempt.call, attempt.selected
    assert selected is not None  # a call settled without a tool has its result already
    outcome: ToolResultEvent | None = None
    exception: BaseException | None = None
    span = _open_span(agent, inv, call, tool_use)
    token = inv.tracer.attach(span)  # spans a tool creates become children of execute_tool
    chain = _tool_chain(agent, inv, attempt)
    try:
        async for event in chain:
            if isinstance(event, ToolResultEvent):
                outcome = event
            else:
                yield event
    except InterruptException as signal:
        _pause(agent, inv, attempt, signal, started)
        return
    except Exception as error:
        exception, outcome = error, _error_outcome(tool_use, error)
    finally:
        close = getattr(chain, "aclose", None)  # a custom AgentTool's own stream may be any async iterator
        if close is not None:
            await close()
        inv.tracer.detach(token)
        if span is not None:
            _close_span(inv, span, outcome, exception, started)
    _settle(inv, attempt, started, outcome, exception)


async def _call_selected_quiet(agent: Agent, inv: Invocation, attempt: _Attempt, started: float) -> None:
    """:func:`_call_selected` with nothing wrapping the tool and nobody reading its stream events.

    The tool's own stream is still read to its end (a streaming tool runs as one); only its result is kept.
    """
    if agent._middleware.has(ExecuteToolStage):  # added by a hook during this batch: it wraps this call
        async with contextlib.aclosing(_call_selected(agent, inv, attempt, started)) as events:
            async for _ in events:
                pass
        return
    tool_use, call, selected = attempt.tool_use, attempt.call, attempt.selected
    assert selected is not None  # as in _call_selected
    outcome: ToolResultEvent | None = None
    exception: BaseException | None = None
    span = _open_span(agent, inv, call, tool_use)
    token = inv.tracer.attach(span)
    context = ToolContext(tool_use=call, agent=agent, invocation_state=inv.state, cancel_signal=inv.cancel_signal)
    # A decorated plain function's one result needs no generator around it; any other tool's stream is read.
    direct = selected._result_call(call, context) if type(selected) is DecoratedFunctionTool else None
    stream = selected.stream(call, context) if direct is None else None
    try:
        if direct is not None:
            outcome = await direct
        else:
            assert stream is not None
            async for event in stream:
                if isinstance(event, ToolResultEvent):
                    outcome = event
    except InterruptException as signal:
        attempt.paused_in_tool = True  # nothing wraps the tool here
        _pause(agent, inv, attempt, signal, started)
        return
    except Exception as error:
        exception, outcome = error, _error_outcome(tool_use, error)
    finally:
        close = getattr(stream, "aclose", None)  # a custom AgentTool's own stream may be any async iterator
        if close is not None:
            await close()
        inv.tracer.detach(token)
        if span is not None:
            _close_span(inv, span, outcome, exception, started)
    _settle(inv, attempt, started, outcome, exception)


def _open_span(agent: Agent, inv: Invocation, call: ToolUse, tool_use: ToolUse) -> Any:
    """The call's ``execute_tool`` span, or None when tracing is off."""
    if not inv.tracer.enabled:
        return None
    return inv.tracer.start_span(f"execute_tool {tool_use.get('name', '')}", inv.cycle_span or inv.agent_span,
                                 tool_attributes(agent, call, inv.tracer.capture_content))


def _close_span(inv: Invocation, span: Any, outcome: ToolResultEvent | None, exception: BaseException | None,
                started: float) -> None:
    done = outcome.tool_result if outcome is not None else {"status": "interrupted"}
    raised = exception or (outcome.exception if outcome is not None else None)
    inv.tracer.end_span(span, tool_result_attributes(done, started, inv.tracer.capture_content),
                        error=raised, failed="tool returned an error result" if done.get("status") == "error"
                        else None)


def _settle(inv: Invocation, attempt: _Attempt, started: float, outcome: ToolResultEvent | None,
            exception: BaseException | None) -> None:
    """Fill ``attempt`` from the chain's last ``ToolResultEvent`` (or the error of its missing one)."""
    if outcome is None:
        # An error result, and the exception for hooks (Strands).
        outcome = _error_outcome(attempt.tool_use, MiddlewareError.no_result(ExecuteToolStage))
    attempt.exception = exception or outcome.exception
    attempt.result = outcome.tool_result
    _trace_tool(inv, attempt.tool_use, started, attempt.result)


def _pause(agent: Agent, inv: Invocation, attempt: _Attempt, signal: InterruptException, started: float) -> None:
    """The call paused on ``signal``'s interrupts (a sub-agent tool may pause on several at once: ``interrupts``).

    A pause of the tool itself is a call that ended without a result: counted as failed, as Strands' tool telemetry
    counts it (the resumed run is one more call); a middleware's pause is counted only if the tool ran.
    """
    attempt.interrupts = list(getattr(signal, "interrupts", [signal.interrupt]))
    if attempt.paused_in_tool:
        _count_tool_call(agent, attempt.tool_use, "error", started)
    _trace_tool(inv, attempt.tool_use, started, None)


def _error_outcome(tool_use: ToolUse, error: BaseException) -> ToolResultEvent:
    """A raising tool's (or chain's) outcome: an error result naming the error, the error for the hooks."""
    return ToolResultEvent(error_result(tool_use["toolUseId"], f"Error: {error}"), exception=error)


def _trace_tool(inv: Invocation, tool_use: ToolUse, started: float, result: ToolResult | None) -> None:
    """Note the tool in its cycle's trace (as Strands: the result before AfterToolCallEvent; None: interrupted)."""
    if inv.cycle_note is not None:
        message: Message | None = None if result is None else {"role": "user", "content": [{"toolResult": result}]}
        note_tool(inv.cycle_note, tool_use.get("name", ""), tool_use["toolUseId"], started, message)


def _count_tool_call(agent: Agent, tool_use: ToolUse, status: str, started: float) -> None:
    """Add the finished call (``tool_use``: the call as the history holds it) to the agent's metrics and sinks."""
    elapsed = time.perf_counter() - started
    name = tool_use.get("name", "")
    agent.event_loop_metrics.add_tool(name, status == "success", elapsed, tool_use)
    if live_sinks:
        report_tool_call(agent.name, name, status, elapsed)


def _tool_chain(agent: Agent, inv: Invocation, attempt: _Attempt) -> AsyncGenerator[Any, None]:
    """The hooks' selected tool called with ``attempt.call`` through the middleware and extensions around it."""
    selected, tool_use = attempt.selected, attempt.call
    assert selected is not None  # a call settled without a tool has its result already

    async def terminal(ctx: ExecuteToolContext) -> AsyncGenerator[Any, None]:
        tool = ctx.tool
        if tool is None:
            yield ToolResultEvent(error_result(ctx.tool_use["toolUseId"], f"Unknown tool: {ctx.tool_use['name']}"))
            return
        context = ToolContext(tool_use=ctx.tool_use, agent=agent, invocation_state=ctx.invocation_state,
                              cancel_signal=ctx.cancel_signal)
        stream = tool.stream(ctx.tool_use, context) if inv.extensions is None \
            else inv.extensions.raw_stream(tool, ctx, context)  # TOOL_RAW extensions: at the tool's own call
        try:
            async for event in stream:
                yield event
        except InterruptException:
            attempt.paused_in_tool = True
            raise
        except GeneratorExit:
            raise
        except Exception as error:
            yield _error_outcome(ctx.tool_use, error)
        finally:
            close = getattr(stream, "aclose", None)  # a custom AgentTool's stream may be any async iterator
            if close is not None:
                await close()

    middleware = agent._middleware.has(ExecuteToolStage)
    if not middleware and inv.extensions is None:
        # Nothing wraps the tool: its own stream, without the terminal's layer (whose error result for a raising
        # tool is the one _call_selected makes of the exception).
        attempt.paused_in_tool = True  # read only if the call pauses: nothing but the tool can pause it here
        return selected.stream(tool_use, ToolContext(tool_use=tool_use, agent=agent, invocation_state=inv.state,
                                                     cancel_signal=inv.cancel_signal))
    ctx = ExecuteToolContext(agent=agent, tool=selected, tool_use=tool_use, invocation_state=inv.state,
                             cancel_signal=inv.cancel_signal)
    if not middleware:
        return terminal(ctx)
    return agent._middleware.compose(ExecuteToolStage, terminal)(ctx)


def _normalize(tool_use_id: str, result: Any) -> ToolResult:
    if not isinstance(result, dict) or "content" not in result:
        return error_result(tool_use_id, f"Error: invalid tool result {result!r}")
    status = result.get("status", "success")
    fixed: ToolResult = {"toolUseId": tool_use_id, "status": status if status in ("success", "error") else "error",
                         "content": list(result["content"])}
    return fixed
