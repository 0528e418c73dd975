"""The A2A server of ``ray_harness.serve`` through the official a2a-sdk client, on loopback HTTP (no Ray).

Two app instances over one file store stand in for two replicas; the Ray Serve tests repeat the key
cases on real replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from ray_harness.serve._store import DEAD_REPLICA_TEXT
from tests.serve.a2a_client import (
    answer,
    ask,
    fetch_card,
    official_client,
    send,
    task_id_of,
    user,
    wait_for_state,
    working_task_id,
)
from tests.serve.conftest import TOKEN, free_port, rpc, s3_bucket
from tests.serve.targets import build_graph, build_plain_agent, build_support_agent

pytestmark = pytest.mark.timeout(240)


def read_log(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def test_card_through_the_official_resolver(replicas: Any) -> None:
    replica = replicas(build_support_agent, token=TOKEN)
    card = await fetch_card(replica.url)  # no token: the card is public
    assert card.name == "support"
    assert card.description == "Customer support for the test shop."
    assert card.version == "9.9"
    assert card.capabilities.streaming is True
    assert [(s.id, s.name, list(s.tags)) for s in card.skills] == [("refund", "refund", ["tool"]),
                                                                  ("wait_for", "wait_for", ["tool"])]
    assert card.skills[0].description.startswith("Refund an order")
    interface = card.supported_interfaces[0]
    assert (interface.url, interface.protocol_binding, interface.protocol_version) == \
        (replica.url + "/", "JSONRPC", "1.0")
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert list(card.security_requirements[0].schemes) == ["bearer"]


async def test_agent_without_tools_and_graph_have_one_agent_skill(replicas: Any) -> None:
    for factory in (build_plain_agent, build_graph):
        replica = replicas(factory, store=None, name="helper")
        card = await fetch_card(replica.url)
        assert [(s.id, list(s.tags)) for s in card.skills] == [("helper", ["agent"])]
        assert not card.security_requirements


async def test_send_get_list_and_wire_forms(replicas: Any) -> None:
    replica = replicas(build_support_agent)
    async with official_client(replica.url, streaming=False) as client:
        events = await send(client, user("hello there"))
        assert len(events) == 1
        task = events[0].task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert [a.name for a in task.artifacts] == ["result"]
        assert task.artifacts[0].parts[0].text == "echo: hello there"
        assert task.status.message.parts[0].text == "echo: hello there"
        assert task.status.message.role == Role.ROLE_AGENT
        fetched = await client.get_task(GetTaskRequest(id=task.id))
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
        second = await ask(client, user("again"))
        listed = await client.list_tasks(ListTasksRequest())
        assert {t.id for t in listed.tasks} == {task.id, second.id}
        only = await client.list_tasks(ListTasksRequest(context_id=second.context_id))
        assert [t.id for t in only.tasks] == [second.id]
    raw = rpc(replica.url, "GetTask", {"id": task.id})
    assert raw.status_code == 200
    body = raw.json()["result"]
    assert body["status"]["state"] == "TASK_STATE_COMPLETED"
    assert body["status"]["message"]["role"] == "ROLE_AGENT"
    assert "contextId" in body and "artifacts" in body


async def test_stream_sends_artifact_updates_before_completed(replicas: Any) -> None:
    replica = replicas(build_support_agent)
    async with official_client(replica.url) as client:
        events = await send(client, user("stream this please"))
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task"
    artifact_at = max(i for i, kind in enumerate(kinds) if kind == "artifact_update")
    final = events[-1].status_update
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_at < len(events) - 1
    assert events[artifact_at].artifact_update.artifact.name == "result"
    assert events[artifact_at].artifact_update.artifact.parts[0].text == "echo: stream this please"


async def test_interrupt_answered_on_another_replica(replicas: Any, refund_log: Path) -> None:
    first = replicas(build_support_agent)
    second = replicas(build_support_agent)
    async with official_client(first.url) as client_a, official_client(second.url, streaming=False) as client_b:
        events = await send(client_a, user("refund order A17"))
        task_id = task_id_of(events)
        task = await client_b.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        data = MessageToDict(task.status.message.parts[1].data)
        assert data["interrupts"][0]["name"] == "approve_refund"
        assert data["interrupts"][0]["reason"] == "Refund order A17?"
        assert read_log(refund_log) == ""
        with pytest.raises(InvalidParamsError):  # a text reply is not an answer
            await send(client_b, user("yes", task_id=task_id))
        with pytest.raises(InvalidParamsError, match="unknown interruptId"):
            await send(client_b, user(task_id=task_id, data={"interruptResponses": [
                {"interruptId": "nope", "response": "yes"}]}))
        done = await ask(client_b, user(task_id=task_id, data=answer(task)))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert done.artifacts[0].parts[0].text == "Done: refunded A17."
        assert read_log(refund_log) == "A17\n"
        with pytest.raises(UnsupportedOperationError):  # terminal tasks reject new messages
            await send(client_a, user("more", task_id=task_id))


async def test_racing_answers_on_two_replicas_run_the_approved_tool_once(replicas: Any, refund_log: Path) -> None:
    first = replicas(build_support_agent)
    second = replicas(build_support_agent)
    async with official_client(first.url, streaming=False) as client_a, \
            official_client(second.url, streaming=False) as client_b:
        task = await ask(client_a, user("refund order R9"))
        wrong_context = user(task_id=task.id, data=answer(task))
        wrong_context.message.context_id = "another-context"
        with pytest.raises(InvalidParamsError, match="does not match"):  # refused before it claims the task
            await send(client_b, wrong_context)
        outcomes = await asyncio.gather(send(client_a, user(task_id=task.id, data=answer(task))),
                                        send(client_b, user(task_id=task.id, data=answer(task))),
                                        return_exceptions=True)
        refused = [item for item in outcomes if isinstance(item, Exception)]
        done = [item[0].task for item in outcomes if not isinstance(item, Exception)]
        assert [type(error) for error in refused] == [UnsupportedOperationError], outcomes
        assert [item.status.state for item in done] == [TaskState.TASK_STATE_COMPLETED]
        assert read_log(refund_log) == "R9\n"  # one refund, though two answers approved it


async def test_interrupt_in_an_s3_task_store(replicas: Any, moto_endpoint: str, refund_log: Path) -> None:
    options = s3_bucket(moto_endpoint, "a2a-tasks")
    first = replicas(build_support_agent, store="s3://a2a-tasks/served", store_options=options)
    second = replicas(build_support_agent, store="s3://a2a-tasks/served", store_options=options)
    async with official_client(first.url, streaming=False) as client_a, \
            official_client(second.url, streaming=False) as client_b:
        task = await ask(client_a, user("refund order S3"))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        done = await ask(client_b, user(task_id=task.id, data=answer(task)))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert read_log(refund_log) == "S3\n"


async def test_cancel_locally_and_from_another_replica(replicas: Any) -> None:
    first = replicas(build_support_agent)
    second = replicas(build_support_agent)
    async with official_client(first.url) as client_a, official_client(second.url, streaming=False) as client_b:
        for canceller in (client_a, client_b):  # on the running replica, then through the other one
            stream = asyncio.create_task(send(client_a, user("slow 60")))
            task_id = await working_task_id(client_b)
            current = await canceller.cancel_task(CancelTaskRequest(id=task_id))
            assert current.status.state == TaskState.TASK_STATE_CANCELED  # either replica answers once it is
            final = await wait_for_state(client_b, task_id, {"TASK_STATE_CANCELED"})
            assert final.status.state == TaskState.TASK_STATE_CANCELED
            events = await asyncio.wait_for(stream, 60)
            assert events[-1].WhichOneof("payload") in ("status_update", "task")
            with pytest.raises(TaskNotCancelableError):
                await client_b.cancel_task(CancelTaskRequest(id=task_id))


async def test_subscribe_to_a_task_running_on_another_replica(replicas: Any) -> None:
    first = replicas(build_support_agent)
    second = replicas(build_support_agent)
    async with official_client(first.url) as client_a, official_client(second.url) as client_b:
        stream = asyncio.create_task(send(client_a, user("slow 1")))
        task_id = await working_task_id(client_b)
        seen = [event async for event in client_b.subscribe(SubscribeToTaskRequest(id=task_id))]
        await stream
    # The shape of the stream (the same on either replica): tests/serve/test_a2a_lifecycle.py.
    assert seen[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    with pytest.raises(UnsupportedOperationError):
        async with official_client(second.url) as client:
            _ = [event async for event in client.subscribe(SubscribeToTaskRequest(id=task_id))]


_REPLICA_SCRIPT = textwrap.dedent("""
    import sys, time, uvicorn
    from ray_harness.serve._server import AppSettings, build_asgi_app
    from ray_harness.serve._store import TaskRecords, open_repository
    from tests.serve.targets import build_support_agent
    records = TaskRecords(open_repository(sys.argv[1]), owner="doomed", lease_seconds=1.0)
    app = build_asgi_app(AppSettings("support", None, "1", None), build_support_agent, records)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
""")


async def test_a_dead_replica_leaves_no_task_working(replicas: Any, tmp_path: Path) -> None:
    store = f"file://{tmp_path / 'tasks'}"
    survivor = replicas(build_support_agent, store=store, lease_seconds=1.0)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), *sys.path])}
    doomed = await asyncio.to_thread(subprocess.Popen, [sys.executable, "-c", _REPLICA_SCRIPT, store, str(port)],
                                     env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                card = await asyncio.to_thread(httpx.get, url + "/.well-known/agent-card.json", timeout=1)
                if card.status_code == 200:
                    break
            await asyncio.sleep(0.1)
        async with official_client(url) as client_doomed, official_client(survivor.url) as client:
            stream = asyncio.create_task(send(client_doomed, user("slow 120")))
            task_id = await working_task_id(client)
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait(30)
            with contextlib.suppress(Exception):
                await stream
            task = await wait_for_state(client, task_id, {"TASK_STATE_FAILED"})
    finally:
        if doomed.poll() is None:
            doomed.kill()
    assert task.status.message.parts[0].text == DEAD_REPLICA_TEXT


def test_malformed_json_rpc_gets_errors_and_the_server_keeps_serving(replicas: Any) -> None:
    replica = replicas(build_support_agent)
    url = replica.url + "/"
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    parse = httpx.post(url, content=b"{not json", headers=headers)
    assert (parse.status_code, parse.json()["error"]["code"]) == (200, -32700)
    unknown = rpc(replica.url, "DoSomething", {})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (200, -32601)
    bad = rpc(replica.url, "GetTask", {"id": 5, "historyLength": "many"})
    assert (bad.status_code, bad.json()["error"]["code"]) == (200, -32602)
    missing = rpc(replica.url, "GetTask", {"id": "no-such-task"})
    assert missing.json()["error"]["code"] == -32001
    assert rpc(replica.url, "CancelTask", {"id": "../../etc"}).json()["error"]["code"] == -32001
    version = rpc(replica.url, "GetTask", {"id": "x"}, headers={"A2A-Version": "2.0"})
    assert version.json()["error"]["code"] == -32009
    no_version = httpx.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}})
    assert no_version.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_oversized_requests_are_refused(replicas: Any) -> None:
    replica = replicas(build_support_agent, max_request_bytes=4096)
    big = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x" * 10_000}]}}
    refused = rpc(replica.url, "SendMessage", big)
    assert refused.status_code == 413
    assert "limit is 4096 bytes" in refused.json()["error"]["message"]

    def chunks() -> Any:  # no Content-Length: the limit still holds
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": '
        yield b"[" + b'"x",' * 3000 + b'"x"]}'

    chunked = httpx.post(replica.url + "/", content=chunks(), headers={"A2A-Version": "1.0"})
    assert chunked.status_code == 413
    assert rpc(replica.url, "GetTask", {"id": "x"}).json()["error"]["code"] == -32001


def test_bearer_auth_on_every_call_but_the_card(replicas: Any) -> None:
    replica = replicas(build_support_agent, token=TOKEN)
    assert httpx.get(replica.url + "/.well-known/agent-card.json").status_code == 200
    for token in (None, "wrong"):
        refused = rpc(replica.url, "ListTasks", {}, token=token)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
    sse = httpx.post(replica.url + "/", json={"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                                              "params": {"message": {"messageId": "m", "role": "ROLE_USER",
                                                                     "parts": [{"text": "hi"}]}}})
    assert sse.status_code == 401
    assert rpc(replica.url, "ListTasks", {}, token=TOKEN).status_code == 200

    async def streamed() -> list[Any]:
        async with official_client(replica.url, token=TOKEN) as client:
            return await send(client, user("authorized"))

    events = asyncio.run(streamed())
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_graph_target(replicas: Any) -> None:
    replica = replicas(build_graph, store=None, name="pipeline")
    async with official_client(replica.url, streaming=False) as client:
        task = await ask(client, user("write it"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "reviewed: ok"
