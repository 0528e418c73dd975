"""Lifecycle events of an agent and of multi-agent orchestrators.

Every event is read-only except the fields in its ``_writable`` set; writing
anything else raises ``AttributeError`` ("not writable"). ``After*`` events
run their callbacks in reverse registration order within an order value.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ray_harness.hooks.registry import BaseHookEvent, HookEvent
from ray_harness.interrupts import Interrupt, InterruptException, InterruptState, interrupt_id

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.agent.result import AgentResult
    from ray_harness.tools.registry import AgentTool
    from ray_harness.types.content import ContentBlock, Message, ToolResult, ToolUse

__all__ = (
    "AfterInvocationEvent",
    "AfterModelCallEvent",
    "AfterMultiAgentInvocationEvent",
    "AfterNodeCallEvent",
    "AfterToolCallEvent",
    "AfterToolsEvent",
    "AgentInitializedEvent",
    "BeforeInvocationEvent",
    "BeforeModelCallEvent",
    "BeforeMultiAgentInvocationEvent",
    "BeforeNodeCallEvent",
    "BeforeToolCallEvent",
    "BeforeToolsEvent",
    "MessageAddedEvent",
    "ModelStopResponse",
    "MultiAgentInitializedEvent",
)


def raise_or_respond(state: InterruptState, key: str, name: str, reason: Any) -> Any:
    """The two-phase interrupt protocol: raise the first time, return the response after resume."""
    known = state.interrupts.setdefault(key, Interrupt(id=key, name=name, reason=reason))
    if known.response is not None:
        return known.response
    raise InterruptException(known)


@dataclass
class AgentInitializedEvent(HookEvent):
    """Sent once, when an ``Agent`` has been constructed. Read-only.

    Attributes:
        agent: The new agent.
    """

    agent: Agent


@dataclass
class BeforeInvocationEvent(HookEvent):
    """Sent at the start of each invocation, before the prompt is added to the history.

    Attributes:
        agent: The agent being invoked.
        invocation_state: The per-call ``invocation_state`` dict.
        messages: The new messages of this call (writable: replace them to rewrite the prompt).
        cancel: Writable. ``True`` or a text vetoes the invocation; the result's text is that text, or
            "invocation denied by hook".
    """

    agent: Agent
    invocation_state: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] | None = None
    cancel: bool | str = False
    _writable: ClassVar[frozenset[str]] = frozenset({"messages", "cancel"})


@dataclass
class AfterInvocationEvent(HookEvent):
    """Sent when an invocation ends, whatever its stop reason.

    Attributes:
        agent: The agent.
        invocation_state: The per-call ``invocation_state`` dict.
        result: The ``AgentResult`` (``None`` if the invocation raised).
        resume: Writable. A prompt to run next, as a follow-up invocation.
    """

    agent: Agent
    invocation_state: dict[str, Any] = field(default_factory=dict)
    result: AgentResult | None = None
    resume: Any = None
    _writable: ClassVar[frozenset[str]] = frozenset({"resume"})

    @property
    def should_reverse_callbacks(self) -> bool:
        """True: ``After*`` callbacks run in reverse registration order."""
        return True


@dataclass
class MessageAddedEvent(HookEvent):
    """Sent after a message is appended to the agent's history. Read-only.

    Attributes:
        agent: The agent.
        message: The message that was added.
        invocation_state: The per-call ``invocation_state`` dict.
    """

    agent: Agent
    message: Message
    invocation_state: dict[str, Any] = field(default_factory=dict)


@dataclass
class BeforeModelCallEvent(HookEvent):
    """Sent before each model call.

    Attributes:
        agent: The agent.
        invocation_state: The per-call ``invocation_state`` dict.
        cancel: Writable. ``True`` or a text vetoes the call ("model call denied by hook").
        projected_input_tokens: About how many input tokens the call sends: the latest call's prompt and answer
            as the provider counted them plus the model's ``count_tokens`` of what was added since (an estimate,
            4 characters a token, unless the model counts natively); ``count_tokens`` of the whole request before
            the first call; ``None`` when the count failed. As Strands' field.
    """

    agent: Agent
    invocation_state: dict[str, Any] = field(default_factory=dict)
    cancel: bool | str = False
    projected_input_tokens: int | None = None
    _writable: ClassVar[frozenset[str]] = frozenset({"cancel"})


@dataclass
class ModelStopResponse:
    """What a model call produced.

    Attributes:
        message: The assistant message.
        stop_reason: The model's stop reason (``end_turn``, ``tool_use``, ...).
    """

    message: Message
    stop_reason: str


@dataclass
class AfterModelCallEvent(HookEvent):
    """Sent after each model call, successful or not.

    Attributes:
        agent: The agent.
        invocation_state: The per-call ``invocation_state`` dict.
        stop_response: The message and stop reason, or ``None`` when the call raised.
        exception: The error the call raised, if any.
        retry: Writable. ``True`` discards this response and calls the model again.
    """

    agent: Agent
    invocation_state: dict[str, Any] = field(default_factory=dict)
    stop_response: ModelStopResponse | None = None
    exception: Exception | None = None
    retry: bool = False
    _writable: ClassVar[frozenset[str]] = frozenset({"retry"})
    # Strands nests the class here (``AfterModelCallEvent.ModelStopResponse(...)``); both spellings work.
    ModelStopResponse: ClassVar[type[ModelStopResponse]] = ModelStopResponse

    @property
    def should_reverse_callbacks(self) -> bool:
        """True: ``After*`` callbacks run in reverse registration order."""
        return True


@dataclass
class BeforeToolsEvent(HookEvent):
    """Sent before a batch of tool calls (the tool uses of one assistant message) runs.

    Attributes:
        agent: The agent.
        message: The assistant message holding the tool uses.
        invocation_state: The per-call ``invocation_state`` dict.
        cancel: Writable. ``True`` or a text cancels the whole batch ("Tool cancelled by hook").
    """

    agent: Agent
    message: Message
    invocation_state: dict[str, Any] = field(default_factory=dict)
    cancel: bool | str = False
    _writable: ClassVar[frozenset[str]] = frozenset({"cancel"})

    def interrupt(self, name: str, reason: Any = None) -> Any:
        """Pause the run for a human decision about this batch.

        Args:
            name: The interrupt's name (part of its deterministic id).
            reason: What the human is asked; any JSON value.

        Returns:
            The response, once the run is resumed with one.

        Raises:
            InterruptException: The first time (the loop turns it into ``stop_reason="interrupt"``).
        """
        key = f"v1:before_tools:{uuid.uuid5(uuid.NAMESPACE_OID, name)}"
        return raise_or_respond(self.agent.interrupt_state, key, name, reason)


@dataclass
class AfterToolsEvent(HookEvent):
    """Sent after a batch of tool calls finished.

    Attributes:
        agent: The agent.
        message: The user message holding the tool results.
        invocation_state: The per-call ``invocation_state`` dict.
        end_turn: Writable. Ends the invocation without another model call (stop reason ``end_turn``): a text
            becomes the final assistant text, a list of content blocks its content, ``True`` gives
            "Turn ended early by hook after tool execution".
    """

    agent: Agent
    message: Message
    invocation_state: dict[str, Any] = field(default_factory=dict)
    end_turn: bool | str | list[ContentBlock] = False
    _writable: ClassVar[frozenset[str]] = frozenset({"end_turn"})

    @property
    def should_reverse_callbacks(self) -> bool:
        """True: ``After*`` callbacks run in reverse registration order."""
        return True


@dataclass
class BeforeToolCallEvent(HookEvent):
    """Sent before each tool call.

    Attributes:
        agent: The agent.
        selected_tool: The tool that will run (writable: swap in another), ``None`` for an unknown tool.
        tool_use: The ``toolUse`` block (writable: rewrite the input).
        invocation_state: The per-call ``invocation_state`` dict.
        cancel_tool: Writable. ``True`` or a text cancels this call; the text (default "tool cancelled by user")
            becomes its error result.
    """

    agent: Agent
    selected_tool: AgentTool | None
    tool_use: ToolUse
    invocation_state: dict[str, Any] = field(default_factory=dict)
    cancel_tool: bool | str = False
    _writable: ClassVar[frozenset[str]] = frozenset({"cancel_tool", "selected_tool", "tool_use"})

    def interrupt(self, name: str, reason: Any = None) -> Any:
        """Pause the run for a human decision about this tool call.

        Args:
            name: The interrupt's name; the id is ``v1:before_tool_call:<toolUseId>:<uuid5(name)>``.
            reason: What the human is asked; any JSON value.

        Returns:
            The response, once the run is resumed with one.

        Raises:
            InterruptException: The first time (the loop turns it into ``stop_reason="interrupt"``).
        """
        key = interrupt_id("before_tool_call", str(self.tool_use["toolUseId"]), name)
        return raise_or_respond(self.agent.interrupt_state, key, name, reason)


@dataclass
class AfterToolCallEvent(HookEvent):
    """Sent after each tool call.

    Attributes:
        agent: The agent.
        selected_tool: The tool that ran, ``None`` for an unknown tool.
        tool_use: The ``toolUse`` block.
        result: Writable. The ``toolResult`` the model will see.
        invocation_state: The per-call ``invocation_state`` dict.
        exception: What the tool raised, if it raised.
        cancel_message: The cancel text, when the call was cancelled.
        retry: Writable. ``True`` runs the tool again.
        duration: Seconds this call of the tool took (Strands' field).
    """

    agent: Agent
    selected_tool: AgentTool | None
    tool_use: ToolUse
    result: ToolResult
    invocation_state: dict[str, Any] = field(default_factory=dict)
    exception: BaseException | None = None
    cancel_message: str | None = None
    retry: bool = False
    duration: float = 0.0
    _writable: ClassVar[frozenset[str]] = frozenset({"result", "retry"})

    @property
    def should_reverse_callbacks(self) -> bool:
        """True: ``After*`` callbacks run in reverse registration order."""
        return True


# ---- multi-agent -----------------------------------------------------------------------------


@dataclass
class MultiAgentInitializedEvent(BaseHookEvent):
    """Sent once when a Graph or Swarm has been constructed (in the constructing process).

    Attributes:
        source: The Graph or Swarm.
        invocation_state: Always empty here.
    """

    source: Any
    invocation_state: dict[str, Any] = field(default_factory=dict)


@dataclass
class BeforeMultiAgentInvocationEvent(BaseHookEvent):
    """Sent at the start of a Graph or Swarm invocation.

    Attributes:
        source: The Graph or Swarm.
        invocation_state: The per-call ``invocation_state`` dict.
    """

    source: Any
    invocation_state: dict[str, Any] = field(default_factory=dict)


@dataclass
class AfterMultiAgentInvocationEvent(BaseHookEvent):
    """Sent when a Graph or Swarm invocation ends.

    Attributes:
        source: The Graph or Swarm.
        invocation_state: The per-call ``invocation_state`` dict.
    """

    source: Any
    invocation_state: dict[str, Any] = field(default_factory=dict)

    @property
    def should_reverse_callbacks(self) -> bool:
        """True: ``After*`` callbacks run in reverse registration order."""
        return True


@dataclass
class BeforeNodeCallEvent(BaseHookEvent):
    """Sent before a Graph node or Swarm member runs.

    Attributes:
        source: The Graph or Swarm.
        node_id: The node about to run.
        invocation_state: The per-call ``invocation_state`` dict.
        cancel_node: Writable. ``True`` or a text skips the node (under the ``"continue"`` failure policy the
            graph goes on without it and its successors).
    """

    source: Any
    node_id: str
    invocation_state: dict[str, Any] = field(default_factory=dict)
    cancel_node: bool | str = False
    _writable: ClassVar[frozenset[str]] = frozenset({"cancel_node"})

    def interrupt(self, name: str, reason: Any = None) -> Any:
        """Pause the graph or swarm for a human decision before this node runs.

        Args:
            name: The interrupt's name; the id is ``v1:before_node_call:<uuid5(node_id)>:<uuid5(name)>``.
            reason: What the human is asked; any JSON value.

        Returns:
            The response, once the run is resumed with one.

        Raises:
            InterruptException: The first time (the run ends with ``Status.INTERRUPTED``).
        """
        # Strands' form: the node id hashed too (a node id may hold ':'), so ids match across the two SDKs.
        key = interrupt_id("before_node_call", str(uuid.uuid5(uuid.NAMESPACE_OID, self.node_id)), name)
        return raise_or_respond(self.source.interrupt_state, key, name, reason)


@dataclass
class AfterNodeCallEvent(BaseHookEvent):
    """Sent after a Graph node or Swarm member ran.

    Attributes:
        source: The Graph or Swarm.
        node_id: The node that ran.
        invocation_state: The per-call ``invocation_state`` dict.
    """

    source: Any
    node_id: str
    invocation_state: dict[str, Any] = field(default_factory=dict)

    @property
    def should_reverse_callbacks(self) -> bool:
        """True: ``After*`` callbacks run in reverse registration order."""
        return True
