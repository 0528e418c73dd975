"""The plugin that gives one agent background tool execution (Strands' internal ``_BackgroundTasks``).

- Routing: per tool call, after ``BeforeToolCallEvent``, :meth:`BackgroundTasks.admit` decides foreground or
  background (``always`` tools, and ``agentic`` ones the model flagged with ``_background_execution``; the
  flag is taken out of the input the tool sees). A background call is answered at once with its task id.
- The model's view: an ``InvokeModelStage.Input`` middleware adds the flag to the ``agentic`` tools' schemas;
  the ``strands_manage_background_task`` tool lists, gets or cancels tasks.
- Delivery: finished tasks reach the history as a synthetic ``get`` call and its result, before the next model
  call (``BeforeModelCallEvent``) or, at the end of an invocation that ended its turn, as the prompt of a
  follow-up round (``AfterInvocationEvent.resume``), so the model answers them; a delivered task is forgotten.
- Lifetime: with ``wait_for_completion`` the invocation waits for its tasks first; a cancelled invocation,
  ``agent.cancel()`` and ``agent.shutdown()`` cancel them.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Literal

from ray_harness.background_tasks._execute import execute_in_background
from ray_harness.background_tasks._manager import TaskManager
from ray_harness.background_tasks._types import BackgroundTask, Mode, is_terminal, resolve_settings
from ray_harness.hooks.events import AfterInvocationEvent, BeforeModelCallEvent
from ray_harness.hooks.registry import HookOrder
from ray_harness.middleware.types import InvokeModelContext, InvokeModelStage
from ray_harness.plugins.plugin import Plugin
from ray_harness.tools.base import error_result
from ray_harness.tools.decorator import tool
from ray_harness.types.content import Message, ToolResult, ToolResultContent, ToolUse

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.agent.loop import Invocation
    from ray_harness.tools.base import AgentTool
    from ray_harness.types.tools import ToolSpec

__all__ = ("BACKGROUND_FLAG", "MANAGE_TOOL_NAME", "BackgroundTasks", "attach_background_tasks")

MANAGE_TOOL_NAME = "strands_manage_background_task"  # Strands' names: histories and prompts carry over
BACKGROUND_FLAG = "_background_execution"
_FOREGROUND_TOOLS = frozenset({MANAGE_TOOL_NAME, "summarize_context", "truncate_context", "pin_context"})
_COMPOSITE_KEYS = frozenset({"$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else"})
_CONTINUING = ("end_turn", "stop_sequence")  # results are answered after these stops only (as in Strands)


class BackgroundTasks(Plugin):
    """Background tool execution for one agent (made by ``Agent(background_tasks=...)``)."""

    name = "strands:background-tasks"

    def __init__(self, config: Any) -> None:
        self._settings = resolve_settings(config)
        self._manager = TaskManager(self._settings.max_concurrency, self._settings.timeout)
        super().__init__()

    @property
    def manager(self) -> TaskManager:
        """The agent's task board."""
        return self._manager

    def init_agent(self, agent: Agent) -> None:
        """Check the tools against the policy, then add the schema middleware and the delivery hooks.

        Raises:
            TypeError: A tool declares the reserved ``_background_execution`` parameter, or a tool named in the
                config cannot honour its mode; every such tool is named in the one message.
        """
        errors: list[str] = []
        for name, registered in agent.tool_registry.registry.items():
            if _declares_flag(registered.tool_spec):
                errors.append(f"Tool '{name}' declares reserved parameter '{BACKGROUND_FLAG}'")
                continue
            mode, exact = self._mode(registered)
            if exact and mode != "never":
                reason = self._rejection(registered, mode)
                if reason is not None:
                    errors.append(f"Tool '{name}' {reason}")
        if errors:
            raise TypeError("; ".join(errors))
        agent.add_middleware(InvokeModelStage.Input, self._offer_selection)
        agent.add_hook(self._before_model_call, BeforeModelCallEvent, HookOrder.SDK_LAST)
        agent.add_hook(self._after_invocation, AfterInvocationEvent)

    # -- the model's tool ------------------------------------------------------------------------------

    @tool(name=MANAGE_TOOL_NAME, description=(
        "List, get, or cancel background tasks. Results are delivered automatically as synthetic 'get' calls. "
        "Do not poll for results."))
    def manage_background_task(self, mode: Literal["list", "get", "cancel"], task_id: str | None = None
                               ) -> dict[str, Any]:
        """Manage tracked background tasks.

        Args:
            mode: Whether to list, inspect, or cancel background tasks.
            task_id: The background task ID returned when the task was dispatched. Required for get and cancel.
        """
        if mode == "list":
            listing = [{"task_id": task["task_id"], "tool_name": task["tool_name"], "status": task["status"]}
                       for task in self._manager.snapshots()]
            return {"status": "success", "content": [{"json": {"tasks": listing}}]}
        if not task_id:
            raise TypeError(f"Task ID is required for mode '{mode}'")
        if mode == "get":
            return {"status": "success", "content": _task_content(self._manager.get(task_id))}
        task = self._manager.cancel(task_id)
        return {"status": "success", "content": [{"json": {"task_id": task["task_id"], "status": task["status"]}}]}

    # -- routing (called by the tool half for every model-driven call) ---------------------------------

    async def admit(self, inv: Invocation, call: ToolUse, requested: AgentTool | None,
                    selected: AgentTool | None) -> ToolResult | None:
        """The dispatch acknowledgement of a call sent to the background, an error when it cannot go, or None.

        None: the call runs in the foreground. The ``_background_execution`` flag is taken out of ``call``'s input
        either way (the tool never sees it; the history keeps the model's request).
        """
        chosen = False
        arguments = call.get("input")
        if isinstance(arguments, dict) and BACKGROUND_FLAG in arguments:
            arguments = dict(arguments)
            value = arguments.pop(BACKGROUND_FLAG)
            call["input"] = arguments
            if not isinstance(value, bool):
                return error_result(call["toolUseId"], f"'{BACKGROUND_FLAG}' must be a boolean")
            chosen = value and self._mode(requested)[0] == "agentic"
        if inv is not inv.agent._invocation:  # a direct call (agent.tool.x): always in the foreground
            return None
        mode, exact = self._mode(selected)
        if mode == "never" or selected is None:
            return None
        reason = self._rejection(selected, mode)
        if reason is not None:
            return error_result(call["toolUseId"], f"Tool '{call['name']}' {reason}") if exact else None
        if mode != "always" and not chosen:
            return None
        return self._submit(inv, call, selected)

    def _submit(self, inv: Invocation, call: ToolUse, selected: AgentTool) -> ToolResult:
        use_id = call["toolUseId"]
        if inv.cancelled:
            return error_result(use_id, "Tool execution cancelled")
        agent, state, request = inv.agent, inv.state, copy.deepcopy(call)

        async def run(signal: Any) -> ToolResult:
            return await execute_in_background(agent, selected, request, state, signal)

        task = self._manager.submit(use_id, call["name"], run)
        text = "\n".join(["Background task dispatched.", "", f"Task ID: {task['task_id']}",
                          f"Tool: {task['tool_name']}", f"Status: {task['status']}", "",
                          "The task is running in the background. Continue without waiting or polling.",
                          "The final result will be delivered automatically when the task completes."])
        return {"toolUseId": use_id, "status": "success", "content": [{"text": text}]}

    # -- the model's view of the tools ----------------------------------------------------------------

    def _offer_selection(self, ctx: InvokeModelContext) -> InvokeModelContext:
        """Add the ``_background_execution`` flag to the schema of each tool the model may send to the background.

        Raises:
            TypeError: A tool declares the flag itself, or a tool named ``agentic`` cannot take it.
        """
        specs: list[ToolSpec] = []
        for spec in ctx.tool_specs:
            if _declares_flag(spec):
                raise TypeError(f"Tool '{spec['name']}' declares reserved parameter '{BACKGROUND_FLAG}'")
            registered = ctx.agent.tool_registry.get(spec["name"])
            mode, exact = self._mode(registered)
            selectable = _with_flag(spec) if mode == "agentic" and self._runs_in_background(registered) else None
            if selectable is None and exact and mode == "agentic":
                raise TypeError(f"Tool '{spec['name']}' cannot use agentic background selection")
            specs.append(selectable or spec)
        return ctx.replace(tool_specs=specs)

    # -- delivery -------------------------------------------------------------------------------------

    async def _before_model_call(self, event: BeforeModelCallEvent) -> None:
        """Finished tasks join the history before the model is called (as a ``get`` call and its result)."""
        messages, task_ids = self._ready()
        for message in messages:
            await event.agent._append_message(message, event.invocation_state)
        self._manager.remove(task_ids)

    async def _after_invocation(self, event: AfterInvocationEvent) -> None:
        """Wait for the tasks (``wait_for_completion``), then hand their results to a follow-up round."""
        agent = event.agent
        if event.result is None or agent._interrupt_state.activated:
            return
        signal = agent.cancel_signal
        if self._settings.wait_for_completion and not signal.is_set():
            await self._manager.wait_until_settled(signal)
        if signal.is_set():
            self._manager.cancel_all()  # a cancelled invocation takes its background work with it
            return
        if event.result.stop_reason not in _CONTINUING:
            return
        prompt = _follow_up(event.resume)
        if prompt is None:
            return  # a hook's own resume that results cannot join: they wait for the next model call
        messages, task_ids = self._ready()
        if messages:
            event.resume = [*messages, *prompt]
            self._manager.remove(task_ids)

    def _ready(self) -> tuple[list[Message], list[str]]:
        """The synthetic messages of every finished task, and their ids."""
        messages: list[Message] = []
        task_ids: list[str] = []
        for task in self._manager.snapshots():
            if not is_terminal(task["status"]):
                continue
            task_ids.append(task["task_id"])
            use: ToolUse = {"toolUseId": task["task_id"], "name": MANAGE_TOOL_NAME,
                            "input": {"mode": "get", "task_id": task["task_id"]}}
            messages.append({"role": "assistant", "content": [{"toolUse": use}]})
            # The get succeeds even when the task failed: the status and error are in the JSON.
            messages.append({"role": "user", "content": [{"toolResult": {
                "toolUseId": task["task_id"], "status": "success", "content": _task_content(task)}}]})
        return messages, task_ids

    # -- lifetime -------------------------------------------------------------------------------------

    def cancel_all(self) -> None:
        """Cancel every queued or running task (``agent.cancel()``)."""
        self._manager.cancel_all()

    def shutdown(self) -> None:
        """Cancel every task and wait for the runner thread to end (``agent.shutdown()``)."""
        self._manager.shutdown()

    # -- policy ---------------------------------------------------------------------------------------

    def _mode(self, registered: AgentTool | None) -> tuple[Mode | None, bool]:
        """The tool's mode and whether the config names it (rather than ``"*"``); (None, False) for no tool."""
        if registered is None:
            return None, False
        policy = self._settings.policy
        exact = policy.get(registered.tool_name)
        if exact is not None:
            return exact, True
        return policy.get("*"), False

    def _runs_in_background(self, registered: AgentTool | None) -> bool:
        mode = self._mode(registered)[0]
        return (registered is not None and mode is not None and mode != "never"
                and registered.tool_name not in _FOREGROUND_TOOLS and not _delegates(registered))

    def _rejection(self, registered: AgentTool, mode: Mode | None) -> str | None:
        """Why the tool cannot honour ``mode``, or None when it can."""
        if not self._runs_in_background(registered):
            return "cannot run in the background"
        if mode == "agentic" and _with_flag(registered.tool_spec) is None:
            return "cannot use agentic background selection"
        return None


def attach_background_tasks(agent: Agent, config: Any) -> BackgroundTasks:
    """``Agent(background_tasks=...)``: make the plugin and register it (after the agent's other plugins).

    Raises:
        TypeError: A bad config (the error names the key) or a tool that cannot honour its configured mode.
    """
    plugin = BackgroundTasks(config)
    from ray_harness.plugins.registry import PluginRegistry

    registry = agent.__dict__.get("_plugin_registry")
    if registry is None:
        registry = agent._plugin_registry = PluginRegistry()
    registry.add_and_init(agent, plugin)
    return plugin


def _follow_up(resume: Any) -> list[Message] | None:
    """Messages a hook's ``resume`` stands for after the results (None: results cannot go before it)."""
    if resume is None:
        return []
    if isinstance(resume, str):
        return [{"role": "user", "content": [{"text": resume}]}]
    if isinstance(resume, list) and resume and all(isinstance(item, dict) and "role" in item for item in resume):
        return list(resume)
    return None


def _delegates(registered: AgentTool) -> bool:
    """An agent-as-tool with ``delegate=True`` ends the parent's turn: it must run in the foreground."""
    from ray_harness.agent.as_tool import AgentAsTool

    return isinstance(registered, AgentAsTool) and bool(getattr(registered, "_delegate", False))


def _declares_flag(spec: ToolSpec) -> bool:
    schema = spec.get("inputSchema", {}).get("json", {})
    properties = schema.get("properties")
    return (isinstance(properties, dict) and BACKGROUND_FLAG in properties) or \
        BACKGROUND_FLAG in schema.get("required", [])


def _with_flag(spec: ToolSpec) -> ToolSpec | None:
    """A copy of ``spec`` whose schema takes the flag; None when the schema is not a plain object."""
    schema = spec.get("inputSchema", {}).get("json", {})
    properties = schema.get("properties")
    if _COMPOSITE_KEYS.intersection(schema) or schema.get("type") not in (None, "object") or \
            (properties is not None and not isinstance(properties, dict)):
        return None
    flagged = copy.deepcopy(spec)
    json_schema = flagged.setdefault("inputSchema", {}).setdefault("json", {})  # type: ignore[typeddict-item]
    json_schema["type"] = "object"
    json_schema["properties"] = {**json_schema.get("properties", {}), BACKGROUND_FLAG: {
        "type": "boolean", "description": "Run this tool in the background and continue without waiting for its result."}}
    return flagged


def _task_content(task: BackgroundTask) -> list[ToolResultContent]:
    """A task as tool result content: its record without the result as JSON, then the result's content."""
    metadata = {key: value for key, value in task.items() if key != "result"}
    result = task.get("result")
    return [{"json": metadata}, *(result["content"] if result is not None else [])]
