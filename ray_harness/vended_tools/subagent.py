"""``subagent``: the model delegates a self-contained task to a child agent it configures at run time.

Strands' ``strands.vended_tools.subagent``. Each call resolves the model's arguments through the authority modes
of :mod:`ray_harness.multiagent.spec` (which of ``agent_type``, ``instructions``, ``tools``, ``model`` and
``context`` the model may set), builds a fresh child with the :data:`~ray_harness.multiagent.spec.AgentBuilder`
(default: one made the way the calling agent was), runs it, streams its events as the tool's stream events and
answers with its final text. Delegation depth is bounded by ``max_depth``, counted in the children's ``agent.state``.

- ``agent.cancel()`` on the parent reaches the child at once (its model call too); the call then answers
  "Subagent was cancelled.". A child's own ``stop`` tool ends it normally.
- The child's interrupts become the parent's (ids ``v1:agent_as_tool:<toolUseId>:<child id>``, as for an agent
  used as a tool); answering them resumes the child where it paused. The paused turn is parked in the parent's
  interrupt context, not in the tool, so a session or another process resumes it too (Strands keeps it in memory).
- ``context`` decides how much of the parent's conversation the child sees: ``"none"`` (default), ``"all"``
  (the messages, without unanswered tool calls and reasoning) or ``"no_tools"`` (the text turns as one block);
  ``last_messages`` limits it to the last N.
- The tool pickles (an agent holding it ships to a Ray host): it holds its configuration only.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

from ray_harness.agent.as_tool import ParkedTurn, forward_cancel, park, resume_or_start
from ray_harness.agent.conversation_manager.sliding_window import find_trim_point
from ray_harness.extensions._chain import SCOPE_KEY
from ray_harness.interrupts import InterruptException
from ray_harness.middleware.types import ToolResultEvent
from ray_harness.multiagent.spec import (
    AgentBuilder,
    AgentSpec,
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
from ray_harness.tools.base import HeldSpecBase, ToolContext, ToolStreamEvent, error_result

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.types.content import Message, ToolUse
    from ray_harness.types.tools import ToolSpec

__all__ = ("DEFAULT_SUBAGENT_DESCRIPTION", "DEFAULT_SUBAGENT_MAX_DEPTH", "GENERALIST", "SubagentTool",
           "make_subagent", "subagent")

logger = logging.getLogger(__name__)

DEFAULT_SUBAGENT_DESCRIPTION = (
    "Delegate a self-contained task to a subagent that runs in its own context and returns a "
    "final report. Reach for this when a subtask would otherwise flood your context with "
    "intermediate work and you only need its conclusion."
)
"""What the model reads about the default ``subagent`` tool (Strands' text)."""

DEFAULT_SUBAGENT_MAX_DEPTH = 2
"""How many levels of delegation a ``subagent`` tool allows by default."""

GENERALIST = Preset(
    instructions=(
        "You are a general-purpose subagent handling a focused subtask on behalf of a parent "
        "agent. You cannot ask follow-up questions, so work from the task as given, make "
        "reasonable assumptions where it is underspecified, and see it through to a verified "
        "result. Return a self-contained answer: state what you did, what you found, and "
        "anything the parent needs to act on. Your final message is the only thing that returns "
        "to the parent, so put the substance there rather than in intermediate steps."
    ),
    description="a general-purpose agent for a focused subtask that runs in its own context",
)
"""The default tool's only preset (Strands' text)."""

DEPTH_STATE_KEY = "strands.subagent_depth"
"""The child's ``agent.state`` key holding how many more levels it may delegate (Strands' key)."""

_FORK_PREAMBLE = ("The conversation so far is the parent agent's. You are the subagent it delegated to at this "
                  "point; its task for you follows.")
_CONTEXT_PREAMBLE = (
    "The conversation above is the parent agent's: each turn is one line starting with its role at "
    "the left margin, and indented lines continue the turn above (they are content, not turns). You "
    "are the subagent it delegated to at the end of that conversation; its task for you follows."
)
_FRAMING_END = f"</parent_context>\n\n{_CONTEXT_PREAMBLE}\n\n"
_SENTINEL = re.compile(r"<(/?)parent_context>")
_CONTEXT_DESCRIPTION = (
    "How much of this conversation the subagent sees: 'none' (fresh start), 'all' (full "
    "history including tool calls and their results — can be large), 'no_tools' (text turns "
    "only — tool calls and their results removed). More context costs more tokens."
)


def _subagent_schema(*, presets: Mapping[str, Preset], default_preset: str | None, instructions: Open | Choice | Fixed,
                     tools: Choice | Fixed | Inherit | None, model: Inherit | Choice | Fixed,
                     context: Fixed | Choice) -> dict[str, Any]:
    """The input schema: ``task``, the axes the model sees, and ``context``/``last_messages`` when it chooses them."""
    properties: dict[str, Any] = {
        "task": {"type": "string", "description": "The self-contained task, including all context the subagent "
                                                  "needs. It cannot ask follow-up questions."},
        **to_schema_properties(presets=presets, default_preset=default_preset, instructions=instructions,
                               tools=tools, model=model),
    }
    if isinstance(context, Choice):
        options = context.normalized()
        lines = [f"- {option.name}: {option.description}" for option in options if option.description]
        properties["context"] = {"type": "string", "enum": [option.name for option in options],
                                 "description": _CONTEXT_DESCRIPTION + ("\nOptions:\n" + "\n".join(lines)
                                                                        if lines else "")}
        if any(str(option.value) != "none" for option in options):
            properties["last_messages"] = {"type": "integer", "description": "Optional: limit the shared context to "
                                           "the last N messages. Omit to share all of the selected context."}
    return {"type": "object", "properties": properties, "required": ["task"]}


def fork_messages(messages: list[Message], last_n: int | None) -> list[Message]:
    """The parent's messages for ``context="all"``: copies without unanswered tool calls or reasoning.

    Messages of one role left next to each other are merged, so the roles alternate; ``last_n`` keeps at most
    the last N, starting at a user turn that leaves no tool result without its call.
    """
    answered = {block["toolResult"]["toolUseId"] for message in messages for block in message["content"]
                if "toolResult" in block}
    forked: list[Message] = []
    for message in messages:
        content = [block for block in message["content"] if "reasoningContent" not in block
                   and ("toolUse" not in block or block["toolUse"]["toolUseId"] in answered)]
        if not content:
            continue
        if forked and forked[-1]["role"] == message["role"]:
            forked[-1]["content"].extend(copy.deepcopy(content))
        else:
            forked.append({"role": message["role"], "content": copy.deepcopy(content)})
    if last_n is not None and last_n > 0:
        start = max(len(forked) - last_n, 0)
        # Back to the nearest user turn that starts a valid history (Strands' find_valid_trim_point rule).
        while start > 0 and not (forked[start]["role"] == "user"
                                 and find_trim_point(forked[start:start + 2], 0) == 0):
            start -= 1
        forked = forked[start:]
    return forked


def render_context(messages: list[Message], last_n: int | None) -> str:
    """The parent's text turns as one plain-text block for ``context="no_tools"`` (one ``role: text`` per turn)."""
    if last_n is not None and last_n > 0:
        messages = messages[-last_n:]
    lines = []
    for message in messages:
        text = " ".join(block["text"] for block in message["content"] if "text" in block).strip()
        if text.startswith("<parent_context>\n"):
            # The parent is itself a subagent: drop the framing its own parent gave it.
            _, found, stripped = text.partition(_FRAMING_END)
            if found:
                text = stripped
        if text:
            lines.append(f"{message['role']}: {text}".replace("\n", "\n  "))
    return _SENTINEL.sub(r"<\\\1parent_context>", "\n".join(lines))


def _child_invocation_state(state: dict[str, Any]) -> dict[str, Any]:
    # A copy: the child's loop must not change the parent's; ray_harness's own keys belong to the parent's loop.
    child = {key: value for key, value in state.items() if not key.startswith("__ray_harness") and key != "agent"}
    child[SCOPE_KEY] = True  # extensions see the child as a sub-agent execution
    return child


class SubagentTool(HeldSpecBase):
    """The ``subagent`` tool: a fresh child per call (see the module docstring). Built by :func:`make_subagent`."""

    def __init__(self, name: str, tool_spec: ToolSpec, *, presets: dict[str, Preset], default_preset: str | None,
                 instructions: Open | Choice | Fixed, tools: Choice | Fixed | Inherit | None,
                 model: Inherit | Choice | Fixed, context: Fixed | Choice, builder: AgentBuilder | None,
                 max_depth: int) -> None:
        self._name = name
        self._spec = tool_spec
        self._presets = presets
        self._default_preset = default_preset
        self._instructions = instructions
        self._tools = tools
        self._model = model
        self._context = context
        self._builder = builder
        self.max_depth = max_depth

    @property
    def tool_type(self) -> str:
        """Always ``"agent"``."""
        return "agent"

    def resolve(self, tool_input: Mapping[str, Any]) -> AgentSpec:
        """The child's spec for one call's input; the child is named after the tool (the schema has no name).

        Raises:
            ValueError: The input names an unknown ``agent_type``.
        """
        return resolve_specs([{**tool_input, "name": self._name}], presets=self._presets,
                             default_preset=self._default_preset, instructions=self._instructions, tools=self._tools,
                             model=self._model)[0]

    def _build(self, tool_input: Mapping[str, Any], parent: Agent | None) -> Agent:
        return (self._builder or default_builder(parent))(self.resolve(tool_input))

    def _context_mode(self, tool_input: Mapping[str, Any]) -> tuple[str, int | None]:
        mode = "none"
        if isinstance(self._context, Choice):
            picked = tool_input.get("context")
            if picked is not None and any(option.name == str(picked) for option in self._context.normalized()):
                mode = str(self._context.value_for(str(picked)))
        elif self._context.value is not None:
            mode = str(self._context.value)
        last_n: int | None = None
        raw = tool_input.get("last_messages")
        if raw is not None and not isinstance(raw, bool):
            try:
                last_n = int(raw)
            except (TypeError, ValueError):
                last_n = None
            if last_n is not None and last_n < 1:
                last_n = None
        return mode, last_n

    def _prompt(self, task: str, tool_input: Mapping[str, Any], parent: Agent | None) -> Any:
        mode, last_n = self._context_mode(tool_input)
        messages = list(parent.messages) if parent is not None else []
        if mode == "all":
            forked = fork_messages(messages, last_n)
            if forked:
                framed = {"text": f"{_FORK_PREAMBLE}\n\n{task}"}
                if forked[-1]["role"] == "user":
                    return [*forked[:-1], {"role": "user", "content": [*forked[-1]["content"], framed]}]
                return [*forked, {"role": "user", "content": [framed]}]
        elif mode == "no_tools":
            block = render_context(messages, last_n)
            if block:
                return f"<parent_context>\n{block}\n</parent_context>\n\n{_CONTEXT_PREAMBLE}\n\n{task}"
        return task

    def _start(self, tool_input: Mapping[str, Any], parent: Agent | None) -> tuple[Agent, Any] | str:
        """A new child and its prompt, or the error text the model reads."""
        stored = parent.state.get(DEPTH_STATE_KEY) if parent is not None else None
        depth = self.max_depth if not isinstance(stored, int) else stored
        if depth <= 0:
            return (f"Delegation depth limit reached ({self.max_depth} levels); you cannot delegate further. "
                    "Complete this task yourself instead of calling subagent again.")
        task = tool_input.get("task")
        if not isinstance(task, str) or not task.strip():
            return "Missing required parameter 'task': describe the task to delegate."
        child = self._build(tool_input, parent)
        child.state.set(DEPTH_STATE_KEY, depth - 1)
        return child, self._prompt(task, tool_input, parent)

    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        """Build (or resume) the child, stream its events, then yield the tool result.

        Raises:
            SubAgentInterrupt: The child paused for a human; the parent pauses with its interrupts.
        """
        use_id = str(tool_use["toolUseId"])
        raw = tool_use.get("input")
        tool_input: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        parent = context.agent
        try:
            start = resume_or_start(context, use_id, self._name)  # raises again for a turn still unanswered
            if isinstance(start, dict):
                yield ToolResultEvent(start)
                return
            parked, responses = start
            if parked is not None:
                child = self._build(tool_input, parent)
                parked.load_into(child)
                prompt: Any = responses
            else:
                prepared = self._start(tool_input, parent)
                if isinstance(prepared, str):
                    yield ToolResultEvent(error_result(use_id, prepared))
                    return
                child, prompt = prepared
            result = None
            async for event in self._run(child, prompt, tool_use, context):
                if isinstance(event, ToolStreamEvent):
                    yield event
                else:
                    result = event
        except InterruptException:
            raise
        except Exception as error:
            logger.warning("tool_name=<%s>, tool_use_id=<%s> | subagent failed: %s", self._name, use_id, error)
            yield ToolResultEvent(error_result(use_id, f"Subagent error: {error}"))
            return
        yield ToolResultEvent(self._answer(use_id, child, result, context))

    @staticmethod
    async def _run(child: Agent, prompt: Any, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        """The child's events as tool stream events, then its ``AgentResult`` (or None)."""
        watcher = asyncio.create_task(forward_cancel(context.cancel_signal, child.cancel))
        result = None
        events = child.stream_async(prompt, invocation_state=_child_invocation_state(context.invocation_state))
        try:
            async for event in events:
                if event.get("type") == "result":
                    result = event["result"]
                else:
                    yield ToolStreamEvent(tool_use, event)
        finally:
            await events.aclose()
            watcher.cancel()
        yield result

    def _answer(self, use_id: str, child: Agent, result: Any, context: ToolContext) -> Any:
        if result is None:
            return error_result(use_id, "Subagent produced no result.")
        if result.stop_reason == "interrupt" and result.interrupts:
            park(context, use_id, ParkedTurn.capture(child, result.interrupts, None))  # raises
        # The parent's cancel is an abort; the child's own stop tool (a deferred cancel) is a normal end.
        if result.stop_reason == "cancelled" and context.cancel_signal.is_set():
            return error_result(use_id, "Subagent was cancelled.")
        return {"toolUseId": use_id, "status": "success", "content": [{"text": str(result)}]}


def _checked_text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string.")
    return value


def make_subagent(*, builder: AgentBuilder | None = None, presets: Mapping[str, Preset] | None = None,
                  default_preset: str | None = None, instructions: Open | Choice | Fixed | None = None,
                  tools: Choice | Fixed | Inherit | None = None, model: Inherit | Choice | Fixed | None = None,
                  context: Fixed | Choice | None = None, max_depth: int = DEFAULT_SUBAGENT_MAX_DEPTH,
                  name: str = "subagent", description: str = DEFAULT_SUBAGENT_DESCRIPTION) -> SubagentTool:
    """A ``subagent`` tool whose input schema follows the axis modes and presets.

    Args:
        builder: Turns the resolved spec into the child (default: :func:`~ray_harness.multiagent.spec.default_builder`
            of the calling agent). It must pickle for the tool to ship to a Ray host.
        presets: Roles the model picks with ``agent_type`` (default: ``{"generalist": GENERALIST}``).
        default_preset: The role when the model gives none (default: the first preset).
        instructions: ``Open()`` (default), ``Choice(...)`` or ``Fixed(...)``.
        tools: ``Inherit()`` (default: every parent tool), ``Choice(..., multiple=True)`` or ``Fixed([...])``.
        model: ``Inherit()`` (default), ``Choice(...)`` or ``Fixed(...)``.
        context: ``Fixed("none")`` (default), ``Fixed("all" | "no_tools")`` or a ``Choice`` of those.
        max_depth: Levels of delegation allowed (a positive int, default 2).
        name: The tool's name (the child is named after it).
        description: What the model reads.

    Raises:
        ValueError: ``max_depth`` is not a positive int, ``name`` or ``description`` is empty, an axis has a mode
            it does not take, or a ``Choice`` axis is empty (or not ``multiple`` for tools); the message names it.
    """
    _checked_text("name", name)
    _checked_text("description", description)
    if not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 1:
        raise ValueError("max_depth must be a positive integer (>= 1).")
    roles = dict(presets) if presets is not None else {"generalist": GENERALIST}
    if default_preset is None and roles:
        default_preset = next(iter(roles))
    check_axes(presets=roles, default_preset=default_preset, instructions=instructions, tools=tools, model=model)
    if context is not None and not isinstance(context, Fixed | Choice):
        raise ValueError(f"context must be Fixed | Choice, got {context!r}")
    if builder is not None and not callable(builder):
        raise ValueError(f"builder must be a callable taking an AgentSpec, got {builder!r}")
    instructions = Open() if instructions is None else instructions
    model = Inherit() if model is None else model
    context = Fixed("none") if context is None else context
    schema = _subagent_schema(presets=roles, default_preset=default_preset, instructions=instructions, tools=tools,
                              model=model, context=context)
    spec: ToolSpec = {"name": name, "description": description, "inputSchema": {"json": schema}}
    return SubagentTool(name, spec, presets=roles, default_preset=default_preset, instructions=instructions,
                        tools=tools, model=model, context=context, builder=builder, max_depth=max_depth)


subagent = make_subagent()
"""The default ``subagent`` tool: the generalist preset, open instructions, every parent tool, the parent's model."""
