"""Direct tool calls: ``agent.tool.<name>(**kwargs)`` runs a tool outside the model loop."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ray_harness._signal import Signal
from ray_harness.tools._spec import normalize_tool_spec
from ray_harness.tools.decorator import plain_json
from ray_harness.types.content import Message, ToolResult, ToolUse
from ray_harness.types.exceptions import ConcurrencyException

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("ToolCaller", "call_tool")


class ToolCaller:
    """``agent.tool``: call an agent's tools directly, as ``agent.tool.name(**input)``.

    A direct call is recorded in the conversation (``record_direct_tool_call``) unless told otherwise.
    """

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    def __getattr__(self, name: str) -> Callable[..., ToolResult]:
        registry = self._agent.tool_registry
        tool_name = _find_tool_name(registry.names, name)
        if tool_name is None:
            raise AttributeError(f"agent {self._agent.name!r} has no tool {name!r}; tools: {registry.names}")

        def call(*args: Any, record_direct_tool_call: bool | None = None, user_message_override: str | None = None,
                 **kwargs: Any) -> ToolResult:
            from ray_harness.agent.agent import run_sync

            if args:  # a tool's input is a JSON object: its fields have names
                raise TypeError(f"agent.tool.{name}() takes keyword arguments only (the tool's input fields), "
                                f"got {len(args)} positional")
            result: ToolResult = run_sync(call_tool(self._agent, tool_name, kwargs, record=record_direct_tool_call,
                                                    user_message_override=user_message_override))
            return result

        return call


# NOTE: a function, not a method: every attribute of ``agent.tool`` but ``_agent`` is a tool's name.
async def call_tool(agent: Agent, tool_name: str, tool_input: dict[str, Any], *, record: bool | None = None,
                    user_message_override: str | None = None) -> ToolResult:
    """Call ``agent``'s tool ``tool_name`` with ``tool_input`` outside the model loop and return its result.

    Args:
        agent: The agent whose tool it is.
        tool_name: The tool to call.
        tool_input: Its input.
        record: Append the call and its result to the conversation (default: the agent's
            ``record_direct_tool_call``).
        user_message_override: Text recorded as the user message before the call.

    Raises:
        RuntimeError: The agent is interrupted (resume it first).
        ConcurrencyException: The agent is running an invocation and the call would be recorded.
    """
    if agent._interrupt_state.activated:
        raise RuntimeError("cannot make a direct tool call while the agent is interrupted; resume it first")
    record = agent.record_direct_tool_call if record is None else record
    locked = agent._lock.acquire(blocking=False)
    if not locked and record:
        raise ConcurrencyException(
            "direct tool call while the agent is running an invocation; pass record_direct_tool_call=False"
        )
    try:
        tool_use: ToolUse = {"toolUseId": f"tooluse_{uuid.uuid4().hex[:24]}", "name": tool_name,
                             "input": tool_input}
        result = await _run(agent, tool_use)
        if record:
            await _record(agent, tool_use, result, user_message_override)
            # As after an invocation (and in Strands): a window or summary applies to the recorded call too.
            agent.conversation_manager.apply_management(agent)
        return result
    finally:
        if locked:
            agent._lock.release()


def _find_tool_name(names: list[str], name: str) -> str | None:
    """The tool ``agent.tool.<name>`` means: its exact name, else the one whose dashes are ``_`` in ``name``.

    As in Strands, ``agent.tool.my_tool_v2`` finds ``my-tool_v2`` (a dash cannot be in a Python name).
    """
    if name in names:
        return name
    return next((tool_name for tool_name in names if tool_name.replace("-", "_") == name), None)


async def _run(agent: Agent, tool_use: ToolUse) -> ToolResult:
    from ray_harness.agent._tool_phase import _ToolDone, _ToolInterrupted, execute_tool
    from ray_harness.agent.loop import Invocation
    from ray_harness.extensions._chain import assemble as assemble_extensions

    inv = Invocation(agent, Signal(), {}, None, None)
    # A direct call is a tool call like any other: contributed TOOL_VISIBLE / TOOL_RAW middleware observe it
    # exactly once (extensions see "every call"), in a chain of its own (a lead chain, with its own task store).
    inv.extensions = chain = assemble_extensions(agent, inv)
    run_one = (lambda use: execute_tool(agent, inv, use)) if chain is None else chain.tool_runner(execute_tool)
    result: ToolResult | None = None
    async for event in run_one(tool_use):
        if isinstance(event, _ToolInterrupted):
            agent._interrupt_state.deactivate()
            raise RuntimeError("cannot raise an interrupt in a direct tool call")
        if isinstance(event, _ToolDone):
            result = event.result
    assert result is not None
    return result


async def _record(agent: Agent, tool_use: ToolUse, result: ToolResult, override: str | None) -> None:
    spec = agent.tool_registry.get(tool_use["name"])
    # A custom tool's spec may hold a bare schema: normalised, as the model gets it.
    known = set(normalize_tool_spec(spec.tool_spec)["inputSchema"]["json"]["properties"]) if spec else set()
    # The history holds a plain-JSON copy of the input (a date as its ISO string, ...), as it holds tool
    # results: a session write of the raw objects would fail with the call half recorded.
    filtered = _plain_input({k: v for k, v in tool_use["input"].items() if not known or k in known})
    parameters = json.dumps(filtered)
    user_content: list[Any] = [{"text": f"agent.tool.{tool_use['name']} direct tool call.\n"
                                        f"Input parameters: {parameters}\n"}]
    if override:
        user_content.insert(0, {"text": f"{override}\n"})
    messages: list[Message] = [
        {"role": "user", "content": user_content},
        {"role": "assistant", "content": [{"toolUse": {**tool_use, "input": filtered}}]},
        {"role": "user", "content": [{"toolResult": result}]},
        {"role": "assistant", "content": [{"text": f"agent.tool.{tool_use['name']} was called."}]},
    ]
    for message in messages:
        await agent._append_message(message)


def _plain_input(tool_input: dict[str, Any]) -> dict[str, Any]:
    """A plain-JSON copy of a direct call's input; a value JSON cannot hold becomes its ``str()``."""
    plain: dict[str, Any] = {}
    for key, value in tool_input.items():
        try:
            plain[key] = plain_json(value)
        except ValueError:
            plain[key] = str(value)
    return plain
