"""Runs one Agent/Graph/Swarm per A2A task and reports it as task events (the a2a-sdk ``AgentExecutor``).

States: the run starts ``WORKING``; an interrupt → ``INPUT_REQUIRED`` (after the target's state is in the
task store, so the answer can resume on any replica); the end → the ``result`` artifact and
``COMPLETED``; ``cancel()`` → ``CANCELED``; an exception → ``FAILED`` naming it.

While a task runs here, a watcher refreshes its lease in the store and polls for a cancel request that
reached another replica (see :mod:`ray_harness.serve._store`).

Tracing: each request that runs the target is one ``a2a_task <app>`` span, the parent of the target's spans.
When the HTTP request carries a W3C ``traceparent`` (and ``tracestate``), that span is its child, so the
caller's trace continues into the replica; otherwise the request starts a trace of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState, TaskStatus
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from ray_harness.multiagent._persistence import load_state, save_state
from ray_harness.multiagent.base import MultiAgentBase, MultiAgentResult, Status
from ray_harness.runtime._placement import placed
from ray_harness.serve._contexts import DEFAULT_MAX_CONTEXTS, Conversations, Turn
from ray_harness.serve._store import TERMINAL, TaskRecords
from ray_harness.session.manager import RepositorySessionManager
from ray_harness.telemetry.config import tracing_enabled
from ray_harness.telemetry.propagation import attached
from ray_harness.telemetry.tracing import span_scope

__all__ = ("CANCEL_WAIT_SECONDS", "RESULT_ARTIFACT", "HarnessExecutor", "interrupt_responses", "message_text",
           "pending_interrupt_ids", "refused_part")

RESULT_ARTIFACT = "result"
_STREAM_FLUSH_SECONDS = 0.05
CANCEL_WAIT_SECONDS = 30.0
_TRACE_HEADERS = ("traceparent", "tracestate")
_CANCEL_GRACE_SECONDS = 2.0
"""After ``cancel()`` the run may stop cooperatively for this long; then its task is cancelled (a tool that
never returns must not keep a task WORKING)."""


def _data_of(part: Part) -> Any:
    return MessageToDict(part.data) if part.HasField("data") else None


def _integral(value: Any) -> Any:
    """JSON from a protobuf ``Value`` with whole numbers as ints (protobuf keeps every number as a double)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def message_text(message: Message) -> str:
    """The prompt of a message: its text parts, and each data part as JSON text (as Strands' A2A server does)."""
    pieces = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text" and part.text:
            pieces.append(part.text)
        elif kind == "data":
            pieces.append("[Structured Data]\n" + json.dumps(_integral(_data_of(part)), indent=2))
    return "\n".join(pieces)


def refused_part(message: Message) -> str | None:
    """Why a part of a new message cannot reach the target (the card accepts text and JSON), else None."""
    for index, part in enumerate(message.parts):
        if part.WhichOneof("content") in ("raw", "url"):
            what = part.media_type or "no media type"
            return (f"message.parts[{index}]: a file part ({what}) is not accepted; this agent takes text and data "
                    "parts (text/plain, application/json)")
    return None


def interrupt_responses(message: Message) -> list[dict[str, Any]] | None:
    """The ``interruptResponses`` of a data part, validated; None when the message has none.

    Raises:
        ValueError: naming the bad field.
    """
    for part in message.parts:
        data = _data_of(part)
        if isinstance(data, dict) and "interruptResponses" in data:
            responses = data["interruptResponses"]
            if not isinstance(responses, list) or not responses:
                raise ValueError("interruptResponses must be a non-empty list of {interruptId, response}")
            for index, item in enumerate(responses):
                if not isinstance(item, dict) or not isinstance(item.get("interruptId"), str) \
                        or "response" not in item:
                    raise ValueError(f"interruptResponses[{index}] must be an object with a string 'interruptId' "
                                     "and a 'response'")
            return [{"interruptId": item["interruptId"], "response": item["response"]} for item in responses]
    return None


def pending_interrupt_ids(task: Task) -> list[str]:
    """The interrupt ids an ``INPUT_REQUIRED`` task waits for (from its status message's data part)."""
    for part in task.status.message.parts:
        data = _data_of(part)
        if isinstance(data, dict) and isinstance(data.get("interrupts"), list):
            return [str(item.get("interruptId")) for item in data["interrupts"] if isinstance(item, dict)]
    return []


def _json_value(value: Any) -> Value:
    # Interrupt reasons are JSON by contract; anything else is shown as its repr rather than failing the task.
    return ParseDict(json.loads(json.dumps(value, default=repr)), Value())


def _result_text(result: Any) -> str:
    if isinstance(result, MultiAgentResult):
        # The answer of a graph/swarm is what its last node said.
        for node in reversed(list(result.results.values())):
            text = str(node).strip()
            if text:
                return text
        return str(result).strip()
    return str(result).rstrip("\n")


def _stream_text(event: dict[str, Any]) -> str | None:
    kind = event.get("type")
    if kind == "text_delta":
        return str(event.get("data", ""))
    if kind == "multiagent_node_stream":
        inner = event.get("event") or {}
        if isinstance(inner, dict) and inner.get("type") == "text_delta":
            return str(inner.get("data", ""))
    return None


@contextlib.contextmanager
def _trace_parent(carrier: dict[str, str]) -> Iterator[None]:
    """Make the request's ``traceparent`` the current span, else none at all.

    A task without one is a trace of its own (not a child of spans a2a-sdk's instrumentation may have opened
    around the request).
    """
    if carrier or not tracing_enabled():
        with attached(carrier):
            yield
        return
    from opentelemetry import context

    token = context.attach(context.Context())
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # detached from another context
            context.detach(token)


@dataclass
class _Run:
    target: Any = None
    runner: asyncio.Task[Any] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: bool = False
    turn: Turn | None = None
    """Where the run started in its context's conversation (None for a Graph/Swarm)."""

    def cancel(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        if self.target is not None:
            self.target.cancel()
        asyncio.get_running_loop().call_later(_CANCEL_GRACE_SECONDS, self._force)

    def _force(self) -> None:
        if self.runner is not None and not self.runner.done():
            self.runner.cancel()


class HarnessExecutor(AgentExecutor):
    """The a2a-sdk executor of a served target.

    Args:
        factory: Builds a fresh Agent/Graph/Swarm for each task.
        records: The task store (also where interrupted targets are kept).
        poll_seconds: How often a running task checks for a remote cancel request.
        name: The served app's name (in the task's span name).
        max_contexts: Context conversations kept in the store (least recently used idle ones are evicted).
    """

    def __init__(self, factory: Callable[[], Any], records: TaskRecords, *, poll_seconds: float = 0.25,
                 name: str = "a2a", max_contexts: int = DEFAULT_MAX_CONTEXTS) -> None:
        self._factory = factory
        self._name = name
        self.records = records
        self._conversations = Conversations(records, max_contexts=max_contexts)
        self._poll = poll_seconds
        self._runs: dict[str, _Run] = {}

    def is_running(self, task_id: str) -> bool:
        return task_id in self._runs

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        headers = (context.call_context.state.get("headers") or {}) if context.call_context is not None else {}
        carrier = {key: str(headers[key]) for key in _TRACE_HEADERS if headers.get(key)}
        attributes = {"a2a.task.id": task_id, "a2a.context.id": context_id, "ray_harness.serve.app": self._name}
        with _trace_parent(carrier), span_scope(f"a2a_task {self._name}", attributes):
            await self._execute(context, event_queue, task_id, context_id)

    async def _execute(self, context: RequestContext, event_queue: EventQueue, task_id: str, context_id: str
                       ) -> None:
        current = context.current_task
        if current is not None and current.status.state in TERMINAL:
            raise UnsupportedOperationError(message=f"Task {task_id} is in terminal state: "
                                                    f"{TaskState.Name(current.status.state)}")
        message = context.message or Message()
        resuming = current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        updater = TaskUpdater(event_queue, task_id, context_id)
        await self.records.take_lease(task_id)  # before the first event: a reader never sees WORKING unleased
        run = _Run()
        self._runs[task_id] = run
        watcher = asyncio.create_task(self._watch(task_id, run))
        try:
            if current is None:
                await event_queue.enqueue_event(Task(id=task_id, context_id=context_id, history=[message],
                                                     status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)))
            await updater.start_work()
            run.target = self._factory()
            if run.cancelled:
                run.target.cancel()
            session = None
            if resuming:
                session = await asyncio.to_thread(self._attach_session, run.target, task_id)
                run.turn = await self._conversations.parked(task_id)
                prompt: Any = [{"interruptResponse": item} for item in interrupt_responses(message) or []]
            else:
                run.turn = await self._conversations.start(run.target, context_id, task_id)
                prompt = message_text(message)
            streaming = context.call_context is not None and \
                context.call_context.state.get("method") == "SendStreamingMessage"
            run.runner = asyncio.create_task(self._run_target(run.target, prompt, updater, streaming))
            try:
                result = await run.runner
            except asyncio.CancelledError:
                this = asyncio.current_task()
                if not run.cancelled or (this is not None and this.cancelling()):
                    raise  # the SDK stopped this request: not ours to report
                result = None
            await self._report(task_id, run, result, updater, session)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            await updater.failed(self._agent_message(updater, f"{type(error).__name__}: {error}"))
        finally:
            watcher.cancel()
            self._runs.pop(task_id, None)
            self.records.drop_local(task_id)
            run.done.set()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Stop the run at its next safe point and wait for it to report CANCELED (bounded)."""
        run = self._runs.get(str(context.task_id))
        if run is None:
            return
        run.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.done.wait(), CANCEL_WAIT_SECONDS)

    # -- the run --------------------------------------------------------------------------------------

    async def _run_target(self, target: Any, prompt: Any, updater: TaskUpdater, streaming: bool) -> Any:
        # A task's Graph/Swarm runs in this replica, as runtime="local" would: an orchestrator actor per task
        # would cost an actor start on every request (the task is already one of many on a pool of replicas).
        with placed("in_process"):
            return await self._run_placed(target, prompt, updater, streaming)

    async def _run_placed(self, target: Any, prompt: Any, updater: TaskUpdater, streaming: bool) -> Any:
        if not streaming:
            return await target.invoke_async(prompt)
        result = None
        buffered: list[str] = []
        sent = False
        last_flush = time.monotonic()
        async for event in target.stream_async(prompt):
            kind = event.get("type")
            if kind in ("result", "multiagent_result"):
                result = event["result"]
                continue
            delta = _stream_text(event)
            if delta:
                buffered.append(delta)
            # Deltas go out in chunks of ≈50 ms: every chunk is a task store write.
            if buffered and time.monotonic() - last_flush >= _STREAM_FLUSH_SECONDS:
                await updater.add_artifact([Part(text="".join(buffered))], artifact_id=RESULT_ARTIFACT,
                                           name=RESULT_ARTIFACT, append=sent, last_chunk=False)
                buffered.clear()
                sent = True
                last_flush = time.monotonic()
        return result

    async def _report(self, task_id: str, run: _Run, result: Any, updater: TaskUpdater,
                      session: RepositorySessionManager | None) -> None:
        if result is None and run.cancelled:
            await updater.cancel(self._agent_message(updater, "cancelled"))
            return
        if result is None:
            raise RuntimeError("the run ended without a result")
        interrupts = list(getattr(result, "interrupts", None) or [])
        status = getattr(result, "status", None)
        stop = getattr(result, "stop_reason", None)
        if interrupts and (stop == "interrupt" or status == Status.INTERRUPTED):
            # The snapshot goes to the store first: the answer may reach another replica.
            await asyncio.to_thread(self._store_snapshot, run.target, task_id, session)
            if run.turn is not None:
                await self._conversations.park(task_id, run.turn)
            listed = [{"interruptId": item.id, "name": item.name, "reason": item.reason} for item in interrupts]
            names = ", ".join(item.name for item in interrupts)
            parts = [Part(text=f"Input required: {names}"), Part(data=_json_value({"interrupts": listed}))]
            await updater.requires_input(updater.new_agent_message(parts))
            return
        if stop == "cancelled" or status == Status.CANCELLED or run.cancelled:
            await updater.cancel(self._agent_message(updater, "cancelled"))
            return
        text = _result_text(result)
        if status == Status.FAILED:
            await updater.failed(self._agent_message(updater, text or "the graph/swarm failed"))
            return
        if run.turn is not None:  # before COMPLETED: a follow-up sent on seeing it must find this turn
            await self._conversations.finish(run.target, task_id, run.turn)
        await updater.add_artifact([Part(text=text)], artifact_id=RESULT_ARTIFACT, name=RESULT_ARTIFACT,
                                   append=False, last_chunk=True)
        await updater.complete(self._agent_message(updater, text))

    @staticmethod
    def _agent_message(updater: TaskUpdater, text: str) -> Message:
        return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_AGENT, task_id=updater.task_id,
                       context_id=updater.context_id, parts=[Part(text=text)])

    # -- durability -----------------------------------------------------------------------------------

    def _attach_session(self, target: Any, task_id: str) -> RepositorySessionManager:
        """Restore the interrupted target of ``task_id``; it keeps persisting there while it runs."""
        manager = RepositorySessionManager(task_id, self.records.repo)
        target.session_manager = manager
        if isinstance(target, MultiAgentBase):
            load_state(target, manager)
        else:
            manager.register_hooks(target.hooks)
            manager.initialize(target)
        return manager

    def _store_snapshot(self, target: Any, task_id: str, manager: RepositorySessionManager | None) -> None:
        if manager is None:
            manager = RepositorySessionManager(task_id, self.records.repo)
            if not isinstance(target, MultiAgentBase):
                manager.initialize(target)  # a new record: every message, state and the interrupt state
        if isinstance(target, MultiAgentBase):
            save_state(target, manager)
        else:
            manager.sync_agent(target)

    async def _watch(self, task_id: str, run: _Run) -> None:
        refresh_every = self.records.lease_seconds / 3
        refreshed = time.monotonic()
        while True:
            await asyncio.sleep(self._poll)
            try:
                if time.monotonic() - refreshed >= refresh_every:
                    await self.records.take_lease(task_id)
                    refreshed = time.monotonic()
                if not run.cancelled and await self.records.cancel_requested(task_id):
                    run.cancel()
            except Exception:  # a store hiccup must not end the run; the next beat tries again
                continue
