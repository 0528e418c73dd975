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
    from ray_harness.types.content import Message, ToolResult, ToolUse

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
    agent: Agent


@dataclass
class BeforeInvocationEvent(HookEvent):
    agent: Agent
    invocation_state: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] | None = None
    cancel: bool | str = False
    _writable: ClassVar[frozenset[str]] = frozenset({"messages", "cancel"})


@dataclass
class AfterInvocationEvent(HookEvent):
    agent: Agent
    invocation_state: dict[str, Any] = field(default_factory=dict)
    result: AgentResult | None = None
    resume: Any = None
    _writable: ClassVar[frozenset[str]] = frozenset({"resume"})

    @property
    def should_reverse_callbacks(self) -> bool:
        return True


@dataclass
class MessageAddedEvent(HookEvent):
    agent: Agent
    message: Message
    invocation_state: dict[str, Any] = field(default_factory=dict)


@dataclass
class BeforeModelCallEvent(HookEvent):
    agent: Agent
    invocation_state: dict[str, Any] = field(default_factory=dict)
    cancel: bool | str = False
    _writable: ClassVar[frozenset[str]] = frozenset({"cancel"})


@dataclass
class ModelStopResponse:
    message: Message
    stop_reason: str


@dataclass
class AfterModelCallEvent(HookEvent):
    agent: Agent
    invocation_state: dict[str, Any] = field(default_factory=dict)
    stop_response: ModelStopResponse | None = None
    exception: Exception | None = None
    retry: bool = False
    _writable: ClassVar[frozenset[str]] = frozenset({"retry"})

    @property
    def should_reverse_callbacks(self) -> bool:
        return True


@dataclass
class BeforeToolsEvent(HookEvent):
    agent: Agent
    message: Message
    invocation_state: dict[str, Any] = field(default_factory=dict)
    cancel: bool | str = False
    _writable: ClassVar[frozenset[str]] = frozenset({"cancel"})

    def interrupt(self, name: str, reason: Any = None) -> Any:
        key = f"v1:before_tools:{uuid.uuid5(uuid.NAMESPACE_OID, name)}"
        return raise_or_respond(self.agent.interrupt_state, key, name, reason)


@dataclass
class AfterToolsEvent(HookEvent):
    agent: Agent
    message: Message
    invocation_state: dict[str, Any] = field(default_factory=dict)
    end_turn: bool = False
    _writable: ClassVar[frozenset[str]] = frozenset({"end_turn"})

    @property
    def should_reverse_callbacks(self) -> bool:
        return True


@dataclass
class BeforeToolCallEvent(HookEvent):
    agent: Agent
    selected_tool: AgentTool | None
    tool_use: ToolUse
    invocation_state: dict[str, Any] = field(default_factory=dict)
    cancel_tool: bool | str = False
    _writable: ClassVar[frozenset[str]] = frozenset({"cancel_tool", "selected_tool", "tool_use"})

    def interrupt(self, name: str, reason: Any = None) -> Any:
        key = interrupt_id("before_tool_call", str(self.tool_use["toolUseId"]), name)
        return raise_or_respond(self.agent.interrupt_state, key, name, reason)


@dataclass
class AfterToolCallEvent(HookEvent):
    agent: Agent
    selected_tool: AgentTool | None
    tool_use: ToolUse
    result: ToolResult
    invocation_state: dict[str, Any] = field(default_factory=dict)
    exception: BaseException | None = None
    cancel_message: str | None = None
    retry: bool = False
    _writable: ClassVar[frozenset[str]] = frozenset({"result", "retry"})

    @property
    def should_reverse_callbacks(self) -> bool:
        return True


# ---- multi-agent -----------------------------------------------------------------------------


@dataclass
class MultiAgentInitializedEvent(BaseHookEvent):
    source: Any
    invocation_state: dict[str, Any] = field(default_factory=dict)


@dataclass
class BeforeMultiAgentInvocationEvent(BaseHookEvent):
    source: Any
    invocation_state: dict[str, Any] = field(default_factory=dict)


@dataclass
class AfterMultiAgentInvocationEvent(BaseHookEvent):
    source: Any
    invocation_state: dict[str, Any] = field(default_factory=dict)

    @property
    def should_reverse_callbacks(self) -> bool:
        return True


@dataclass
class BeforeNodeCallEvent(BaseHookEvent):
    source: Any
    node_id: str
    invocation_state: dict[str, Any] = field(default_factory=dict)
    cancel_node: bool | str = False
    _writable: ClassVar[frozenset[str]] = frozenset({"cancel_node"})

    def interrupt(self, name: str, reason: Any = None) -> Any:
        key = interrupt_id("before_node_call", self.node_id, name)
        return raise_or_respond(self.source.interrupt_state, key, name, reason)


@dataclass
class AfterNodeCallEvent(BaseHookEvent):
    source: Any
    node_id: str
    invocation_state: dict[str, Any] = field(default_factory=dict)

    @property
    def should_reverse_callbacks(self) -> bool:
        return True
