"""``Agent.as_tool()``: an agent wrapped as a tool of another agent.

The tool takes one ``input`` string. By default every call starts from the
child's conversation as it was before the call (restored afterwards), so calls
do not leak into each other; ``preserve_context=True`` keeps the history. A
child that is already busy answers with an error result instead of raising.
Interrupts of the child surface as interrupts of the parent with ids
``v1:agent_as_tool:<toolUseId>:<child id>``; resuming the parent resumes the
child (in the same process: the child keeps its interrupted turn in memory).
``delegate=True`` ends the parent's turn with the child's answer.
"""

from __future__ import annotations

import asyncio
import copy
import re
import threading
import weakref
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from ray_harness.agent.state import AgentState
from ray_harness.hooks.events import AfterToolsEvent
from ray_harness.hooks.registry import HookOrder
from ray_harness.interrupts import Interrupt, InterruptException
from ray_harness.middleware.types import ToolResultEvent
from ray_harness.tools.base import AgentTool, ToolContext, ToolStreamEvent, error_result

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.types.content import ToolResult, ToolUse
    from ray_harness.types.tools import ToolSpec

__all__ = ("AgentAsTool", "SubAgentInterrupt")

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_DELEGATED = "__ray_harness_delegated__"
DELEGATION_SUFFIX = (" Calling this tool returns its response directly to the user as the final answer."
                     " It should be the only tool called in the turn.")


class SubAgentInterrupt(InterruptException):
    """The child paused for a human; carries all its interrupts, re-keyed for the parent."""

    def __init__(self, interrupts: list[Interrupt]) -> None:
        super().__init__(interrupts[0])
        self.interrupts = interrupts

    def __reduce__(self) -> tuple[Any, ...]:
        return (SubAgentInterrupt, (self.interrupts,))


class AgentAsTool(AgentTool):
    """A tool that runs an agent with the given ``input`` and returns its answer."""

    def __init__(self, agent: Agent, *, name: str | None = None, description: str | None = None,
                 preserve_context: bool = False, delegate: bool = False) -> None:
        tool_name = name or agent.name
        if not _NAME.fullmatch(tool_name):
            raise ValueError(f"tool name {tool_name!r} must match {_NAME.pattern}; pass name= to as_tool()")
        self._agent = agent
        self._name = tool_name
        self._preserve_context = preserve_context
        self._delegate = delegate
        text = description or agent.description or f"Use the {tool_name} agent as a tool by providing a natural " \
                                                    "language input"
        self._description = text + (DELEGATION_SUFFIX if delegate else "")
        self._busy = threading.Lock()
        self._parents: weakref.WeakSet[Any] = weakref.WeakSet()
        self._baselines: dict[str, dict[str, Any]] = {}

    @property
    def agent(self) -> Agent:
        return self._agent

    @property
    def tool_name(self) -> str:
        return self._name

    @property
    def tool_type(self) -> str:
        return "agent"

    @property
    def tool_spec(self) -> ToolSpec:
        return sub_agent_spec(self._name, self._description)

    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        use_id = str(tool_use["toolUseId"])
        raw = tool_use.get("input")
        prompt: Any = raw.get("input", "") if isinstance(raw, dict) else str(raw or "")
        prefix = f"v1:agent_as_tool:{use_id}:"
        parent = context.agent
        if not self._busy.acquire(blocking=False):
            yield ToolResultEvent(error_result(use_id, f"Agent '{self._name}' is already processing a request"))
            return
        try:
            responses = _responses_for(parent, prefix)
            if responses:
                if not self._agent._interrupt_state.activated:
                    yield ToolResultEvent(error_result(
                        use_id, f"Agent '{self._name}' did NOT run: its interrupted turn is not available in this "
                                "process, so the response was not applied."))
                    return
                prompt = responses
            async for event in self._run_child(prompt, tool_use, context, prefix):
                yield event
        finally:
            self._busy.release()

    async def _run_child(self, prompt: Any, tool_use: ToolUse, context: ToolContext,
                         prefix: str) -> AsyncGenerator[Any, None]:
        use_id = str(tool_use["toolUseId"])
        resuming = not isinstance(prompt, str)
        saved = None if (self._preserve_context or resuming) else _snapshot(self._agent)
        watcher = asyncio.create_task(_forward_cancel(context.cancel_signal, self._agent))
        result = None
        try:
            async for event in self._agent.stream_async(prompt):
                if event.get("type") == "result":
                    result = event["result"]
                else:
                    yield ToolStreamEvent(tool_use, event)
        except Exception as error:
            if saved is not None:
                _restore(self._agent, saved)
            yield ToolResultEvent(error_result(use_id, f"Agent error: {error}"))
            return
        finally:
            watcher.cancel()
        if result is not None and result.stop_reason == "interrupt" and result.interrupts:
            # The child keeps its interrupted turn (no restore) so that the parent's resume can finish it;
            # the conversation to restore afterwards waits here.
            if saved is not None:
                self._baselines[use_id] = saved
            raise SubAgentInterrupt([Interrupt(id=prefix + item.id, name=item.name, reason=item.reason)
                                     for item in result.interrupts])
        if resuming:
            saved = self._baselines.pop(use_id, None)
        if saved is not None:
            _restore(self._agent, saved)
        yield ToolResultEvent(self._tool_result(use_id, result, context))

    def _tool_result(self, use_id: str, result: Any, context: ToolContext) -> ToolResult:
        return sub_agent_result(self._name, use_id, result, context, self._delegate, self._parents)


def sub_agent_spec(name: str, description: str) -> ToolSpec:
    """The spec of an agent used as a tool: one ``input`` string."""
    return {
        "name": name,
        "description": description,
        "inputSchema": {"json": {
            "type": "object",
            "properties": {"input": {"type": "string", "description": "The input to send to the agent tool."}},
            "required": ["input"],
        }},
    }


def sub_agent_result(name: str, use_id: str, result: Any, context: ToolContext, delegate: bool,
                     parents: weakref.WeakSet[Any]) -> ToolResult:
    """The tool result for a finished sub-agent run (registering delegation with the parent if asked)."""
    if result is None:
        return error_result(use_id, "Agent did not produce a result")
    if result.stop_reason == "cancelled":
        return error_result(use_id, f"Agent '{name}' cancelled")
    if result.structured_output is not None and hasattr(result.structured_output, "model_dump"):
        return {"toolUseId": use_id, "status": "success",
                "content": [{"json": result.structured_output.model_dump(mode="json")}]}
    if delegate:
        blocks = [{"text": block["text"]} for block in result.message.get("content", []) if "text" in block]
        context.invocation_state.setdefault(_DELEGATED, {})[use_id] = blocks or [{"text": str(result).rstrip("\n")}]
        parent = context.agent
        if parent is not None and parent not in parents:
            parents.add(parent)
            parent.hooks.add_callback(AfterToolsEvent, _end_turn_with_delegate, HookOrder.SDK_LAST)
    return {"toolUseId": use_id, "status": "success", "content": [{"text": str(result)}]}


def _end_turn_with_delegate(event: AfterToolsEvent) -> None:
    """The parent's turn ends with the delegated child's answer (no further model call)."""
    delegated = event.invocation_state.get(_DELEGATED) or {}
    for block in event.message.get("content", []):
        use_id = block.get("toolResult", {}).get("toolUseId") if "toolResult" in block else None
        if use_id in delegated:
            event.end_turn = delegated.pop(use_id)
            return


def _responses_for(parent: Any, prefix: str) -> list[dict[str, Any]]:
    """The parent's answers to this call's interrupts, re-keyed to the child's ids."""
    state = getattr(parent, "_interrupt_state", None)
    if state is None or not state.activated:
        return []
    return [{"interruptResponse": {"interruptId": key[len(prefix):], "response": item.response}}
            for key, item in state.interrupts.items() if key.startswith(prefix) and item.response is not None]


def _snapshot(agent: Agent) -> dict[str, Any]:
    return {"messages": copy.deepcopy(agent.messages), "state": agent.state.get()}


def _restore(agent: Agent, saved: dict[str, Any]) -> None:
    agent.messages = copy.deepcopy(saved["messages"])
    agent.state = AgentState(saved["state"])


async def _forward_cancel(signal: threading.Event, child: Agent) -> None:
    """Cancelling the parent cancels the child (polled: the parent's signal is a threading.Event)."""
    # Polled rather than awaited in a thread: a thread blocked in Event.wait() could not be stopped
    # when the child finishes first.
    while not signal.is_set():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    child.cancel()
