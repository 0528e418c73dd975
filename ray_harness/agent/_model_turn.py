"""The model half of a cycle: call the model, keep its answer, and decide what follows it.

What follows is the end of the invocation (its ``AgentResult``), a forced structured-output turn, a checkpoint,
or the answer's tool uses, which the tool half (:mod:`ray_harness.agent._tool_phase`) runs next. Two forms with
the same steps: :func:`model_turn` (an async generator, for streamed turns, middleware and extensions) and
:func:`model_turn_quiet` (plain coroutines, when nobody reads the turn's events).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ray_harness.agent._model_call import call_model, call_model_quiet
from ray_harness.agent.result import AgentResult
from ray_harness.agent.trace import note_model_end
from ray_harness.checkpoint import Checkpoint
from ray_harness.middleware.types import ModelStopReason
from ray_harness.types.content import Message
from ray_harness.types.exceptions import MaxTokensReachedException

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.agent.loop import Invocation

__all__ = ("ModelTurn", "model_turn", "model_turn_quiet")


@dataclass
class ModelTurn:
    """What the model half of a cycle leaves for the tool half."""

    message: Message | None = None
    """The assistant message whose tool uses run next; None when the cycle ends after the model."""


async def model_turn(agent: Agent, inv: Invocation, turn: ModelTurn) -> AsyncGenerator[Any, None]:
    """Call the model and keep its message; yields events and the ``AgentResult`` if the turn ends the invocation.

    Sets ``turn.message`` when the message's tool uses are to run in this cycle.

    Raises:
        MaxTokensReachedException: The model stopped at its ``max_tokens`` limit (the partial message is kept).
    """
    outcome: ModelStopReason | None = None
    model_call = call_model(agent, inv) if inv.extensions is None else inv.extensions.model_call(call_model)
    try:
        async for event in model_call:
            if isinstance(event, ModelStopReason):
                outcome = event
            else:
                yield event
    finally:
        await model_call.aclose()
    assert outcome is not None
    message, final = await _keep_answer(agent, inv, outcome)
    if final is None:
        if not inv.quiet:
            yield {"type": "message", "message": message}
        final = await _end_turn(agent, inv, message, outcome.stop_reason, turn)
        if final is not None and final.structured_output is not None and not inv.quiet:
            yield {"type": "structured_output", "structured_output": final.structured_output}
    if final is not None:
        yield final


async def model_turn_quiet(agent: Agent, inv: Invocation, turn: ModelTurn) -> AgentResult | None:
    """:func:`model_turn` when nobody reads its events (``reads_directly``): the ``AgentResult`` or None.

    Raises:
        MaxTokensReachedException: As :func:`model_turn`.
    """
    outcome = await call_model_quiet(agent, inv)
    message, final = await _keep_answer(agent, inv, outcome)
    if final is None:
        final = await _end_turn(agent, inv, message, outcome.stop_reason, turn)
    return final


async def _keep_answer(agent: Agent, inv: Invocation, outcome: ModelStopReason) -> tuple[Message, AgentResult | None]:
    """Count the model cycle and add its message to the history; the ``AgentResult`` when it was cancelled."""
    agent.event_loop_metrics.add_cycle()
    message, stop_reason = outcome.message, outcome.stop_reason
    if stop_reason == "cancelled":
        await agent._append_message(message, inv.state)
        return message, inv.result("cancelled", message)
    if stop_reason == "max_tokens":
        message = _without_unfinished_tool_uses(message)
    assert inv.cycle_note is not None  # _cycles opened it; the model call starts with the cycle
    note_model_end(inv.cycle_note, message)
    await agent._append_message(message, inv.state)
    return message, None


async def _end_turn(agent: Agent, inv: Invocation, message: Message, stop_reason: str,
                    turn: ModelTurn) -> AgentResult | None:
    """What follows the kept answer: the invocation's result, or None (``turn.message`` set when tools run next).

    Raises:
        MaxTokensReachedException: The model stopped at its ``max_tokens`` limit (the partial message is kept).
    """
    if stop_reason == "max_tokens":
        raise MaxTokensReachedException(
            "the model stopped at its max_tokens limit; the partial message was kept in the history "
            "(and is this exception's partial_message). Raise the model's max_tokens or call the agent "
            "again to continue.", partial_message=message,
        )
    if stop_reason != "tool_use" or not any("toolUse" in block for block in message["content"]):
        if inv.structured is None:  # the usual end: no structured output to ask for, no coroutine for it
            return inv.result(stop_reason, message)
        return await _finish_turn(agent, inv, message, stop_reason)  # None: structured output is asked for next
    if agent.checkpointing and not (inv.cancelled or inv.deferred_cancel):
        return inv.result("checkpoint", message,
                          checkpoint=Checkpoint(position="after_model", cycle_index=inv.cycle_index))
    turn.message = message
    return None


async def _finish_turn(agent: Agent, inv: Invocation, message: Message, stop_reason: str) -> AgentResult | None:
    """The model ended its turn. With structured output pending, ask for it (once, forced) instead."""
    if inv.structured is None or inv.structured.value is not None:
        extra = {"structured_output": inv.structured.value} if inv.structured else {}
        return inv.result(stop_reason, message, **extra)
    if inv.structured.forced:
        # A provider that cannot force a tool may answer with the JSON as text (Strands reads it too).
        return inv.result(stop_reason, message, structured_output=inv.structured.from_text(message))
    inv.structured.forced = True
    await agent._append_message({"role": "user", "content": [{"text": inv.structured.prompt}]}, inv.state)
    return None


def _without_unfinished_tool_uses(message: Message) -> Message:
    """Replace a truncated answer's tool uses, which may be cut mid-input, by text notes.

    So none runs half-formed and the kept history has no tool use without a result (Strands does the same,
    with the same text).
    """
    content: list[Any] = [
        {"text": f"The selected tool {block['toolUse'].get('name') or '<unknown>'}'s tool use was incomplete "
                 "due to maximum token limits being reached."} if "toolUse" in block else block
        for block in message["content"]
    ]
    return {"role": message["role"], "content": content}

