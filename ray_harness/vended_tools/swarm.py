"""``swarm``: the model spins up a team of agents that solve a task by handing off to one another.

Strands' ``strands.vended_tools.swarm``. The model names the agents it needs (``agents``: a name each, plus the
axes the authority modes of :mod:`ray_harness.multiagent.spec` show it); each is resolved to an
:class:`~ray_harness.multiagent.spec.AgentSpec`, built with the :data:`~ray_harness.multiagent.spec.AgentBuilder`
(default: made the way the calling agent was) and joins a :class:`~ray_harness.multiagent.Swarm` run in this
process (``runtime="local"``: the swarm runs where the agent holding the tool runs). The swarm's events are the
tool's stream events; its output (each member's last answer, prefixed with its name) is the result, and a swarm
that does not complete is an error result with the partial output.

- Members never get a swarm tool (swarms do not nest) nor a tool named ``handoff_to_agent``.
- ``agent.cancel()`` on the parent cancels the running swarm (Strands' cannot be cancelled from the parent).
- A member's interrupt becomes an interrupt of this tool, one per resume (named by the member's interrupt id,
  its reason ``{"name", "reason"}``, as in Strands). The interrupted swarm waits in the tool, in memory, so it
  resumes in the same process only (as in Strands).
- The tool pickles (an agent holding it ships to a Ray host); a swarm waiting for a resume stays behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

from ray_harness.agent.as_tool import forward_cancel
from ray_harness.interrupts import Interrupt, InterruptException
from ray_harness.middleware.types import ToolResultEvent
from ray_harness.multiagent._handoff import HANDOFF_TOOL_NAME
from ray_harness.multiagent.base import Status
from ray_harness.multiagent.spec import (
    AgentBuilder,
    Choice,
    Fixed,
    Inherit,
    Open,
    Preset,
    check_axes,
    default_builder,
    resolve_specs,
    to_schema_properties,
)
from ray_harness.multiagent.swarm import Swarm
from ray_harness.tools.base import HeldSpecBase, ToolContext, ToolStreamEvent, error_result
from ray_harness.vended_tools.subagent import _child_invocation_state

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.types.content import ToolUse
    from ray_harness.types.tools import ToolSpec

__all__ = ("DEFAULT_MAX_AGENTS", "DEFAULT_SWARM_DESCRIPTION", "SwarmTool", "make_swarm", "swarm")

DEFAULT_SWARM_DESCRIPTION = (
    "Spin up a team of AI agents that solve a task together by handing off to one another. "
    "Each agent has its own name, system prompt, and tools (drawn from your own). "
    "Agents get their own handoff tool and cannot start another swarm; your other tools are passed through. "
    "The `entry_point` agent (default: the first in `agents`) receives the "
    "task and starts the work. The run ends when an agent finishes without handing off. "
    "Returns each participating agent's final output, prefixed with its name. If the team "
    "does not complete (an agent fails, or a handoff, iteration, or time limit is hit), the "
    "call fails with the partial output."
)
"""What the model reads about the default ``swarm`` tool (Strands' text)."""

DEFAULT_MAX_AGENTS = 20
"""The most agents one call may create by default."""


def _swarm_schema(*, presets: Mapping[str, Preset], default_preset: str | None, instructions: Open | Choice | Fixed,
                  tools: Choice | Fixed | Inherit | None, model: Inherit | Choice | Fixed,
                  max_agents: int) -> dict[str, Any]:
    """The input schema: ``task``, ``entry_point`` and ``agents``, whose items show the axes the model sets."""
    # Without a preset to fall back on, an Open prompt must come from the model.
    required = ["name", "instructions"] if isinstance(instructions, Open) and not presets else ["name"]
    axes = to_schema_properties(presets=presets, default_preset=default_preset, instructions=instructions,
                                tools=tools, model=model)
    return {
        "type": "object",
        "required": ["task", "agents"],
        "properties": {
            "task": {"type": "string", "description": "The objective for the agent team."},
            "entry_point": {"type": "string", "description": "Name of the agent that receives the task and starts "
                                                             "the swarm. Defaults to the first agent."},
            "agents": {
                "type": "array",
                "description": "Agent specifications.",
                "items": {"type": "object",
                          "properties": {"name": {"type": "string", "description": "A unique name for this agent."},
                                         **axes},
                          "required": required, "additionalProperties": False},
                "minItems": 1,
                "maxItems": max_agents,
            },
        },
    }


class SwarmTool(HeldSpecBase):
    """The ``swarm`` tool: a new :class:`~ray_harness.multiagent.Swarm` per call (see the module docstring)."""

    def __init__(self, name: str, tool_spec: ToolSpec, *, presets: dict[str, Preset], default_preset: str | None,
                 instructions: Open | Choice | Fixed, tools: Choice | Fixed | Inherit | None,
                 model: Inherit | Choice | Fixed, builder: AgentBuilder | None, max_agents: int,
                 limits: dict[str, Any]) -> None:
        self._name = name
        self._spec = tool_spec
        self._presets = presets
        self._default_preset = default_preset
        self._instructions = instructions
        self._tools = tools
        self._model = model
        self._builder = builder
        self.max_agents = max_agents
        self.limits = limits
        """The Swarm limits set (the Swarm's defaults apply to the others)."""
        self._pending: dict[str, tuple[Swarm, list[Interrupt]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_pending"] = {}  # a swarm waiting for a resume belongs to this process (its members are live agents)
        return state

    def build_swarm(self, task: Any, agents: Any, entry_point: Any, parent: Agent | None) -> Swarm:
        """The swarm for one call's input.

        Raises:
            ValueError: An input is malformed, there are not 1..``max_agents`` agents, or ``entry_point`` names
                none of them; the message names the field.
        """
        if not isinstance(task, str) or not task.strip():
            raise ValueError("task must be a non-empty string")
        if entry_point is not None and not isinstance(entry_point, str):
            raise ValueError(f"entry_point must be a string, got {type(entry_point).__name__}")
        specs = resolve_specs(agents, presets=self._presets, default_preset=self._default_preset,
                              instructions=self._instructions, tools=self._tools, model=self._model)
        if not 1 <= len(specs) <= self.max_agents:
            raise ValueError(f"Between 1 and {self.max_agents} agents required, got {len(specs)}")
        if entry_point is not None and entry_point not in {spec.name for spec in specs}:
            raise ValueError(f"entry_point {entry_point!r} does not match any agent name")
        build = self._builder or default_builder(parent)
        members: dict[str, Agent] = {}
        for spec in specs:
            child = build(spec)
            for tool_name, child_tool in list(child.tool_registry.registry.items()):
                if tool_name == HANDOFF_TOOL_NAME or isinstance(child_tool, SwarmTool):
                    child.tool_registry.remove(tool_name)
            members[str(spec.name)] = child
        return Swarm(list(members.values()), entry_point=members[entry_point] if entry_point is not None else None,
                     runtime="local", **self.limits)

    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        """Build (or resume) the swarm, stream its events, then yield its output as the tool result.

        Raises:
            InterruptException: A member paused for a human (the parent pauses; answer and resume it).
        """
        use_id = str(tool_use["toolUseId"])
        raw = tool_use.get("input")
        tool_input: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        try:
            if use_id in self._pending:
                team, interrupts = self._pending[use_id]
                task: Any = [{"interruptResponse": {"interruptId": item.id, "response": context.interrupt(
                    item.id, reason={"name": item.name, "reason": item.reason})}} for item in interrupts]
            else:
                team = self.build_swarm(tool_input.get("task"), tool_input.get("agents"),
                                        tool_input.get("entry_point"), context.agent)
                task = tool_input["task"]
            result = None
            async for event in self._run(team, task, tool_use, context):
                if isinstance(event, ToolStreamEvent):
                    yield event
                else:
                    result = event
            text = self._answer(use_id, team, result, context)
        except InterruptException:
            raise
        except Exception as error:
            yield ToolResultEvent(error_result(use_id, f"Error: {error}"))
            return
        yield ToolResultEvent({"toolUseId": use_id, "status": "success", "content": [{"text": text}]})

    async def _run(self, team: Swarm, task: Any, tool_use: ToolUse,
                   context: ToolContext) -> AsyncGenerator[Any, None]:
        """The swarm's events as tool stream events, then its result (or None)."""
        use_id = str(tool_use["toolUseId"])
        watcher = asyncio.create_task(forward_cancel(context.cancel_signal, team.cancel))
        result = None
        events = team.stream_async(task, invocation_state=_child_invocation_state(context.invocation_state))
        try:
            async for event in events:
                # The result is held back: it becomes the tool's result, not a stream event.
                if event.get("type") == "multiagent_result":
                    result = event["result"]
                else:
                    yield ToolStreamEvent(tool_use, event)
        finally:
            await events.aclose()
            watcher.cancel()
            self._pending.pop(use_id, None)
        yield result

    def _answer(self, use_id: str, team: Swarm, result: Any, context: ToolContext) -> str:
        if result is None:
            raise RuntimeError("Swarm stream ended without producing a result")
        if result.status == Status.INTERRUPTED and result.interrupts:
            self._pending[use_id] = (team, list(result.interrupts))
            first = result.interrupts[0]
            context.interrupt(first.id, reason={"name": first.name, "reason": first.reason})  # raises
        if result.status != Status.COMPLETED:
            raise RuntimeError(f"Swarm stopped before completing (status={result.status.value}, "
                               f"{result.execution_count} iterations). Partial output:\n{result}")
        return str(result)


def _limit(name: str, value: Any) -> None:
    # The Swarm's own rules: timeouts are positive numbers, the repetition settings non-negative ints (0: off).
    if value is None:
        return
    if name.startswith("repetitive_"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer or None, got {value!r}")
        return
    kinds = int | float if name.endswith("timeout") else int
    if isinstance(value, bool) or not isinstance(value, kinds) or value <= 0:
        raise ValueError(f"{name} must be a positive {'number' if kinds is not int else 'integer'} or None, "
                         f"got {value!r}")


def make_swarm(*, name: str = "swarm", description: str = DEFAULT_SWARM_DESCRIPTION,
               builder: AgentBuilder | None = None, presets: Mapping[str, Preset] | None = None,
               default_preset: str | None = None, instructions: Open | Choice | Fixed | None = None,
               tools: Choice | Fixed | Inherit | None = None, model: Inherit | Choice | Fixed | None = None,
               max_agents: int = DEFAULT_MAX_AGENTS, max_handoffs: int | None = None,
               max_iterations: int | None = None, execution_timeout: float | None = None,
               node_timeout: float | None = None, repetitive_handoff_detection_window: int | None = None,
               repetitive_handoff_min_unique_agents: int | None = None) -> SwarmTool:
    """A ``swarm`` tool with developer-set limits and authority modes.

    Args:
        name: The tool's name.
        description: What the model reads.
        builder: Turns each resolved spec into a member (default: made the way the calling agent was). It must
            pickle for the tool to ship to a Ray host.
        presets: Roles the model picks with ``agent_type`` (default: none).
        default_preset: The role when the model gives none (default: the first preset).
        instructions: ``Open()`` (default), ``Choice(...)`` or ``Fixed(...)``.
        tools: ``Inherit()`` (default: every parent tool), ``Choice(..., multiple=True)`` or ``Fixed([...])``.
        model: ``Inherit()`` (default), ``Choice(...)`` or ``Fixed(...)``.
        max_agents: The most agents per call (a positive int, default 20).
        max_handoffs: The Swarm's ``max_handoffs`` (None: the Swarm's default); likewise ``max_iterations``,
            ``execution_timeout``, ``node_timeout``, ``repetitive_handoff_detection_window`` and
            ``repetitive_handoff_min_unique_agents``.
        max_iterations: See ``max_handoffs``.
        execution_timeout: See ``max_handoffs``.
        node_timeout: See ``max_handoffs``.
        repetitive_handoff_detection_window: See ``max_handoffs``.
        repetitive_handoff_min_unique_agents: See ``max_handoffs``.

    Raises:
        ValueError: ``max_agents`` or a limit is not positive, ``name`` or ``description`` is empty, or an axis
            is malformed; the message names the argument.
    """
    if not isinstance(max_agents, int) or isinstance(max_agents, bool) or max_agents < 1:
        raise ValueError("max_agents must be a positive integer")
    for label, value in (("name", name), ("description", description)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{label} must be a non-empty string.")
    limits: dict[str, Any] = {"max_handoffs": max_handoffs, "max_iterations": max_iterations,
                              "execution_timeout": execution_timeout, "node_timeout": node_timeout,
                              "repetitive_handoff_detection_window": repetitive_handoff_detection_window,
                              "repetitive_handoff_min_unique_agents": repetitive_handoff_min_unique_agents}
    for label, value in limits.items():
        _limit(label, value)
    roles = dict(presets or {})
    if default_preset is None and roles:
        default_preset = next(iter(roles))
    check_axes(presets=roles, default_preset=default_preset, instructions=instructions, tools=tools, model=model)
    if builder is not None and not callable(builder):
        raise ValueError(f"builder must be a callable taking an AgentSpec, got {builder!r}")
    instructions = Open() if instructions is None else instructions
    model = Inherit() if model is None else model
    schema = _swarm_schema(presets=roles, default_preset=default_preset, instructions=instructions, tools=tools,
                           model=model, max_agents=max_agents)
    spec: ToolSpec = {"name": name, "description": description, "inputSchema": {"json": schema}}
    return SwarmTool(name, spec, presets=roles, default_preset=default_preset, instructions=instructions,
                     tools=tools, model=model, builder=builder, max_agents=max_agents,
                     limits={key: value for key, value in limits.items() if value is not None})


swarm = make_swarm()
"""The default ``swarm`` tool: members inherit the caller's model and tools."""
