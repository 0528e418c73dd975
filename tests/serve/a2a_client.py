"""The official a2a-sdk client as the serving tests drive it: a client built from the card, the messages they
send, and the polls that wait for a task (each bounded; none is a timing assertion)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Value

from ray_harness.serve._executor import pending_interrupt_ids


async def fetch_card(url: str) -> Any:
    """The agent card, fetched without credentials (the card is public)."""
    async with httpx.AsyncClient() as http:
        return await A2ACardResolver(http, url).get_agent_card()


@asynccontextmanager
async def official_client(url: str, *, token: str | None = None, streaming: bool = True,
                          headers: dict[str, str] | None = None, timeout: float = 60) -> AsyncIterator[Any]:
    """An a2a-sdk client for the server at ``url``, built from its card (``token``: a bearer token)."""
    sent = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}
    async with httpx.AsyncClient(headers=sent, timeout=timeout) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        yield ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


def user(text: str = "", *, task_id: str = "", data: Any = None) -> SendMessageRequest:
    parts = [Part(text=text)] if text else []
    if data is not None:
        parts.append(Part(data=ParseDict(data, Value())))
    return SendMessageRequest(message=Message(message_id=os.urandom(8).hex(), role=Role.ROLE_USER,
                                              task_id=task_id, parts=parts))


def in_context(text: str, context_id: str, **kwargs: Any) -> Any:
    request = user(text, **kwargs)
    request.message.context_id = context_id
    return request


async def send(client: Any, request: SendMessageRequest) -> list[Any]:
    return [event async for event in client.send_message(request)]


async def ask(client: Any, request: SendMessageRequest) -> Any:
    """The task the first event carries: all a non-streaming client gets back."""
    return (await send(client, request))[0].task


def task_id_of(events: list[Any]) -> str:
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "task":
            return str(event.task.id)
        if kind in ("status_update", "artifact_update"):
            return str(getattr(event, kind).task_id)
    raise AssertionError(f"no task in {events}")


def result_text(task: Any) -> str:
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
    return str(task.artifacts[0].parts[0].text)


def answer(task: Any, response: Any = "yes") -> dict[str, Any]:
    """The data part answering every pending interrupt of an ``INPUT_REQUIRED`` task."""
    return {"interruptResponses": [{"interruptId": key, "response": response} for key in pending_interrupt_ids(task)]}


def answers(result: Any, response: Any = "yes") -> list[dict[str, Any]]:
    """The prompt answering every interrupt of an interrupted ``A2AAgent`` (or Graph/Swarm) result."""
    return [{"interruptResponse": {"interruptId": item.id, "response": response}} for item in result.interrupts]


async def wait_for_state(client: Any, task_id: str, states: set[str], timeout: float = 60.0) -> Any:
    """Poll GetTask until the task is in one of ``states``."""
    deadline = time.monotonic() + timeout
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        if TaskState.Name(task.status.state) in states:
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"task {task_id} stayed {TaskState.Name(task.status.state)}; wanted {states}")
        await asyncio.sleep(0.1)


async def working_task_id(client: Any, timeout: float = 120.0) -> str:
    """The id of a ``WORKING`` task, listed through ``client`` once one is (e.g. a slow task just sent)."""
    deadline = time.monotonic() + timeout
    while True:
        await asyncio.sleep(0.05)
        listed = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_WORKING))
        if listed.tasks:
            return str(listed.tasks[0].id)
        if time.monotonic() > deadline:
            raise AssertionError("no task was WORKING")
