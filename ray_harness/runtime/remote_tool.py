"""``RemoteAgent.as_tool()``: a sub-agent that runs in its own actor, called as a tool.

Same contract as ``Agent.as_tool()`` (one ``input`` string; the child's context is reset after each
call unless ``preserve_context``; a busy child answers with an error result; the child's interrupts
surface as the parent's with ids ``v1:agent_as_tool:<toolUseId>:<child id>`` and resume through the
parent; ``delegate=True`` ends the parent's turn with the child's answer). The reset happens inside
the actor (:func:`invoke_in_actor`), so no history crosses the wire for calls that finish.

An interrupted call is the exception: the actor returns the child's interrupted turn, the parent parks
it in its interrupt context (persisted by the parent's session manager) and sends it back with the
responses. So a new driver process can resume through any actor built from the same agent code: the
detached actor that still holds the turn, a restarted one, or a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from ray_harness.agent.as_tool import (
    ParkedTurn,
    SubAgentTool,
    forward_cancel,
    park,
    restore_context,
    resume_or_start,
    snapshot_context,
)
from ray_harness.extensions._chain import SCOPE_KEY
from ray_harness.middleware.types import ToolResultEvent
from ray_harness.runtime._host import DEDICATED_KEY
from ray_harness.runtime._wire import InvokeRequest, invoke_request
from ray_harness.tools.base import RawReturn, ToolContext, error_result, observe_raw

if TYPE_CHECKING:
    from ray_harness.runtime._runner import AgentRunner
    from ray_harness.runtime.remote_agent import RemoteAgent
    from ray_harness.types.content import ToolUse

__all__ = ("RemoteAgentAsTool", "invoke_in_actor")

class RemoteAgentAsTool(SubAgentTool):
    """A :class:`RemoteAgent` as a tool of another agent (built by ``RemoteAgent.as_tool()``)."""

    exposes_raw_call = True  # TOOL_RAW extensions see the child's AgentResult

    def __init__(self, remote: RemoteAgent, *, name: str | None = None, description: str | None = None,
                 preserve_context: bool = False, delegate: bool = False) -> None:
        tool_name = name or remote.agent_name
        # As for an in-process agent: the agent's own description first (the model picks tools by it).
        text = description or remote.description or f"Use the {tool_name} agent (running in its own Ray actor) as a " \
                                                    "tool by providing a natural language input"
        super().__init__(tool_name, text, preserve_context=preserve_context, delegate=delegate)
        self._remote = remote

    @property
    def agent_name(self) -> str:
        """The name of the agent in the actor (asked once, when the tool was made)."""
        return self._remote.agent_name

    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        """Run one tool call in the child's actor; yields its tool result."""
        use_id = str(tool_use["toolUseId"])
        start = resume_or_start(context, use_id, self._name)
        if isinstance(start, dict):
            yield ToolResultEvent(start)
            return
        parked, prompt = start
        invocation_id = uuid.uuid4().hex
        client = self._remote.client
        watcher = asyncio.ensure_future(forward_cancel(context.cancel_signal, self._remote.cancel_async))
        async def remote_call() -> AsyncGenerator[Any, None]:  # the raw call, as TOOL_RAW extensions see it
            request = invoke_request(invocation_id, prompt, invocation_state={SCOPE_KEY: True}, events="result",
                                     agent_key=DEDICATED_KEY)
            outcome = await client.call("run_as_tool", request, self._preserve_context,
                                        parked.to_dict() if parked is not None else None)
            yield RawReturn(outcome.get("result"), outcome)

        outcome: dict[str, Any] = {}
        try:
            async for event in observe_raw(context, remote_call):
                if isinstance(event, RawReturn):
                    outcome = event.extra
        except Exception as error:
            yield ToolResultEvent(error_result(use_id, f"Agent error: {error}"))
            return
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        if outcome.get("busy"):
            yield ToolResultEvent(error_result(use_id, f"Agent '{self._name}' is already processing a request"))
            return
        result = outcome["result"]
        if result.stop_reason == "interrupt" and result.interrupts:
            turn = outcome.get("turn")
            if turn is None:
                yield ToolResultEvent(error_result(
                    use_id, f"Agent '{self._name}' paused on an interrupt but its actor returned no interrupted "
                            "turn (an older ray_harness in the actor?); the interrupt cannot be resumed."))
                return
            park(context, use_id, ParkedTurn.from_dict(turn))
        yield ToolResultEvent(self._tool_result(use_id, result, context))


async def invoke_in_actor(runner: AgentRunner, request: InvokeRequest, preserve_context: bool,
                          turn: dict[str, Any] | None) -> dict[str, Any]:
    """Run the actor's half of one call (``AgentHost.run_as_tool``).

    ``turn`` (a parked :class:`ParkedTurn`) is loaded into the agent before the responses in the request's prompt
    are applied. An interrupted call returns its turn (``"turn"``) and, unless ``preserve_context``, the
    agent goes back to its baseline at once; a finished call restores the baseline.
    """
    if runner.busy:
        return {"busy": True}
    agent = runner.agent
    if turn is not None:
        parked = ParkedTurn.from_dict(turn)
        parked.load_into(agent)
        baseline = parked.baseline
        runner.persist()
    else:
        baseline = None if preserve_context or not isinstance(request.prompt, str) else snapshot_context(agent)
    try:
        result = await runner.invoke(request)
    except BaseException:
        if baseline is not None:
            restore_context(agent, baseline)
            runner.persist()
        raise
    outcome: dict[str, Any] = {"busy": False, "result": result}
    if result.stop_reason == "interrupt" and result.interrupts:
        outcome["turn"] = ParkedTurn.capture(agent, result.interrupts, baseline).to_dict()
    if baseline is not None:
        restore_context(agent, baseline)
        runner.persist()
    return outcome
