"""``A2AAgent``: any A2A 1.0 server behind the Agent surface, also as a tool and as a Graph/Swarm node.

Each call opens a new task in the agent's one ``contextId``; the reply streams as ``text_delta`` events.
``COMPLETED`` → ``stop_reason="end_turn"``; ``CANCELED`` → ``"cancelled"``; ``FAILED``/``REJECTED`` →
:class:`A2AError` naming the remote error. ``INPUT_REQUIRED`` → ``stop_reason="interrupt"`` with one
interrupt per remote interrupt (id ``v1:a2a:<task id>:<remote interrupt id>``, the remote name and
reason); answering it the usual way (``agent([{"interruptResponse": ...}])``, or resuming the parent
agent / graph) sends the answers to that task. The remote task id lives in the interrupt state, so a
new process resumes it. As a tool it takes one ``input`` string and is named from the card.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import threading
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from ray_harness.agent.as_tool import SubAgentInterrupt, SubAgentTool, forward_cancel
from ray_harness.agent.result import AgentResult
from ray_harness.agent.state import AgentState
from ray_harness.hooks.events import AfterInvocationEvent
from ray_harness.hooks.registry import HookOrder
from ray_harness.interrupts import Interrupt, InterruptState
from ray_harness.middleware.types import ToolResultEvent
from ray_harness.tools.base import ToolContext, ToolStreamEvent, error_result
from ray_harness.tools.registry import ToolRegistry
from ray_harness.types.content import ToolUse
from ray_harness.types.exceptions import RayHarnessError

__all__ = ("A2AAgent", "A2AError")

_PREFIX = "v1:a2a:"
_PARKING = "__ray_harness_a2a_parking__"
_CONTEXT_KEY = "a2a_tasks"
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]+")
_TEXT_REPLY = "input"
"""Remote id of the one interrupt of a server whose INPUT_REQUIRED carries no ``interrupts`` data part."""
_FORMS = "a non-empty string, a list of text content blocks, or a list of interruptResponse blocks"


class A2AError(RayHarnessError):
    """A remote A2A task failed or was rejected, or the server answered with a JSON-RPC error."""


def _tool_name(name: str) -> str:
    cleaned = _UNSAFE.sub("_", name).strip("_")[:64]
    return cleaned or "a2a_agent"


class _Outcome:
    def __init__(self) -> None:
        self.task_id = ""
        self.state = ""
        self.text = ""
        self.status_text = ""
        self.interrupts: list[dict[str, Any]] = []


class A2AAgent:
    """A remote A2A 1.0 agent with the Agent surface (``__call__``, ``invoke_async``, ``stream_async``, ``cancel``).

    Args:
        url: The server's base URL (the card is at ``<url>/.well-known/agent-card.json``).
        auth_token: Sent as ``Authorization: Bearer <token>``.
        name: Overrides the card's name (also the tool name, sanitized).
        timeout: Seconds an HTTP call may take (a streamed call counts between events).
        client_config: a2a-sdk's ``ClientConfig`` for the calls (Strands' ``client_config``): its transports and
            streaming preference, and its ``httpx_client`` if set (then used for every call, never closed; its
            headers and auth also fetch the card; its timeout, not ``timeout``, applies). Such an agent does not
            pickle: a live client holds sockets.
    """

    def __init__(self, url: str, auth_token: str | None = None, *, name: str | None = None,
                 timeout: float = 300.0, client_config: Any = None) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http(s) URL, got {url!r}")
        if client_config is not None:
            from a2a.client import ClientConfig

            if not isinstance(client_config, ClientConfig):
                raise ValueError(f"client_config must be an a2a.client.ClientConfig, got "
                                 f"{type(client_config).__name__}")
            if auth_token is not None and client_config.httpx_client is not None:
                raise ValueError("give auth_token or a client_config with an httpx_client, not both: "
                                 "set the token on that client")
        self._client_config = client_config
        self.url = url.rstrip("/")
        self._token = auth_token
        self._timeout = timeout
        self._name = name
        self._card: Any = None
        self.context_id = str(uuid.uuid4())
        self.messages: list[Any] = []
        self.state = AgentState()
        self._interrupt_state = InterruptState()
        self.tool_registry = ToolRegistry()  # a Swarm adds its handoff tool here; a remote agent cannot call it
        self.agent_id = "default"
        self._cancel = threading.Event()
        self._busy = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Shipped to a Ray actor (a node on its Graph/Swarm's orchestration host, a tool of a RemoteAgent's agent):
        # the call's lock and cancel flag belong to this process. The card is a protobuf whose generated class
        # pickle cannot name: it travels as its wire bytes, so the copy does not fetch it again.
        if self._given_http() is not None:
            raise TypeError(f"A2AAgent {self.url!r} does not pickle: its client_config holds a live httpx_client")
        state = self.__dict__.copy()
        del state["_cancel"], state["_busy"]
        state["_card"] = None if self._card is None else self._card.SerializeToString()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("_client_config", None)  # pickled before there was one
        self.__dict__.update(state)
        if self._card is not None:
            from a2a.types.a2a_pb2 import AgentCard

            self._card = AgentCard.FromString(self._card)
        self._cancel = threading.Event()
        self._busy = threading.Lock()

    def _run_state(self) -> dict[str, Any]:
        """What a call changes here (the remote keeps the rest): a copy that ran elsewhere hands it back."""
        return {"messages": self.messages, "state": self.state, "interrupt_state": self._interrupt_state}

    def _apply_run_state(self, state: dict[str, Any]) -> None:
        """Take over :meth:`_run_state` of a copy of this agent (a Graph/Swarm node's, from its orchestration host)."""
        self.messages = state["messages"]
        self.state = state["state"]
        self._interrupt_state = state["interrupt_state"]

    # -- the card ---------------------------------------------------------------------------------------

    def _given_http(self) -> Any:
        """The caller's ``httpx.AsyncClient`` from ``client_config``, if any."""
        return None if self._client_config is None else self._client_config.httpx_client

    def _headers(self) -> dict[str, str]:
        headers = {"A2A-Version": "1.0"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    @property
    def card(self) -> Any:
        """The remote agent card (fetched on first use)."""
        if self._card is None:
            self._card = self._fetch_card()
        return self._card

    def _fetch_card(self) -> Any:
        import httpx
        from a2a.client.card_resolver import parse_agent_card

        card_url = f"{self.url}/.well-known/agent-card.json"
        given = self._given_http()
        # A sync request (the card is read from sync code too) with what the caller's async client would send.
        headers, auth = ({**given.headers, **self._headers()}, given.auth) if given is not None else \
            (self._headers(), None)
        try:
            response = httpx.get(card_url, headers=headers, auth=auth, timeout=self._timeout)
        except httpx.HTTPError as error:  # unreachable, refused, timed out, ...
            raise A2AError(f"agent card at {card_url}: {type(error).__name__}: {error}") from error
        if response.status_code != 200:
            raise A2AError(f"agent card at {card_url}: HTTP {response.status_code}")
        try:
            return parse_agent_card(response.json())
        except Exception as error:  # not JSON, or not an agent card
            raise A2AError(f"agent card at {card_url}: not an A2A agent card: {type(error).__name__}: "
                           f"{error}") from error

    @property
    def name(self) -> str:
        """The agent's name: the one given, else the agent card's."""
        return self._name or self.card.name

    @property
    def description(self) -> str:
        """The agent card's description."""
        return str(self.card.description)

    def as_tool(self, name: str | None = None, description: str | None = None) -> A2ATool:
        """This remote agent as a tool taking one ``input`` string (also what ``tools=[A2AAgent(url)]`` does)."""
        return A2ATool(self, name=name, description=description)

    # -- the Agent surface ------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Cancel the running call: a ``CancelTask`` to the server; the call ends ``cancelled``."""
        self._cancel.set()

    def __call__(self, prompt: Any = None, **kwargs: Any) -> AgentResult:
        """Send ``prompt`` to the remote agent and wait for its result (from code not in an event loop)."""
        from ray_harness.agent.agent import run_sync

        result: AgentResult = run_sync(self.invoke_async(prompt, **kwargs))
        return result

    async def invoke_async(self, prompt: Any = None, **kwargs: Any) -> AgentResult:
        """Send ``prompt`` to the remote agent and return its result (the stream's last event)."""
        result: AgentResult | None = None
        async for event in self.stream_async(prompt, **kwargs):
            if event.get("type") == "result":
                result = event["result"]
        if result is None:  # pragma: no cover - stream_async always ends with a result
            raise RuntimeError("A2AAgent ended without a result")
        return result

    async def stream_async(self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None,
                           cancel_signal: threading.Event | None = None, **kwargs: Any
                           ) -> AsyncGenerator[dict[str, Any], None]:
        """Send ``prompt`` (text, or ``interruptResponse`` blocks answering this agent's interrupts).

        Raises:
            ValueError: For a prompt it cannot send (anything but a non-empty string, text content blocks or
                ``interruptResponse`` blocks: a remote agent has no local history to continue from ``None``),
                before any network call.
            A2AError: When the server is unreachable, answers with an error, or the remote task fails.
        """
        if not self._busy.acquire(blocking=False):
            raise RayHarnessError(f"A2AAgent {self.url!r} is already running a call; use another A2AAgent")
        try:
            self._cancel.clear()
            task_id, data, text = self._next_message(prompt)
            outcome = _Outcome()
            async for event in self._exchange(text, data, task_id, outcome, cancel_signal):
                yield event
            if text:
                self.messages.append({"role": "user", "content": [{"text": text}]})
            yield {"type": "result", "result": self._result(outcome)}
        finally:
            self._busy.release()

    def _next_message(self, prompt: Any) -> tuple[str | None, Any, str]:
        state = self._interrupt_state
        if isinstance(prompt, list) and prompt and all(isinstance(b, dict) and "interruptResponse" in b
                                                       for b in prompt):
            if not state.activated:
                raise ValueError("received interrupt responses but the A2AAgent is not interrupted")
            state.resume(prompt)  # TypeError/KeyError name a bad or unknown block
            task_id = str(state.context.get("task_id", ""))
            return task_id, _remote_answers(state.interrupts, task_id), ""
        if state.activated:
            raise TypeError("the A2AAgent is interrupted: resume with a list of interruptResponse blocks")
        text = _prompt_text(prompt)
        if not text:  # an A2A message needs a part: the server would refuse it with a bare "Validation failed"
            raise ValueError(f"A2AAgent has nothing to send in the prompt {_short(prompt)}; expected {_FORMS}")
        return None, None, text

    def _result(self, outcome: _Outcome) -> AgentResult:
        state = outcome.state
        if state == "TASK_STATE_INPUT_REQUIRED":
            interrupts = [Interrupt(id=f"{_PREFIX}{outcome.task_id}:{item['interruptId']}", name=str(item["name"]),
                                    reason=item.get("reason")) for item in outcome.interrupts]
            self._interrupt_state = InterruptState(interrupts={item.id: item for item in interrupts},
                                                   context={"task_id": outcome.task_id}, activated=True)
            message = {"role": "assistant", "content": [{"text": outcome.status_text or "input required"}]}
            return AgentResult(stop_reason="interrupt", message=message, interrupts=interrupts)  # type: ignore[arg-type]
        self._interrupt_state = InterruptState()
        if state in ("TASK_STATE_FAILED", "TASK_STATE_REJECTED"):
            raise A2AError(f"remote task {outcome.task_id} at {self.url} ended {state}: "
                           f"{outcome.status_text or 'no message'}")
        text = outcome.text or outcome.status_text
        message = {"role": "assistant", "content": [{"text": text}]}
        self.messages.append(message)
        if state == "TASK_STATE_CANCELED":
            return AgentResult(stop_reason="cancelled", message=message)  # type: ignore[arg-type]
        if state != "TASK_STATE_COMPLETED":
            raise A2AError(f"remote task {outcome.task_id} at {self.url} stopped in state {state or 'unknown'}")
        return AgentResult(stop_reason="end_turn", message=message)  # type: ignore[arg-type]

    # -- the wire -------------------------------------------------------------------------------------

    async def _exchange(self, text: str, data: Any, task_id: str | None, outcome: _Outcome,
                        cancel_signal: threading.Event | None) -> AsyncGenerator[dict[str, Any], None]:
        from a2a.client import ClientFactory
        from a2a.types.a2a_pb2 import CancelTaskRequest, Message, Part, Role, SendMessageRequest
        from google.protobuf.json_format import ParseDict
        from google.protobuf.struct_pb2 import Value

        # Fetched off the event loop the first time: it may be a Graph's or an orchestration host's shared loop.
        card = self._card if self._card is not None else await asyncio.to_thread(lambda: self.card)
        if data is not None and [item["interruptId"] for item in data] == [_TEXT_REPLY]:
            text, data = str(data[0]["response"]), None  # it asked in prose: reply in prose
        parts = [Part(text=text)] if text else []
        if data is not None:
            parts.append(Part(data=ParseDict({"interruptResponses": data}, Value())))
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, context_id=self.context_id,
                          task_id=task_id or "", parts=parts)
        async with contextlib.AsyncExitStack() as stack:
            client = ClientFactory(await self._sdk_config(stack)).create(card)
            cancel_sent = asyncio.Event()

            async def send_cancel() -> None:
                if outcome.task_id and not cancel_sent.is_set():
                    cancel_sent.set()
                    with contextlib.suppress(Exception):  # already finished: the stream tells
                        await client.cancel_task(CancelTaskRequest(id=outcome.task_id))

            watchers = [asyncio.create_task(forward_cancel(self._cancel, send_cancel))]
            if cancel_signal is not None:
                watchers.append(asyncio.create_task(forward_cancel(cancel_signal, send_cancel)))
            streamed = False
            try:
                async for response in client.send_message(SendMessageRequest(message=message)):
                    for delta in _apply(response, outcome, streamed):
                        streamed = True
                        yield {"type": "text_delta", "data": delta}
                    if self._cancel.is_set() or (cancel_signal is not None and cancel_signal.is_set()):
                        await send_cancel()
            except Exception as error:
                if isinstance(error, A2AError):
                    raise
                raise A2AError(f"A2A call to {self.url} failed: {type(error).__name__}: {error}") from error
            finally:
                for watcher in watchers:
                    watcher.cancel()


    async def _sdk_config(self, stack: contextlib.AsyncExitStack) -> Any:
        """The a2a-sdk ``ClientConfig`` of one call: the caller's, with our own ``httpx`` client unless it has one."""
        import httpx
        from a2a.client import ClientConfig

        http = self._given_http()
        if http is None:
            http = await stack.enter_async_context(httpx.AsyncClient(headers=self._headers(), timeout=self._timeout))
        if self._client_config is None:
            return ClientConfig(httpx_client=http, streaming=True)
        return dataclasses.replace(self._client_config, httpx_client=http)


def _prompt_text(prompt: Any) -> str:
    """The text a prompt sends: a string, or text content blocks (joined by spaces); ``""`` for ``None``/``[]``.

    Raises:
        ValueError: For anything else, named; a remote agent gets text only and keeps its own history, so
            messages, non-text blocks and checkpoint resumes cannot be sent.
    """
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        texts = []
        for block in prompt:
            if not (isinstance(block, dict) and isinstance(block.get("text"), str)):
                raise ValueError(f"A2AAgent cannot send the prompt block {_short(block)} in {_short(prompt)}; "
                                 f"expected {_FORMS}")
            texts.append(block["text"])
        return " ".join(texts)
    raise ValueError(f"A2AAgent cannot send a prompt of type {type(prompt).__name__} ({_short(prompt)}); "
                     f"expected {_FORMS}")


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 120 else shown[:117] + "..."


def _apply(response: Any, outcome: _Outcome, streamed: bool) -> list[str]:
    """Fold one StreamResponse into ``outcome``; returns new text deltas."""
    from a2a.types.a2a_pb2 import TaskState

    kind = response.WhichOneof("payload")
    deltas: list[str] = []
    if kind == "task":
        task = response.task
        outcome.task_id = task.id
        _status(task.status, outcome, TaskState)
        for artifact in task.artifacts:
            if artifact.name == "result" or not outcome.text:
                outcome.text = "".join(part.text for part in artifact.parts)
    elif kind == "status_update":
        outcome.task_id = response.status_update.task_id
        _status(response.status_update.status, outcome, TaskState)
    elif kind == "artifact_update":
        update = response.artifact_update
        outcome.task_id = update.task_id
        chunk = "".join(part.text for part in update.artifact.parts)
        if update.append:
            outcome.text += chunk
            deltas.append(chunk)
        else:
            if not (streamed and update.last_chunk):  # the final full answer after streamed deltas: no repeat
                deltas.append(chunk)
            outcome.text = chunk
    elif kind == "message":
        outcome.state = "TASK_STATE_COMPLETED"
        outcome.text = "".join(part.text for part in response.message.parts)
        deltas.append(outcome.text)
    return [delta for delta in deltas if delta]


def _status(status: Any, outcome: _Outcome, task_state: Any) -> None:
    from google.protobuf.json_format import MessageToDict

    outcome.state = task_state.Name(status.state)
    texts, interrupts = [], []
    for part in status.message.parts:
        if part.text:
            texts.append(part.text)
        if part.HasField("data"):
            data = MessageToDict(part.data)
            if isinstance(data, dict) and isinstance(data.get("interrupts"), list):
                interrupts = [item for item in data["interrupts"] if isinstance(item, dict) and "interruptId" in item]
    if texts:
        outcome.status_text = "\n".join(texts)
    if outcome.state == "TASK_STATE_INPUT_REQUIRED":
        outcome.interrupts = [{"interruptId": str(item["interruptId"]), "name": item.get("name") or "input",
                               "reason": item.get("reason")} for item in interrupts]
        if not outcome.interrupts:  # a server that asks in prose: one interrupt, answered as a text reply
            outcome.interrupts = [{"interruptId": _TEXT_REPLY, "name": "input_required",
                                   "reason": outcome.status_text or None}]


def _remote_answers(interrupts: dict[str, Interrupt], task_id: str) -> list[dict[str, Any]]:
    prefix = f"{_PREFIX}{task_id}:"
    return [{"interruptId": key[len(prefix):], "response": item.response}
            for key, item in interrupts.items() if key.startswith(prefix) and item.response is not None]


class A2ATool(SubAgentTool):
    """An :class:`A2AAgent` as a tool: one ``input`` string; each call is a new task in the agent's context."""

    def __init__(self, agent: A2AAgent, *, name: str | None = None, description: str | None = None) -> None:
        super().__init__(name or _tool_name(agent.name),
                         description or agent.description or f"Ask the remote agent {agent.name}",
                         preserve_context=False, delegate=False)
        self._remote = agent

    @property
    def agent_name(self) -> str:
        """The remote agent's name (from its agent card)."""
        return self._remote.name

    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        use_id = str(tool_use["toolUseId"])
        parent = context.agent
        state: InterruptState | None = getattr(parent, "_interrupt_state", None)
        task_id = ((state.context.get(_CONTEXT_KEY) or {}).get(use_id) if state is not None and state.activated
                   else None)
        remote = self._remote
        outcome = _Outcome()
        if task_id and state is not None:
            answers = _remote_answers(state.interrupts, task_id)
            text, data = "", answers or None
        else:
            raw = tool_use.get("input")
            text, data, task_id = (raw.get("input", "") if isinstance(raw, dict) else str(raw or "")), None, None
        try:
            async for event in remote._exchange(text, data, task_id, outcome, context.cancel_signal):
                yield ToolStreamEvent(tool_use, event)
        except A2AError as error:
            yield ToolResultEvent(error_result(use_id, str(error)))
            return
        if outcome.state == "TASK_STATE_INPUT_REQUIRED":
            interrupts = [Interrupt(id=f"{_PREFIX}{outcome.task_id}:{item['interruptId']}", name=str(item["name"]),
                                    reason=item.get("reason")) for item in outcome.interrupts]
            _park(context, use_id, outcome.task_id)
            raise SubAgentInterrupt(interrupts)
        if outcome.state == "TASK_STATE_COMPLETED":
            yield ToolResultEvent({"toolUseId": use_id, "status": "success",
                                   "content": [{"text": outcome.text or outcome.status_text}]})
        elif outcome.state == "TASK_STATE_CANCELED":
            yield ToolResultEvent(error_result(use_id, f"Agent '{self.tool_name}' cancelled"))
        else:
            yield ToolResultEvent(error_result(use_id, f"remote task {outcome.task_id} ended {outcome.state}: "
                                                       f"{outcome.status_text or 'no message'}"))


def _park(context: ToolContext, use_id: str, task_id: str) -> None:
    """Remember which remote task this call waits on, in the parent's interrupt context (see as_tool.park)."""
    context.invocation_state.setdefault(_PARKING, {})[use_id] = task_id
    parent = context.agent
    if parent is not None:
        callbacks = list(parent.hooks.get_callbacks_for(AfterInvocationEvent(agent=parent)))
        if _store_parked not in callbacks:
            parent.hooks.add_callback(AfterInvocationEvent, _store_parked, HookOrder.SDK_FIRST)


def _store_parked(event: AfterInvocationEvent) -> None:
    parked = event.invocation_state.pop(_PARKING, None)
    state = event.agent._interrupt_state
    if parked and state.activated:
        state.context.setdefault(_CONTEXT_KEY, {}).update(parked)
