"""What a task leaves in the task store, context eviction, and the shape of a resubscription, through the
official a2a-sdk client (two app instances over one file store stand in for two replicas; no Ray)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, SubscribeToTaskRequest, TaskState

from ray_harness.serve._contexts import _context_key
from ray_harness.serve._server import AppSettings
from tests.serve.a2a_client import answer, ask, in_context, official_client, result_text, send, user, working_task_id
from tests.serve.conftest import s3_bucket
from tests.serve.targets import build_chat_agent, build_support_agent

pytestmark = pytest.mark.timeout(240)


def stored_files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


async def test_a_cancelled_interrupted_task_leaves_only_its_record(replicas: Any, tmp_path: Path,
                                                                   refund_log: Path) -> None:
    first, second = replicas(build_chat_agent), replicas(build_chat_agent)
    root = tmp_path / "tasks"
    async with official_client(first.url, streaming=False) as one, \
            official_client(second.url, streaming=False) as two:
        # Cancelled on the replica that parked it, then through the other one (the SDK's remote cancel path).
        for canceller in (one, two):
            context = (await ask(one, user("hello"))).context_id
            paused = await ask(one, in_context("refund order X1", context))
            assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert any(paused.id in name for name in stored_files(root) if not name.startswith("tasks/"))
            cancelled = await canceller.cancel_task(CancelTaskRequest(id=paused.id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            left = {name for name in stored_files(root) if paused.id in name}
            assert left <= {f"tasks/task_{paused.id}.json", f"tasks/task_{paused.id}.json.lock"}, left
            # The context goes on from its conversation before the cancelled turn, which it never sees.
            follow = await ask(two, in_context("still there?", context))
            assert result_text(follow) == "turn 2: still there?"
    assert not await asyncio.to_thread(refund_log.exists)


async def test_a_completed_answer_leaves_no_interrupted_agent_behind(replicas: Any, tmp_path: Path,
                                                                     refund_log: Path) -> None:
    first, second = replicas(build_chat_agent), replicas(build_chat_agent)
    async with official_client(first.url, streaming=False) as one, \
            official_client(second.url, streaming=False) as two:
        paused = await ask(one, user("refund order Y2"))
        done = await ask(two, user(task_id=paused.id, data=answer(paused)))
        assert result_text(done) == "turn 1: Done: refunded Y2."
    left = {name for name in stored_files(tmp_path / "tasks") if paused.id in name}
    assert left <= {f"tasks/task_{paused.id}.json", f"tasks/task_{paused.id}.json.lock"}, left


def context_files(root: Path) -> set[str]:
    return {name for name in stored_files(root) if name.startswith("contexts/context_") and name.endswith(".json")}


async def test_least_recently_used_contexts_are_evicted_beyond_max_contexts(replicas: Any, tmp_path: Path) -> None:
    first, second = replicas(build_chat_agent, max_contexts=2), replicas(build_chat_agent, max_contexts=2)
    root = tmp_path / "tasks"
    async with official_client(first.url, streaming=False) as one, \
            official_client(second.url, streaming=False) as two:
        a = (await ask(one, user("a"))).context_id
        b = (await ask(two, user("b"))).context_id
        assert result_text(await ask(one, in_context("a again", a))) == "turn 2: a again"  # a is newer
        c = (await ask(two, user("c"))).context_id  # a third context: b, the least recently used, goes
        assert len(context_files(root)) == 2
        assert result_text(await ask(one, in_context("b again", b))) == "turn 1: b again"  # afresh
        assert result_text(await ask(two, in_context("c again", c))) == "turn 2: c again"
        assert len(context_files(root)) == 2


async def test_a_context_with_a_task_in_flight_is_never_evicted(replicas: Any, tmp_path: Path,
                                                                 refund_log: Path) -> None:
    first, second = replicas(build_chat_agent, max_contexts=1), replicas(build_chat_agent, max_contexts=1)
    async with official_client(first.url, streaming=False) as one, \
            official_client(second.url, streaming=False) as two:
        kept = (await ask(one, user("hello"))).context_id
        paused = await ask(one, in_context("refund order Z3", kept))  # waits for a human
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        for index in range(3):  # newer contexts come and go; the one waiting for input stays
            await send(two, user(f"other {index}"))
        assert context_files(tmp_path / "tasks") == {_context_key(kept)}
        done = await ask(two, user(task_id=paused.id, data=answer(paused)))
        assert result_text(done) == "turn 2: Done: refunded Z3."


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_max_contexts_is_validated(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_contexts"):
        AppSettings(name="x", description=None, version="1", auth_token=None, max_contexts=bad)


async def subscribe_while_running(replicas: Any, via_other: bool) -> list[Any]:
    first, second = replicas(build_support_agent), replicas(build_support_agent)
    async with official_client(first.url) as client_a, official_client(second.url) as client_b:
        stream = asyncio.create_task(send(client_a, user("slow 1")))
        task_id = await working_task_id(client_b)
        subscriber = client_b if via_other else client_a
        seen = [event async for event in subscriber.subscribe(SubscribeToTaskRequest(id=task_id))]
        await stream
    return seen


@pytest.mark.parametrize("via_other", [False, True], ids=["running-replica", "other-replica"])
async def test_a_resubscription_streams_updates_whichever_replica_serves_it(replicas: Any, via_other: bool) -> None:
    seen = await subscribe_while_running(replicas, via_other)
    kinds = [event.WhichOneof("payload") for event in seen]
    assert kinds[0] == "task"  # the task as it is now, then what happens to it
    assert seen[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert set(kinds[1:]) <= {"status_update", "artifact_update"}, kinds
    assert "artifact_update" in kinds
    artifact = [event.artifact_update for event in seen if event.WhichOneof("payload") == "artifact_update"][-1]
    assert (artifact.artifact.name, artifact.artifact.parts[0].text) == ("result", "Done: waited 1.0.")
    assert artifact.last_chunk and not artifact.append
    assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert kinds.index("artifact_update") < len(kinds) - 1


def test_eviction_skips_busy_contexts_and_releases_ones_whose_tasks_ended() -> None:
    from ray_harness.serve._contexts import _evict

    index = {"clock": 4, "contexts": {
        "oldest": {"used": 1, "tasks": ["lost"]},  # its replica died: the task is no longer in flight
        "older": {"used": 2, "tasks": ["waiting"]},  # INPUT_REQUIRED: in flight
        "old": {"used": 3, "tasks": []},
        "new": {"used": 4, "tasks": ["running"]}}}
    evicted = _evict(index, 2, lambda task_id: task_id != "lost")
    assert evicted == ["oldest", "old"]
    assert list(index["contexts"]) == ["older", "new"]


async def test_a_cancelled_interrupted_task_in_an_s3_store_leaves_only_its_record(
        replicas: Any, moto_endpoint: str, refund_log: Path) -> None:
    import boto3

    options = await asyncio.to_thread(s3_bucket, moto_endpoint, "a2a-cancel")
    s3 = boto3.client("s3", **options)
    first = replicas(build_chat_agent, store="s3://a2a-cancel/served", store_options=options)
    second = replicas(build_chat_agent, store="s3://a2a-cancel/served", store_options=options)
    async with official_client(first.url, streaming=False) as one, \
            official_client(second.url, streaming=False) as two:
        paused = await ask(one, user("refund order S9"))
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        cancelled = await two.cancel_task(CancelTaskRequest(id=paused.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    listed = await asyncio.to_thread(s3.list_objects_v2, Bucket="a2a-cancel", Prefix="served/")
    keys = {item["Key"] for item in listed.get("Contents", [])}
    assert {key for key in keys if paused.id in key} == {f"served/tasks/task_{paused.id}.json"}, keys
