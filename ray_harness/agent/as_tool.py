"""``Agent.as_tool()``: an agent wrapped as a tool of another agent.

The tool takes one ``input`` string. By default every call starts from the
child's conversation as it was before the call (restored afterwards), so calls
do not leak into each other; ``preserve_context=True`` keeps the history. A
child that is already busy answers with an error result instead of raising.
``delegate=True`` ends the parent's turn with the child's answer.

Interrupts. The child's interrupts surface as interrupts of the parent with ids
``v1:agent_as_tool:<toolUseId>:<child id>``; resuming the parent resumes the
child. The child's interrupted turn (its messages up to the interrupt, its agent
state, its interrupt state and, unless ``preserve_context``, the conversation to
restore once the call finishes) is *parked* in the parent's interrupt context
(``context["agent_as_tool"][toolUseId]``, a :class:`ParkedTurn` of two ``AgentSnapshot``
conversations, as JSON), which a
session manager persists with the parent. On resume the parked turn is loaded
into the child — the same instance, or a fresh one built from the same code in
another process — and the child continues it: only its interrupted tools run
again, with the responses. With ``preserve_context=False`` the child is back at
its baseline as soon as it parks, so it is free while the parent waits. The
same path runs in one process and across processes, so both give the same
histories.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import weakref
from abc import abstractmethod
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import ValidationError

from ray_harness.agent.snapshot import AgentSnapshot, conversation, replace_conversation
from ray_harness.extensions._chain import SCOPE_KEY
from ray_harness.hooks.events import AfterInvocationEvent, AfterToolsEvent
from ray_harness.hooks.registry import HookOrder
from ray_harness.interrupts import Interrupt, InterruptException, InterruptState
from ray_harness.middleware.types import ToolResultEvent
from ray_harness.tools.base import (
    AgentTool,
    RawReturn,
    ToolContext,
    ToolStreamEvent,
    error_result,
    observe_raw,
    until_set,
)
from ray_harness.types.content import ToolResultContent
from ray_harness.types.exceptions import ConcurrencyException, RayHarnessError
from ray_harness.types.validation import describe_validation_error

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.types.content import ToolResult, ToolUse
    from ray_harness.types.tools import ToolSpec

__all__ = ("PARKED_TURNS_KEY", "AgentAsTool", "ParkedTurn", "SubAgentInterrupt", "SubAgentTool", "forward_cancel")

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_DELEGATED = "__ray_harness_delegated__"
_PARKING = "__ray_harness_parking__"
PARKED_TURNS_KEY = "agent_as_tool"
"""Key of the parent's interrupt context that holds parked child turns, by toolUseId."""
DELEGATION_SUFFIX = (" Calling this tool will return its response directly to the user as the final answer."
                     " It should be the only tool called in the turn.")
_PARKED_VERSION = 2  # 2: the halves are AgentSnapshot conversations


class SubAgentInterrupt(InterruptException):
    """The child paused for a human; carries all its interrupts, re-keyed for the parent."""

    def __init__(self, interrupts: list[Interrupt]) -> None:
        super().__init__(interrupts[0])
        self.interrupts = interrupts

    def __reduce__(self) -> tuple[Any, ...]:
        return (SubAgentInterrupt, (self.interrupts,))


@dataclass
class ParkedTurn:
    """A child's interrupted turn, kept in the parent's interrupt context until the parent resumes.

    Both halves are :class:`~ray_harness.agent.AgentSnapshot` conversations (messages, agent state,
    interrupt state). ``to_dict()`` is JSON (bytes in messages aside, which the session store encodes);
    ``from_dict`` validates and names the bad field.
    """

    interrupt_ids: list[str]
    """The child's own ids of the interrupts it paused on (the parent's ids add the call prefix)."""
    snapshot: AgentSnapshot
    """The child's conversation at the interrupt."""
    baseline: AgentSnapshot | None = None
    """The conversation to restore once the call finishes; None with ``preserve_context``."""

    @classmethod
    def capture(cls, agent: Agent, interrupts: list[Interrupt], baseline: AgentSnapshot | None) -> ParkedTurn:
        """Park ``agent``'s turn at ``interrupts``: its conversation now, and the one to restore afterwards."""
        return cls(interrupt_ids=[item.id for item in interrupts], snapshot=conversation(agent.snapshot()),
                   baseline=baseline)

    def load_into(self, agent: Agent) -> None:
        """Put the interrupted turn back into ``agent`` (messages, state, interrupt state)."""
        agent.restore(replace_conversation(agent.snapshot(), self.snapshot))

    def interrupts(self, prefix: str) -> list[Interrupt]:
        """The child's pending interrupts, re-keyed for the parent."""
        known = InterruptState.from_dict(self.snapshot.interrupt_state).interrupts
        return [Interrupt(id=prefix + key, name=known[key].name, reason=known[key].reason)
                for key in self.interrupt_ids if key in known]

    def responses(self, parent_state: InterruptState, prefix: str) -> list[dict[str, Any]]:
        """The parent's answers to this turn's interrupts as ``interruptResponse`` blocks with the child's ids."""
        blocks = []
        for key in self.interrupt_ids:
            item = parent_state.interrupts.get(prefix + key)
            if item is not None and item.response is not None:
                blocks.append({"interruptResponse": {"interruptId": key, "response": item.response}})
        return blocks

    def to_dict(self) -> dict[str, Any]:
        """The parked turn as a versioned JSON dict (see the class docstring)."""
        return {"version": _PARKED_VERSION, "interrupt_ids": list(self.interrupt_ids),
                "snapshot": self.snapshot.model_dump(),
                "baseline": None if self.baseline is None else self.baseline.model_dump()}

    @classmethod
    def from_dict(cls, data: Any) -> ParkedTurn:
        """Rebuild a parked turn written by :meth:`to_dict`.

        Raises:
            RayHarnessError: ``data`` is not a parked turn of this version; the message names the bad field.
        """
        if not isinstance(data, dict):
            raise RayHarnessError(f"parked agent-as-tool turn must be a dict, got {type(data).__name__}")
        if data.get("version") != _PARKED_VERSION:
            raise RayHarnessError(f"parked agent-as-tool turn has version {data.get('version')!r}; "
                                  f"this ray_harness reads version {_PARKED_VERSION}")
        if not isinstance(data.get("interrupt_ids"), list):
            raise RayHarnessError("parked agent-as-tool turn field 'interrupt_ids' must be a list")
        halves: dict[str, AgentSnapshot | None] = {}
        for name in ("snapshot", "baseline"):
            raw = data.get(name)
            if raw is None and name == "baseline":
                halves[name] = None
                continue
            try:
                halves[name] = AgentSnapshot.model_validate(raw)
            except ValidationError as error:
                raise RayHarnessError(f"parked agent-as-tool turn field {name!r} is invalid: "
                                      f"{describe_validation_error(error, name)}") from None
        snapshot = halves["snapshot"]
        assert snapshot is not None
        return cls(interrupt_ids=[str(key) for key in data["interrupt_ids"]], snapshot=snapshot,
                   baseline=halves["baseline"])


_PROCESS_FIELDS = ("_parents", "_busy")


class SubAgentTool(AgentTool):
    """What an agent used as a tool shares, in this process or in its own actor: name, spec, delegation, results."""

    def __init__(self, tool_name: str, description: str, *, preserve_context: bool, delegate: bool) -> None:
        if not _NAME.fullmatch(tool_name):
            raise ValueError(f"tool name {tool_name!r} must match {_NAME.pattern}; pass name= to as_tool()")
        self._name = tool_name
        self._preserve_context = preserve_context
        self._delegate = delegate
        self._description = description + (DELEGATION_SUFFIX if delegate else "")
        self._init_process_fields()

    def _init_process_fields(self) -> None:
        # What belongs to this process only; a copy in another process (an agent node shipped to a Ray host)
        # starts these afresh.
        self._parents: weakref.WeakSet[Any] = weakref.WeakSet()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in _PROCESS_FIELDS:
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_process_fields()

    @property
    def tool_name(self) -> str:
        """The name the model calls the tool by."""
        return self._name

    @property
    def tool_type(self) -> str:
        """Always ``"agent"``."""
        return "agent"

    @property
    def tool_spec(self) -> ToolSpec:
        """The tool's spec: one string ``input`` parameter and the agent's description."""
        return sub_agent_spec(self._name, self._description)

    @property
    @abstractmethod
    def agent_name(self) -> str:
        """The name of the agent the tool runs."""

    def get_display_properties(self) -> dict[str, str]:
        """``Name``, ``Type`` and the ``Agent`` the tool runs, as in Strands."""
        return {**super().get_display_properties(), "Agent": self.agent_name}

    def _tool_result(self, use_id: str, result: Any, context: ToolContext) -> ToolResult:
        return sub_agent_result(self._name, use_id, result, context, self._delegate, self._parents)


class AgentAsTool(SubAgentTool):
    """A tool that runs an agent with the given ``input`` and returns its answer."""

    exposes_raw_call = True  # TOOL_RAW extensions see the child's AgentResult

    def __init__(self, agent: Agent, *, name: str | None = None, description: str | None = None,
                 preserve_context: bool = False, delegate: bool = False) -> None:
        tool_name = name or agent.name
        text = description or agent.description or f"Use the {tool_name} agent as a tool by providing a natural " \
                                                    "language input"
        super().__init__(tool_name, text, preserve_context=preserve_context, delegate=delegate)
        self._agent = agent

    def _init_process_fields(self) -> None:
        super()._init_process_fields()
        self._busy = threading.Lock()

    @property
    def agent(self) -> Agent:
        """The agent the tool runs."""
        return self._agent

    @property
    def agent_name(self) -> str:
        """The name of the agent the tool runs."""
        return self._agent.name

    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        """Run the agent on the tool call's ``input``, streaming its events, then yield the tool result.

        A call while the agent is already busy yields an error result; a call that resumes a parked turn
        (after a human answered the child's interrupts) loads that turn first.
        """
        use_id = str(tool_use["toolUseId"])
        if not self._busy.acquire(blocking=False):
            yield ToolResultEvent(error_result(use_id, f"Agent '{self._name}' is already processing a request"))
            return
        try:
            start = resume_or_start(context, use_id, self._name)
            if isinstance(start, dict):
                yield ToolResultEvent(start)
                return
            parked, prompt = start
            baseline: AgentSnapshot | None
            if parked is not None:
                parked.load_into(self._agent)
                baseline = parked.baseline
            else:
                baseline = None if self._preserve_context else snapshot_context(self._agent)
            run = self._run_child(prompt, tool_use, context, baseline)
            try:
                async for event in run:
                    yield event
            finally:
                await run.aclose()  # the parent closed mid-call: the child's run ends before it is free again
        finally:
            self._busy.release()

    @staticmethod
    async def _child_run(child: Agent, prompt: Any, tool_use: ToolUse) -> AsyncGenerator[Any, None]:
        """The raw call: the child's events, then its ``AgentResult`` (run as a sub-agent execution)."""
        result = None
        events = child.stream_async(prompt, invocation_state={SCOPE_KEY: True})
        try:
            async for event in events:
                if event.get("type") == "result":
                    result = event["result"]
                else:
                    yield ToolStreamEvent(tool_use, event)
        finally:
            await events.aclose()
        yield RawReturn(result)

    async def _run_child(self, prompt: Any, tool_use: ToolUse, context: ToolContext,
                         baseline: AgentSnapshot | None) -> AsyncGenerator[Any, None]:
        use_id = str(tool_use["toolUseId"])
        child = self._agent
        watcher = asyncio.create_task(forward_cancel(context.cancel_signal, child.cancel))
        result = None
        raw = observe_raw(context, lambda: self._child_run(child, prompt, tool_use))
        try:
            async for event in raw:
                if isinstance(event, RawReturn):
                    result = event.value
                else:
                    yield event
        except Exception as error:
            # A child busy with another caller's invocation (ConcurrencyException) is not ours to reset.
            if baseline is not None and not isinstance(error, ConcurrencyException):
                restore_context(child, baseline)
            yield ToolResultEvent(error_result(use_id, f"Agent error: {error}"))
            return
        finally:
            await raw.aclose()
            watcher.cancel()
        if result is not None and result.stop_reason == "interrupt" and result.interrupts:
            parked = ParkedTurn.capture(child, result.interrupts, baseline)
            if baseline is not None:
                restore_context(child, baseline)  # the parent holds the turn: the child is free meanwhile
            park(context, use_id, parked)  # raises
        if baseline is not None:
            restore_context(child, baseline)
        yield ToolResultEvent(self._tool_result(use_id, result, context))


def call_prefix(use_id: str) -> str:
    return f"v1:agent_as_tool:{use_id}:"


def parked_turn(parent: Any, use_id: str) -> ParkedTurn | None:
    """The child turn parked for call ``use_id`` in the parent's interrupt context, if the parent is resuming."""
    state = getattr(parent, "interrupt_state", None)
    if state is None or not state.activated:
        return None
    raw = (state.context.get(PARKED_TURNS_KEY) or {}).get(use_id)
    return None if raw is None else ParkedTurn.from_dict(raw)


def resume_or_start(context: ToolContext, use_id: str, name: str) -> tuple[ParkedTurn | None, Any] | ToolResult:
    """How a call starts: ``(parked turn, responses)`` to resume, ``(None, input)`` for a new run, or an error result.

    A parked turn with no answer yet is parked again and its interrupts raised again, without running the child.
    """
    parent = context.agent
    prefix = call_prefix(use_id)
    parked = parked_turn(parent, use_id)
    if parked is not None:
        responses = parked.responses(parent.interrupt_state, prefix)
        if responses:
            return parked, responses
        park(context, use_id, parked)
    elif _responses_for(parent, prefix) and not parent.interrupt_state.context.get(PARKED_TURNS_KEY):
        return error_result(use_id, f"Agent '{name}' did NOT run: the parent's interrupt context holds no "
                                    "interrupted turn for this call, so the response was not applied.")
    raw = context.tool_use.get("input")
    return None, (raw.get("input", "") if isinstance(raw, dict) else str(raw or ""))


def park(context: ToolContext, use_id: str, parked: ParkedTurn) -> NoReturn:
    """Raise the child's interrupts in the parent; the turn goes into the parent's interrupt context.

    The parent's tool phase replaces its interrupt context when it suspends the batch, so the turn waits in
    the invocation state until the parent's ``AfterInvocationEvent`` (before any session manager writes).
    """
    parent = context.agent
    context.invocation_state.setdefault(_PARKING, {})[use_id] = parked.to_dict()
    if parent is not None and _store_parked_turns not in _after_invocation_callbacks(parent):
        parent.hooks.add_callback(AfterInvocationEvent, _store_parked_turns, HookOrder.SDK_FIRST)
    raise SubAgentInterrupt(parked.interrupts(call_prefix(use_id)))


def _after_invocation_callbacks(parent: Any) -> list[Any]:
    return list(parent.hooks.get_callbacks_for(AfterInvocationEvent(agent=parent)))


def _store_parked_turns(event: AfterInvocationEvent) -> None:
    parked = event.invocation_state.pop(_PARKING, None)
    state = event.agent.interrupt_state
    if parked and state.activated:
        state.context.setdefault(PARKED_TURNS_KEY, {}).update(parked)


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
        blocks = delegated_blocks(result)
        context.invocation_state.setdefault(_DELEGATED, {})[use_id] = blocks
        parent = context.agent
        if parent is not None and parent not in parents:
            parents.add(parent)
            parent.hooks.add_callback(AfterToolsEvent, _end_turn_with_delegate, HookOrder.SDK_LAST)
        return {"toolUseId": use_id, "status": "success", "content": [ToolResultContent(**block) for block in blocks]}
    return {"toolUseId": use_id, "status": "success", "content": [{"text": str(result)}]}


def delegated_blocks(result: Any) -> list[ToolResultContent]:
    """A delegated answer as Strands passes it on.

    The child's text and JSON blocks as they are, a citations block as its cited texts; ``str(result)`` without
    the final newline when there are none.
    """
    blocks: list[ToolResultContent] = []
    for block in result.message.get("content", []):
        if "text" in block:
            blocks.append({"text": block["text"]})
        elif "json" in block:
            blocks.append({"json": block["json"]})
        elif "citationsContent" in block:
            cited = [inner["text"] for inner in block["citationsContent"].get("content", []) if "text" in inner]
            if cited:
                blocks.append({"text": "\n".join(cited)})
    return blocks or [{"text": str(result).rstrip("\n")}]


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
    state = getattr(parent, "interrupt_state", None)
    if state is None or not state.activated:
        return []
    return [{"interruptResponse": {"interruptId": key[len(prefix):], "response": item.response}}
            for key, item in state.interrupts.items() if key.startswith(prefix) and item.response is not None]


def snapshot_context(agent: Agent) -> AgentSnapshot:
    """The conversation an agent-as-tool call returns the child to once it finishes."""
    return conversation(agent.snapshot())


def restore_context(agent: Agent, saved: AgentSnapshot) -> None:
    """Back to ``saved``'s messages and state, with no interrupt pending."""
    cleared = saved.model_copy(update={"interrupt_state": InterruptState().to_dict()})
    agent.restore(replace_conversation(agent.snapshot(), cleared))


async def forward_cancel(signal: threading.Event, cancel: Callable[[], Any]) -> None:
    """Cancelling the parent cancels the child: ``cancel()`` (awaited when it returns an awaitable)."""
    await until_set(signal)
    outcome = cancel()
    if inspect.isawaitable(outcome):
        await outcome
