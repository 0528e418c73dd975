"""``SessionManager``: the hook provider that persists agents, and its repository-backed implementation.

What is stored per agent: every message (append-only, one record per message, numbered from 0 in
the order the agent first saw them), the agent's state, its conversation manager's state, its
interrupt state, and the results of tools that finished while their batch was still running.

When it is written:

* ``MessageAddedEvent`` — the new message (and the previous one again if it was edited in place,
  e.g. by guidance text), then the agent record if it changed;
* ``AfterToolCallEvent`` — the finished tool's result, so a crash mid-batch loses only the tools
  that were still running;
* ``AfterInvocationEvent`` — a full reconcile: edited messages are rewritten, messages a failed
  invocation rolled back are deleted, and the agent record (state, conversation manager, interrupt
  state — also after a tool batch was interrupted) is written if it changed;
* ``on_history_truncated`` — called by the loop when a failed invocation rolls history back.

Restore: constructing an Agent with the same ``session_id`` and ``agent_id`` reloads all of it. A
conversation manager that removed messages keeps them in the store; the live history is
``stored[:pinned] + synthetic + stored[pinned + removed:]``, where ``removed`` is
``removed_message_count`` and ``pinned``/``synthetic`` come from the manager's
``pinned_message_count`` / ``synthetic_message_count`` (a summary) when it has them. A history that
ends on a ``toolUse`` without results (the process died while the tool ran) gets results — the
stored result of each tool that finished, an error for the others — unless the agent is
interrupted there (then the resume runs only the tools that did not finish, also when the process died
while a resume ran them), or has ``checkpointing=True`` and none of those tools finished (an
``after_model`` checkpoint, or a crash before any result): then the resume runs the tools as usual.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from typing_extensions import override

from ray_harness.agent.state import AgentState
from ray_harness.hooks.events import AfterInvocationEvent, AfterToolCallEvent, AgentInitializedEvent, MessageAddedEvent
from ray_harness.hooks.registry import HookOrder, HookRegistry
from ray_harness.interrupts import InterruptState
from ray_harness.session.records import (
    AgentRecord,
    MessageRecord,
    MultiAgentRecord,
    SessionRecord,
    encode_json,
    now,
    validate_id,
)
from ray_harness.session.repository import SessionRepository
from ray_harness.types.content import Message
from ray_harness.types.exceptions import RayHarnessError, SessionException

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("CRASHED_TOOL_TEXT", "RepositorySessionManager", "SessionManager")

CRASHED_TOOL_TEXT = "Tool execution did not finish: the agent process stopped while the tool was running"


class SessionManager(ABC):
    """Persists agents at the hook points; pass it as ``Agent(session_manager=...)``."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Hook the manager into an agent.

        It restores the agent at construction and persists each message, tool result and invocation end.

        Args:
            registry: The agent's hook registry.
            **kwargs: Reserved for future use.
        """
        # Bound methods, not lambdas: an agent's hook registry must pickle (agents ship into actors).
        registry.add_callback(AgentInitializedEvent, self._on_agent_initialized, HookOrder.SDK_FIRST)
        registry.add_callback(MessageAddedEvent, self._on_message_added, HookOrder.SDK_FIRST)
        registry.add_callback(AfterToolCallEvent, self._on_tool_done, HookOrder.SDK_LAST)
        registry.add_callback(AfterInvocationEvent, self._on_after_invocation, HookOrder.SDK_LAST)

    def _on_agent_initialized(self, event: AgentInitializedEvent) -> None:
        self.initialize(event.agent)

    def _on_message_added(self, event: MessageAddedEvent) -> None:
        self.append_message(event.message, event.agent)

    def _on_tool_done(self, event: AfterToolCallEvent) -> None:
        self.record_tool_result(event.agent, event.result)

    def _on_after_invocation(self, event: AfterInvocationEvent) -> None:
        self.sync_agent(event.agent)

    @abstractmethod
    def initialize(self, agent: Agent) -> None:
        """Restore ``agent`` from the session, or record it there if it is new."""

    @abstractmethod
    def append_message(self, message: Message, agent: Agent) -> None:
        """Persist ``message``, just appended to ``agent.messages``."""

    @abstractmethod
    def record_tool_result(self, agent: Agent, result: Any) -> None:
        """Persist the result of a tool that finished while its batch may still be running."""

    @abstractmethod
    def sync_agent(self, agent: Agent) -> None:
        """Bring the stored agent up to date with the live one."""

    @abstractmethod
    def on_history_truncated(self, agent: Agent, length: int) -> None:
        """``agent.messages`` was cut back to ``length`` messages (a failed invocation rolled back)."""

    @abstractmethod
    def write_multi_agent_json(self, state: dict[str, Any], multi_agent_id: str = "default") -> None:
        """Store the state of a Graph/Swarm (JSON values only)."""

    @abstractmethod
    def read_multi_agent_json(self, multi_agent_id: str = "default") -> dict[str, Any] | None:
        """The stored Graph/Swarm state, or None."""


@dataclass
class _Tracker:
    """What this process knows is stored for one agent."""

    created_at: str
    fingerprints: list[str] = field(default_factory=list)
    agent_json: str = ""
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    synthetic_fallback: int = 0


def _fingerprint(message: Message) -> str:
    text = json.dumps(encode_json(message), sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def _tool_use_ids(message: Message) -> list[str]:
    return [block["toolUse"]["toolUseId"] for block in message["content"] if "toolUse" in block]


def _keep_finished_results(interrupts: InterruptState, pending: dict[str, dict[str, Any]]) -> None:
    """Add the stored results of tools that finished while a resumed interrupted batch ran to that batch's results.

    The process died during the resume: without them the next resume would run those tools a second time.
    """
    message = interrupts.context.get("tool_use_message")
    if not interrupts.activated or not pending or not isinstance(message, dict):
        return
    results = list(interrupts.context.get("tool_results") or [])
    known = {result.get("toolUseId") for result in results if isinstance(result, dict)}
    for use_id in _tool_use_ids(cast(Message, message)):
        done = pending.get(use_id)
        if use_id not in known and done and "content" in done:
            results.append({**done, "toolUseId": use_id})
    interrupts.context["tool_results"] = results


_REPOSITORY_METHODS = tuple(sorted(SessionRepository.__abstractmethods__))


def _check_repository(repository: Any) -> None:
    """Refuse, before any record is read or written, an object that is not a ``SessionRepository``.

    A repository written for Strands (``create_session``, ``update_agent``, ...) has another interface; without
    this check it would fail later, at the first record, with an ``AttributeError`` far from its cause.
    """
    if isinstance(repository, SessionRepository):
        return
    missing = [name for name in _REPOSITORY_METHODS if not callable(getattr(repository, name, None))]
    if not missing:
        return  # duck-typed: every method is there
    if callable(getattr(repository, "create_session", None)) or callable(getattr(repository, "update_agent", None)):
        raise TypeError(
            f"repository {type(repository).__name__} has the Strands SDK's SessionRepository interface "
            "(create_session, create_agent, update_agent, create_message, ...); ray_harness reads and writes "
            f"records through ray_harness.session.SessionRepository, whose methods it lacks: {', '.join(missing)}. "
            "Subclass it (or BlobSessionRepository for a key/value store) instead")
    raise TypeError(f"repository must implement ray_harness.session.SessionRepository; "
                    f"{type(repository).__name__} lacks {', '.join(missing)}")


class RepositorySessionManager(SessionManager):
    """A :class:`SessionManager` over any :class:`~ray_harness.session.repository.SessionRepository`.

    Args:
        session_id: The session; validated (no path separators, no ``..``).
        repository: Where records are stored.
    """

    def __init__(self, session_id: str, repository: SessionRepository) -> None:
        _check_repository(repository)
        self.session_id = validate_id(session_id, "session_id")
        self.repository = repository
        self._trackers: dict[str, _Tracker] = {}
        if repository.read_session(self.session_id) is None:
            repository.write_session(SessionRecord(session_id=self.session_id))

    # -- lifecycle ------------------------------------------------------------------------------------

    @override
    def initialize(self, agent: Agent) -> None:
        agent_id = validate_id(agent.agent_id, "agent_id")
        if agent_id in self._trackers:
            raise SessionException(f"agent_id {agent_id!r} is already used by another agent of session "
                                   f"{self.session_id!r}; agent ids must be unique in a session")
        record = self.repository.read_agent(self.session_id, agent_id)
        if record is None:
            tracker = _Tracker(created_at=now())
            self._trackers[agent_id] = tracker
            for index in range(len(agent.messages)):
                self._store_position(agent, tracker, index)
            self._write_agent_if_changed(agent, tracker)
            return
        stored = [item.message for item in self.repository.list_messages(self.session_id, agent_id)]
        tracker = self._restore(agent, record, stored)
        self._trackers[agent_id] = tracker
        self._repair_dangling_tool_use(agent, tracker)

    @override
    def append_message(self, message: Message, agent: Agent) -> None:
        tracker = self._tracker(agent)
        messages = agent.messages
        index = next((i for i in range(len(messages) - 1, -1, -1) if messages[i] is message), None)
        if index is None:
            return  # already gone again (a hook removed it); the next sync reconciles
        for position in (index - 1, index):  # the previous one may have been edited in place
            if position >= 0:
                self._store_position(agent, tracker, position)
        if any("toolResult" in block for block in message["content"]):
            tracker.pending.clear()
        self._write_agent_if_changed(agent, tracker)

    @override
    def record_tool_result(self, agent: Agent, result: Any) -> None:
        tracker = self._tracker(agent)
        if isinstance(result, dict) and isinstance(result.get("toolUseId"), str):
            tracker.pending[result["toolUseId"]] = dict(result)
            self._write_agent_if_changed(agent, tracker)

    @override
    def sync_agent(self, agent: Agent) -> None:
        tracker = self._tracker(agent)
        for index in range(len(agent.messages)):
            self._store_position(agent, tracker, index)
        self._delete_beyond(agent, tracker)
        tracker.pending.clear()  # the batch either finished (results are in history) or is in the interrupt state
        self._write_agent_if_changed(agent, tracker)

    @override
    def on_history_truncated(self, agent: Agent, length: int) -> None:
        tracker = self._tracker(agent)
        self._delete_beyond(agent, tracker)
        self._write_agent_if_changed(agent, tracker)

    # -- multi-agent ----------------------------------------------------------------------------------

    @override
    def write_multi_agent_json(self, state: dict[str, Any], multi_agent_id: str = "default") -> None:
        if not isinstance(state, dict):
            raise TypeError(f"multi-agent state must be a dict, got {type(state).__name__}")
        existing = self.repository.read_multi_agent(self.session_id, multi_agent_id)
        created = existing.created_at if existing is not None else now()
        self.repository.write_multi_agent(self.session_id, MultiAgentRecord(
            multi_agent_id=validate_id(multi_agent_id, "multi_agent_id"), state=state, created_at=created))

    @override
    def read_multi_agent_json(self, multi_agent_id: str = "default") -> dict[str, Any] | None:
        record = self.repository.read_multi_agent(self.session_id, validate_id(multi_agent_id, "multi_agent_id"))
        return None if record is None else record.state

    # -- internals ------------------------------------------------------------------------------------

    def _tracker(self, agent: Agent) -> _Tracker:
        tracker = self._trackers.get(agent.agent_id)
        if tracker is None:
            raise SessionException(f"agent {agent.agent_id!r} was not initialized with session {self.session_id!r} "
                                   "(pass the session manager to the Agent constructor)")
        return tracker

    def _layout(self, agent: Agent, tracker: _Tracker) -> tuple[int, int, int]:
        """``(pinned, synthetic, removed)`` of the live history relative to the stored one."""
        manager = agent.conversation_manager
        removed = int(getattr(manager, "removed_message_count", 0))
        synthetic = int(getattr(manager, "synthetic_message_count", tracker.synthetic_fallback))
        if removed == 0 and synthetic == 0:
            return 0, 0, 0
        return int(getattr(manager, "pinned_message_count", 0)), synthetic, removed

    def _stored_index(self, agent: Agent, tracker: _Tracker, position: int) -> int | None:
        pinned, synthetic, removed = self._layout(agent, tracker)
        if position < pinned:
            return position
        if position < pinned + synthetic:
            return None  # a summary: it lives in the conversation manager state
        return position - synthetic + removed

    def _expected_total(self, agent: Agent, tracker: _Tracker) -> int:
        pinned, synthetic, removed = self._layout(agent, tracker)
        return pinned + removed + max(0, len(agent.messages) - pinned - synthetic)

    def _store_position(self, agent: Agent, tracker: _Tracker, position: int) -> None:
        stored_index = self._stored_index(agent, tracker, position)
        if stored_index is None:
            return
        message = agent.messages[position]
        fingerprint = _fingerprint(message)
        fingerprints = tracker.fingerprints
        if stored_index < len(fingerprints) and fingerprints[stored_index] == fingerprint:
            return
        if stored_index > len(fingerprints):
            raise SessionException(
                f"session {self.session_id!r}, agent {agent.agent_id!r}: message {position} maps to stored index "
                f"{stored_index} but only {len(fingerprints)} messages are stored (the conversation manager removed "
                "messages the session never saw)")
        self.repository.write_message(self.session_id, agent.agent_id,
                                      MessageRecord(message_id=stored_index, message=message),
                                      new=stored_index == len(fingerprints))
        if stored_index < len(fingerprints):
            fingerprints[stored_index] = fingerprint
        else:
            fingerprints.append(fingerprint)

    def _delete_beyond(self, agent: Agent, tracker: _Tracker) -> None:
        total = self._expected_total(agent, tracker)
        if len(tracker.fingerprints) > total:
            self.repository.delete_messages(self.session_id, agent.agent_id, total)
            del tracker.fingerprints[total:]

    def _agent_payload(self, agent: Agent, tracker: _Tracker) -> dict[str, Any]:
        return {
            "state": agent.state.to_dict(),
            "conversation_manager_state": agent.conversation_manager.get_state(),
            "interrupt_state": agent.interrupt_state.to_dict(),
            "pending_tool_results": tracker.pending,
        }

    def _write_agent_if_changed(self, agent: Agent, tracker: _Tracker) -> None:
        payload = self._agent_payload(agent, tracker)
        try:
            text = json.dumps(encode_json(payload), sort_keys=True, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise SessionException(
                f"session {self.session_id!r}, agent {agent.agent_id!r}: state is not JSON serializable ({error}); "
                "interrupt reasons/responses and conversation manager state must be JSON values") from None
        if text == tracker.agent_json:
            return
        self.repository.write_agent(self.session_id, AgentRecord(agent_id=agent.agent_id, created_at=tracker.created_at,
                                                                 **payload))
        tracker.agent_json = text

    def _restore(self, agent: Agent, record: AgentRecord, stored: list[Message]) -> _Tracker:
        where = self.repository.agent_location(self.session_id, agent.agent_id)
        manager = agent.conversation_manager
        try:
            prefix = manager.restore_from_session(record.conversation_manager_state) \
                if record.conversation_manager_state else None
            interrupts = InterruptState.from_dict(record.interrupt_state) if record.interrupt_state else InterruptState()
            state = AgentState(record.state)
        except (ValueError, TypeError, KeyError, RayHarnessError) as error:
            raise SessionException(f"session file {where} cannot be restored: {error}") from None
        tracker = _Tracker(created_at=record.created_at, pending=dict(record.pending_tool_results),
                           synthetic_fallback=len(prefix or []))
        tracker.fingerprints = [_fingerprint(message) for message in stored]
        _keep_finished_results(interrupts, tracker.pending)
        pinned, _, removed = self._layout(agent, tracker)
        if pinned + removed > len(stored):
            raise SessionException(f"inconsistent session file {where}: the conversation manager state says {removed} messages were removed "
                                   f"after {pinned} pinned ones, but only {len(stored)} messages are stored")
        # The conversation manager took its state above (it computes the prefix); the rest lands as one snapshot.
        agent.restore(agent.snapshot().model_copy(update={
            "messages": [*stored[:pinned], *(prefix or []), *stored[pinned + removed:]],
            "state": state.to_dict(), "interrupt_state": interrupts.to_dict(), "conversation_manager_state": None}))
        tracker.agent_json = json.dumps(encode_json(self._agent_payload(agent, tracker)), sort_keys=True,
                                        ensure_ascii=False)
        return tracker

    def _repair_dangling_tool_use(self, agent: Agent, tracker: _Tracker) -> None:
        messages = agent.messages
        if agent.interrupt_state.activated or not messages or messages[-1]["role"] != "assistant":
            return
        ids = _tool_use_ids(messages[-1])
        if not ids:
            return
        if agent.checkpointing and not any(use_id in tracker.pending for use_id in ids):
            # An ``after_model`` checkpoint stops here before any tool runs: its ``checkpointResume`` runs them.
            # Results filled in now would make that resume skip the tools and call the model instead.
            return
        from ray_harness.tools.base import error_result

        results: list[Any] = []
        for use_id in ids:
            done = tracker.pending.get(use_id)
            results.append({**done, "toolUseId": use_id} if done and "content" in done
                           else error_result(use_id, CRASHED_TOOL_TEXT))
        messages.append({"role": "user", "content": [{"toolResult": result} for result in results]})
        self._store_position(agent, tracker, len(messages) - 1)
        tracker.pending.clear()
        self._write_agent_if_changed(agent, tracker)
