"""The ASGI app one replica serves: the agent card and the A2A 1.0 JSON-RPC binding over the task store.

Built from a2a-sdk's own server classes (``DefaultRequestHandler``, the JSON-RPC routes, ``TaskUpdater``)
with three additions: messages are checked against the stored task before a run starts (a terminal task
rejects them, an ``INPUT_REQUIRED`` task wants ``interruptResponses``, a file part is refused by name);
``CancelTask`` of a task running on another replica leaves a cancel request in the store for that replica
and answers once that replica reported ``CANCELED``; and the HTTP edge adds bearer auth, a request size
limit and a default ``A2A-Version`` of 1.0. A context's conversation: :mod:`ray_harness.serve._contexts`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    HTTPAuthSecurityScheme,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_1_0, VERSION_HEADER
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message as AsgiMessage, Receive, Scope, Send

from ray_harness.models.base import system_prompt_text
from ray_harness.serve._contexts import DEFAULT_MAX_CONTEXTS, check_max_contexts
from ray_harness.serve._executor import (
    CANCEL_WAIT_SECONDS,
    HarnessExecutor,
    interrupt_responses,
    pending_interrupt_ids,
    refused_part,
)
from ray_harness.serve._store import TERMINAL, TaskRecords
from ray_harness.serve._updates import StorePoller

__all__ = ("DEFAULT_MAX_REQUEST_BYTES", "AppSettings", "build_asgi_app", "build_card", "describe_target")

DEFAULT_MAX_REQUEST_BYTES = 1 << 20
"""Request bodies above 1 MiB are refused with HTTP 413 (``max_request_bytes=`` changes it)."""
BEARER_SCHEME = "bearer"
_RUNNING = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
_SETTLE_POLL_SECONDS = 0.1
logger = logging.getLogger("ray_harness.serve")


@dataclass(frozen=True)
class AppSettings:
    """What one replica needs to serve a target (built by ``serve.app`` and shipped to every replica)."""

    name: str
    description: str | None
    version: str
    auth_token: str | None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_contexts: int = DEFAULT_MAX_CONTEXTS

    def __post_init__(self) -> None:
        check_max_contexts(self.max_contexts)


# -- the card ---------------------------------------------------------------------------------------------


def describe_target(target: Any, name: str) -> tuple[str, list[AgentSkill]]:
    """The default description and the skills of ``target`` (an Agent, Graph or Swarm instance)."""
    from ray_harness.multiagent.base import MultiAgentBase

    agent_skill = AgentSkill(id=name, name=name, description=f"Ask the {name} agent", tags=["agent"])
    if isinstance(target, MultiAgentBase):
        return f"{name}: a ray_harness {type(target).__name__.lower()}", [agent_skill]
    prompt = system_prompt_text(getattr(target, "system_prompt", None)).strip()
    description = prompt.splitlines()[0] if prompt else (getattr(target, "description", None) or f"{name} agent")
    skills = []
    registry = getattr(target, "tool_registry", None)
    for spec in registry.get_all_specs() if registry is not None else []:
        skills.append(AgentSkill(id=spec["name"], name=spec["name"], description=spec.get("description") or "",
                                 tags=["tool"]))
    return description, skills or [agent_skill]


def build_card(settings: AppSettings, description: str, skills: list[AgentSkill], url: str = "/") -> AgentCard:
    card = AgentCard(
        name=settings.name, description=settings.description or description, version=settings.version,
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC",
                                             protocol_version=PROTOCOL_VERSION_1_0)],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"], default_output_modes=["text/plain"],
        skills=skills)
    if settings.auth_token:
        card.security_schemes[BEARER_SCHEME].CopyFrom(SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer", description="A bearer token")))
        requirement = SecurityRequirement()
        requirement.schemes[BEARER_SCHEME].CopyFrom(StringList())
        card.security_requirements.append(requirement)
    return card


# -- the request handler ----------------------------------------------------------------------------------


def _checked_parts(message: Message) -> list[dict[str, Any]] | None:
    """The message's ``interruptResponses`` (None without); bad ones, or a part we cannot take, are -32602."""
    try:
        responses = interrupt_responses(message)
    except ValueError as error:
        raise InvalidParamsError(message=str(error)) from None
    refused = refused_part(message) if responses is None else None
    if refused is not None:
        raise InvalidParamsError(message=refused)
    return responses


class HarnessRequestHandler(DefaultRequestHandler):
    """a2a-sdk's handler, checking messages against the stored task and routing cancels across replicas."""

    def __init__(self, executor: HarnessExecutor, records: TaskRecords, card: AgentCard) -> None:
        super().__init__(agent_executor=executor, task_store=records, agent_card=card,
                         event_stream=StorePoller(records), interrupted_task_timeout=60.0)
        self._harness = executor
        self._records = records

    async def _check_message(self, params: SendMessageRequest, context: ServerCallContext) -> bool:
        """Reject a message the stored task cannot take; True when it answers an interrupt (and claimed it)."""
        message: Message = params.message
        responses = _checked_parts(message)
        if not message.task_id:
            if responses is not None:
                raise InvalidParamsError(message="interruptResponses answer a task: set message.taskId")
            return False
        stored = await self._records.get(message.task_id, context)
        if stored is None:
            raise TaskNotFoundError(message=f"Task {message.task_id} not found")
        task: Task = stored.task
        if not message.context_id:
            message.context_id = task.context_id  # a follow-up may name only the task
        elif message.context_id != task.context_id:  # the SDK's own check, here so it comes before the claim
            raise InvalidParamsError(message=f"Context {message.context_id} does not match context "
                                             f"{task.context_id} of task {task.id}")
        state = task.status.state
        if state in TERMINAL:
            raise UnsupportedOperationError(message=f"Task {task.id} is in terminal state "
                                                    f"{TaskState.Name(state)}; start a new task")
        if state in _RUNNING:
            raise UnsupportedOperationError(message=f"Task {task.id} is still {TaskState.Name(state)}; wait for "
                                                    "it or cancel it")
        if state == TaskState.TASK_STATE_INPUT_REQUIRED:
            pending = pending_interrupt_ids(task)
            if responses is None:
                raise InvalidParamsError(message=f"Task {task.id} waits for input: send a data part "
                                                 '{"interruptResponses": [{"interruptId", "response"}]} '
                                                 f"answering {pending}")
            unknown = [item["interruptId"] for item in responses if item["interruptId"] not in pending]
            if unknown:
                raise InvalidParamsError(message=f"interruptResponses: unknown interruptId(s) {unknown}; "
                                                 f"task {task.id} waits for {pending}")
            await self._claim(task.id, stored.version, context)
            return True
        return False

    async def _claim(self, task_id: str, version: Any, context: ServerCallContext) -> None:
        """Only one answer runs: two answers racing (on two replicas) would both run the approved tools."""
        if not await self._records.claim(task_id):
            raise UnsupportedOperationError(message=f"Task {task_id} is already being answered; wait for it")
        again = await self._records.get(task_id, context)
        if again is None or again.version != version:  # answered and settled between the read and the claim
            await self._records.release(task_id)
            raise UnsupportedOperationError(message=f"Task {task_id} was answered meanwhile; get it and answer "
                                                    "what it waits for now")

    async def _unclaim(self, params: SendMessageRequest) -> None:
        """The SDK refused a claimed answer before a run took the task over: it may be answered again."""
        with contextlib.suppress(Exception):
            if not self._harness.is_running(params.message.task_id):
                await self._records.release(params.message.task_id)

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Any:
        claimed = await self._check_message(params, context)
        try:
            return await super().on_message_send(params, context)
        except Exception:
            if claimed:
                await self._unclaim(params)
            raise

    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Any, None]:
        claimed = await self._check_message(params, context)
        try:
            async for event in super().on_message_send_stream(params, context):
                yield event
        except Exception:
            if claimed:
                await self._unclaim(params)
            raise

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        stored = await self._records.get(params.id, context)
        if stored is None:
            raise TaskNotFoundError
        task = stored.task
        if task.status.state in TERMINAL:
            raise TaskNotCancelableError(message=f"Task {task.id} is already {TaskState.Name(task.status.state)}")
        if task.status.state in _RUNNING and not self._harness.is_running(task.id) \
                and await self._records.lease_alive(task.id):
            # Another replica runs it: it sees the request within a poll and reports CANCELED itself. Answer
            # with the task once it has (as a cancel on the running replica does), else as it is then.
            await self._records.request_cancel(task.id)
            return await self._settled(task, context)
        result: Task | None = await super().on_cancel_task(params, context)
        return result

    async def _settled(self, task: Task, context: ServerCallContext) -> Task:
        deadline = time.monotonic() + CANCEL_WAIT_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(_SETTLE_POLL_SECONDS)
            stored = await self._records.get(task.id, context)
            if stored is None:
                break
            task = stored.task
            if task.status.state not in _RUNNING:
                break
        return task


class _VersionDefault(DefaultServerCallContextBuilder):
    """A request without ``A2A-Version`` is served as 1.0 (the SDK alone would read it as 0.3)."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        headers = context.state.setdefault("headers", {})
        if not headers.get(VERSION_HEADER.lower()) and not headers.get(VERSION_HEADER):
            headers[VERSION_HEADER.lower()] = PROTOCOL_VERSION_1_0
        return context


# -- the HTTP edge ----------------------------------------------------------------------------------------


def _rpc_error(status: int, code: int, text: str, headers: dict[str, str] | None = None) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}}
    return JSONResponse(body, status_code=status, headers=headers)


class _Edge:
    """Bearer auth (everything but the card) and the body size limit, as one ASGI middleware."""

    def __init__(self, app: ASGIApp, settings: AppSettings) -> None:
        self.app = app
        self.token = settings.auth_token
        self.limit = settings.max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        is_card = scope["method"] == "GET" and str(scope.get("path", "")).endswith(AGENT_CARD_WELL_KNOWN_PATH)
        if self.token and not is_card and not self._authorized(scope):
            await _rpc_error(401, -32600, "Unauthorized: send 'Authorization: Bearer <token>'",
                             {"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._too_large(int(declared), scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:  # buffered: a chunked body has no length to check up front
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._too_large(size, scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> AsgiMessage:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _authorized(self, scope: Scope) -> bool:
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), str(self.token).encode())

    async def _too_large(self, size: int, scope: Scope, receive: Receive, send: Send) -> None:
        await _rpc_error(413, -32600, f"Request too large: {size} bytes; the limit is {self.limit} bytes")(
            scope, receive, send)



def build_asgi_app(settings: AppSettings, factory: Callable[[], Any], records: TaskRecords) -> Starlette:
    """The A2A app of one replica (also usable without Ray Serve, e.g. under uvicorn or in tests)."""
    description, skills = describe_target(factory(), settings.name)
    card = build_card(settings, description, skills)
    executor = HarnessExecutor(factory, records, name=settings.name, max_contexts=settings.max_contexts)
    handler = HarnessRequestHandler(executor, records, card)

    async def agent_card(request: Request) -> Response:
        served = AgentCard()
        served.CopyFrom(card)
        served.supported_interfaces[0].url = str(request.base_url)  # base_url carries Serve's route prefix
        return JSONResponse(agent_card_to_dict(served))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    routes = [Route(AGENT_CARD_WELL_KNOWN_PATH, agent_card, methods=["GET"]),
              *create_jsonrpc_routes(handler, "/", context_builder=_VersionDefault())]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.records = records
    app.state.handler = handler
    return _wrap(app, settings)


def _wrap(app: Starlette, settings: AppSettings) -> Starlette:
    app.add_middleware(_Edge, settings=settings)
    return app

