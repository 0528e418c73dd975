"""``ray_harness.serve`` on real Ray Serve (the local Ray of the integration session): one app, two replicas,
a file task store and a bearer token, shared by every test here; plus ``ray-harness serve`` in a subprocess.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, ListTasksRequest, TaskState

from ray_harness import serve as rh_serve
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
from tests.serve.conftest import TOKEN, free_port, rpc
from tests.serve.targets import REFUND_LOG_ENV
from tests.signals import default_sigint

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session"), pytest.mark.timeout(600)]

APP = "support"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("served")
    log = root / "refunds.log"
    application = rh_serve.app(
        "tests.serve.targets:build_support_agent", name=APP, num_replicas=2, task_store=f"file://{root / 'tasks'}",
        auth_token=TOKEN, lease_seconds=5.0,
        ray_actor_options={"runtime_env": {"env_vars": {REFUND_LOG_ENV: str(log)}}})
    port = free_port()
    handle = rh_serve.run(application, host="127.0.0.1", port=port, route_prefix="/support")
    try:
        yield {"handle": handle, "url": handle.url.rstrip("/"), "port": port, "log": log}
    finally:
        handle.shutdown()


def _replica_handles() -> list[Any]:
    import ray

    names = [item for item in ray.util.list_named_actors(all_namespaces=True)
             if "SERVE_REPLICA" in item["name"] and f"::{APP}#" in item["name"]]
    handles = []
    for item in names:
        # A killed replica can still be listed while Serve replaces it; it is gone by the lookup.
        with contextlib.suppress(ValueError):
            handles.append(ray.get_actor(item["name"], namespace=item["namespace"]))
    return handles


def _wait_running(url: str, replicas: int = 2) -> None:
    from ray import serve

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status = serve.status().applications.get(APP)
        if status is not None and status.status == "RUNNING":
            counts = [d.replica_states.get("RUNNING", 0) for d in status.deployments.values()]
            if counts and counts[0] >= replicas and len(_replica_handles()) >= replicas:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/.well-known/agent-card.json", timeout=5).status_code == 200:
                        return
        time.sleep(0.5)
    raise AssertionError(f"app {APP} did not come back: {serve.status().applications.get(APP)}")


def test_card_send_stream_get_list_cancel(served: dict[str, Any]) -> None:
    url = served["url"]

    async def scenario() -> None:
        card = await fetch_card(url)
        assert card.name == APP
        assert card.supported_interfaces[0].url == url + "/"  # Serve's route prefix is in the card
        async with official_client(url, token=TOKEN, streaming=False) as client, \
                official_client(url, token=TOKEN) as streaming:
            task = await ask(client, user("over serve"))
            assert (task.status.state, task.artifacts[0].parts[0].text) == \
                (TaskState.TASK_STATE_COMPLETED, "echo: over serve")
            events = await send(streaming, user("streamed over serve"))
            assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
            fetched = await client.get_task(GetTaskRequest(id=task_id_of(events)))
            assert fetched.artifacts[0].parts[0].text == "echo: streamed over serve"
            listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
            assert [t.id for t in listed.tasks] == [task.id]
            slow = asyncio.create_task(send(streaming, user("slow 120")))
            task_id = await working_task_id(client)
            cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))  # whichever replica gets it
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            final = await wait_for_state(client, task_id, {"TASK_STATE_CANCELED"}, timeout=120)
            assert final.status.state == TaskState.TASK_STATE_CANCELED
            with contextlib.suppress(Exception):
                await asyncio.wait_for(slow, 60)

    asyncio.run(scenario())


def test_interrupt_answered_after_the_replicas_are_killed(served: dict[str, Any]) -> None:
    import ray

    url, log = served["url"], served["log"]

    async def ask_for_a_refund() -> Any:
        async with official_client(url, token=TOKEN, streaming=False) as client:
            return await ask(client, user("refund order K1"))

    paused = asyncio.run(ask_for_a_refund())
    assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    killed = _replica_handles()
    assert len(killed) == 2
    for replica in killed:  # the one that served the task, and the other one
        ray.kill(replica, no_restart=False)
    _wait_running(url)

    async def resume() -> Any:
        async with official_client(url, token=TOKEN, streaming=False) as client:
            stored = await client.get_task(GetTaskRequest(id=paused.id))
            assert stored.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            return await ask(client, user(task_id=paused.id, data=answer(stored)))

    done = asyncio.run(resume())
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "Done: refunded K1."
    assert Path(log).read_text() == "K1\n"  # the tool ran once, after the answer


def test_auth_and_malformed_requests_through_the_proxy(served: dict[str, Any]) -> None:
    url = served["url"]
    _wait_running(url)  # the replicas an earlier test killed are back
    assert httpx.get(url + "/.well-known/agent-card.json", timeout=60).status_code == 200
    assert rpc(url, "ListTasks", {}).status_code == 401
    assert rpc(url, "ListTasks", {}, token="wrong").status_code == 401
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    parse = httpx.post(url + "/", content=b"[[[", headers=headers, timeout=60)
    assert (parse.status_code, parse.json()["error"]["code"]) == (200, -32700)
    assert rpc(url, "NoSuchMethod", {}, token=TOKEN).json()["error"]["code"] == -32601
    assert rpc(url, "GetTask", {"id": "missing"}, token=TOKEN).json()["error"]["code"] == -32001
    big = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x" * (2 << 20)}]}}
    assert rpc(url, "SendMessage", big, token=TOKEN).status_code == 413
    assert rpc(url, "ListTasks", {}, token=TOKEN).status_code == 200


def test_a2a_agent_against_serve(served: dict[str, Any]) -> None:
    _wait_running(served["url"])
    remote = rh_serve.A2AAgent(served["url"], auth_token=TOKEN)
    assert remote("hi there").text == "echo: hi there"
    paused = remote("refund order R2")
    assert paused.stop_reason == "interrupt"
    done = remote([{"interruptResponse": {"interruptId": paused.interrupts[0].id, "response": "yes"}}])
    assert done.text == "Done: refunded R2."


def test_a_context_is_one_conversation_on_two_replicas(served: dict[str, Any], tmp_path: Path) -> None:
    application = rh_serve.app("tests.serve.targets:build_chat_agent", name="chat", num_replicas=2,
                               task_store=f"file://{tmp_path / 'tasks'}")
    handle = rh_serve.run(application, host="127.0.0.1", port=served["port"], route_prefix="/chat")

    async def talk() -> list[str]:
        async with official_client(handle.url.rstrip("/"), streaming=False) as client:
            context = (await ask(client, user("one"))).context_id
            said = []
            for word in ("two", "three", "four", "five"):
                request = user(word)
                request.message.context_id = context
                said.append((await ask(client, request)).artifacts[0].parts[0].text)
            return said

    try:
        assert asyncio.run(talk()) == ["turn 2: two", "turn 3: three", "turn 4: four", "turn 5: five"]
    finally:
        handle.shutdown()


def test_cancel_eviction_and_resubscription_on_two_replicas(served: dict[str, Any], tmp_path: Path) -> None:
    from a2a.types.a2a_pb2 import SubscribeToTaskRequest

    root = tmp_path / "tasks"
    application = rh_serve.app("tests.serve.targets:build_support_agent", name="lifecycle", num_replicas=2,
                               task_store=f"file://{root}", max_contexts=1)
    handle = rh_serve.run(application, host="127.0.0.1", port=served["port"], route_prefix="/lifecycle")

    def files() -> set[str]:
        return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}

    async def scenario() -> None:
        url = handle.url.rstrip("/")
        async with official_client(url, streaming=False) as client, official_client(url) as streaming:
            paused = await ask(client, user("refund order L1"))
            assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            cancelled = await client.cancel_task(CancelTaskRequest(id=paused.id))  # whichever replica gets it
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            assert {name for name in files() if paused.id in name} <= {
                f"tasks/task_{paused.id}.json", f"tasks/task_{paused.id}.json.lock"}
            for word in ("a", "b", "c"):  # one context kept: the least recently used go
                await send(client, user(word))
            assert len([name for name in files() if name.startswith("contexts/context_")
                        and name.endswith(".json")]) == 1
            running = asyncio.create_task(send(streaming, user("slow 2")))
            task_id = await working_task_id(client)
            seen = [event async for event in streaming.subscribe(SubscribeToTaskRequest(id=task_id))]
            await running
        kinds = [event.WhichOneof("payload") for event in seen]
        assert kinds[0] == "task" and set(kinds[1:]) <= {"status_update", "artifact_update"}, kinds
        assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

    try:
        asyncio.run(scenario())
    finally:
        handle.shutdown()


def test_cli_serves_in_a_subprocess(served: dict[str, Any], ray_session: dict[str, Any]) -> None:
    from ray import serve

    port = served["port"]  # one HTTP proxy per cluster: the CLI app joins it at "/"
    env = {**os.environ, "RAY_ADDRESS": ray_session["gcs_address"], "CLI_TOKEN": "cli-token",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-m", "ray_harness.cli", "serve", "tests.serve.targets:build_plain_agent", "--port",
         str(port), "--name", "cli_plain", "--auth-token-env", "CLI_TOKEN"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=default_sigint)
    try:
        assert process.stdout is not None
        before: list[str] = []
        banner = process.stdout.readline()
        while banner and not banner.startswith("serving"):
            before.append(banner)
            banner = process.stdout.readline()
        assert banner.startswith(f"serving cli_plain over A2A at http://127.0.0.1:{port}/"), banner
        # Ray Serve's INFO lines in the command's process ("Application 'cli_plain' is ready at ...") stay out.
        assert not [line for line in before if " serve " in line and "INFO" in line], before
        remote = rh_serve.A2AAgent(f"http://127.0.0.1:{port}", auth_token="cli-token")
        assert remote.name == "cli_plain"
        assert remote("from the cli").text == "echo: from the cli"
        process.send_signal(signal.SIGINT)
        assert process.wait(120) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert "cli_plain" not in serve.status().applications
    assert APP in serve.status().applications  # the other app is untouched


def test_cli_rejects_a_bad_target_before_starting_ray() -> None:
    result = subprocess.run([sys.executable, "-m", "ray_harness.cli", "serve", "no_such_module:build"],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "RAY_ADDRESS": "127.0.0.1:1"})
    assert result.returncode == 2
    assert "no_such_module" in result.stderr
