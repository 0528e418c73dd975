"""The context index and eviction of a task store shared by replicas: two stores open one backing store (a
directory or a moto S3 bucket), as two replicas do, and race where replicas race."""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ray_harness.serve import _blobs
from ray_harness.serve._blobs import open_repository
from ray_harness.serve._contexts import _INDEX_KEY, Conversations, _context_hash, _context_key, _enter
from ray_harness.serve._store import TaskRecords
from tests.serve.conftest import s3_bucket
from tests.serve.targets import build_chat_agent

_bucket_numbers = itertools.count()


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """A task store URL and its options: a directory, or a fresh bucket of the session's moto server."""
    if request.param == "file":
        return f"file://{tmp_path / 'tasks'}", {}
    bucket = f"context-index-{os.getpid()}-{next(_bucket_numbers)}"
    return f"s3://{bucket}/served", s3_bucket(request.getfixturevalue("moto_endpoint"), bucket)


def replica(store: tuple[str, dict[str, Any]], max_contexts: int, name: str) -> Conversations:
    url, options = store
    return Conversations(TaskRecords(open_repository(url, options), owner=name), max_contexts=max_contexts)


async def turn(conversations: Conversations, context_id: str, task_id: str, prompt: str) -> str:
    """One completed task in ``context_id``, as the executor runs it; the agent's answer ("turn N: ...")."""
    agent = build_chat_agent()
    await conversations.records.take_lease(task_id)  # the executor leases before it starts the turn
    started = await conversations.start(agent, context_id, task_id)
    assert started is not None
    result = await agent.invoke_async(prompt)
    await conversations.finish(agent, task_id, started)
    conversations.records.drop_local(task_id)
    return str(result).strip()


async def stored_turns(conversations: Conversations, context_id: str) -> int:
    raw = await conversations.records.read_blob(_context_key(context_id))
    if raw is None:
        return 0
    import json

    messages = json.loads(raw)["snapshot"]["messages"]
    return sum(1 for message in messages if message["role"] == "user")


def after_the_index_write(conversations: Conversations, race: Callable[[], Any]) -> list[bool]:
    """Run ``race`` (a coroutine function) once, just after ``conversations`` writes its index and before it
    deletes what that write evicted: the window another replica can hit."""
    records, raced = conversations.records, []
    write = records.update_blob_sync

    def write_then_race(key: str, fn: Callable[[bytes | None], bytes]) -> None:
        write(key, fn)
        if key == _INDEX_KEY and not raced:
            raced.append(True)
            asyncio.run(race())  # this is a store thread of the evicting replica: the other one runs meanwhile

    records.update_blob_sync = write_then_race  # type: ignore[method-assign]
    return raced


async def test_a_turn_that_continues_a_context_while_another_replica_evicts_it_is_kept(store: Any) -> None:
    first, second = replica(store, 1, "first"), replica(store, 1, "second")
    assert await turn(second, "kept", "t1", "hello") == "turn 1: hello"
    answers: list[str] = []

    async def continue_it() -> None:
        answers.append(await turn(second, "kept", "t2", "again"))

    raced = after_the_index_write(first, continue_it)
    # A task in a new context: beyond max_contexts=1, "kept" (idle until now) is the one to evict.
    await first.records.io(first._index, lambda index: _enter(index, _context_hash("other"), "t3"))
    assert raced and answers == ["turn 2: again"]  # the second replica continued the conversation ...
    assert await stored_turns(second, "kept") == 2  # ... and the eviction did not delete it under its turn


async def test_eviction_skips_a_context_a_task_entered_meanwhile(store: Any) -> None:
    first, second = replica(store, 1, "first"), replica(store, 1, "second")
    await turn(second, "kept", "t1", "hello")

    async def enter_it() -> None:
        await second.records.take_lease("t2")
        assert await second.start(build_chat_agent(), "kept", "t2") is not None  # and still running

    raced = after_the_index_write(first, enter_it)
    await first.records.io(first._index, lambda index: _enter(index, _context_hash("other"), "t3"))
    assert raced
    assert await stored_turns(first, "kept") == 1  # a third task in the context starts from its conversation
    assert await turn(first, "kept", "t4", "still there?") == "turn 2: still there?"


async def test_contexts_of_a_store_written_before_the_index_are_evicted_too(store: Any) -> None:
    old = replica(store, 1000, "old")
    for number in range(3):
        await turn(old, f"old {number}", f"t{number}", "hello")
    await old.records.delete_blob(_INDEX_KEY)  # the store as an older release left it: no index
    url, _ = store
    if url.startswith("file://"):  # last use as the file system says: "old 0" first
        root = Path(url.removeprefix("file://"))
        for number in range(3):
            os.utime(root / _context_key(f"old {number}"), (1_000_000 + number, 1_000_000 + number))

    upgraded = replica(store, 2, "upgraded")
    await turn(upgraded, "new", "t9", "hello")
    present = [name for name in ("old 0", "old 1", "old 2", "new") if await stored_turns(upgraded, name)]
    assert len(present) == 2 and "new" in present, present
    if url.startswith("file://"):
        assert present == ["old 2", "new"]  # the least recently modified went first


def test_an_s3_write_that_keeps_losing_backs_off_then_names_what_failed(store: Any) -> None:
    url, options = store
    if not url.startswith("s3://"):
        pytest.skip("compare-and-swap retries are S3's; a file store waits on a lock instead")
    import boto3

    repo = open_repository(url, options)
    rival = boto3.client("s3", **options)
    sleeps: list[float] = []
    swap = _blobs._Swap(repo, sleep=sleeps.append, random=lambda: 1.0)
    rounds = itertools.count()

    def lose(current: bytes | None) -> bytes:  # another replica writes between our read and our write
        rival.put_object(Bucket=repo.bucket, Key=repo._key(_INDEX_KEY), Body=f"rival {next(rounds)}".encode())
        return b"mine"

    with pytest.raises(_blobs.StoreContentionError, match=r"contexts/index\.json.* 8 attempts") as raised:
        swap.update(_INDEX_KEY, lose)
    assert "s3://" in str(raised.value)
    assert str(pickle.loads(pickle.dumps(raised.value))) == str(raised.value)  # Ray moves errors between processes
    assert sleeps == [min(1.0, 0.02 * 2 ** attempt) for attempt in range(7)]  # random()=1.0: the top of the jitter

    lost = threading.Event()

    def lose_once(current: bytes | None) -> bytes:
        if not lost.is_set():
            lost.set()
            rival.put_object(Bucket=repo.bucket, Key=repo._key(_INDEX_KEY), Body=b"rival")
        return b"mine after " + (current or b"")

    sleeps.clear()
    swap.update(_INDEX_KEY, lose_once)
    assert repo._read(_INDEX_KEY) == b"mine after rival" and sleeps == [0.02]


def test_backoff_is_jittered_and_capped() -> None:
    sleeps: list[float] = []
    draws = iter([0.0, 0.5] * 8)
    swap = _blobs._Swap(open_repository(None), sleep=sleeps.append, random=lambda: next(draws))
    for attempt in (0, 1, 10, 11):
        swap.backoff(attempt)
    # between half and all of min(1 s, 0.02 s * 2**attempt): racing replicas come back apart, never long
    assert sleeps == pytest.approx([0.01, 0.03, 0.5, 0.75])


def test_a_lock_file_goes_only_once_its_holder_let_go(tmp_path: Path) -> None:
    swap = _blobs._Swap(open_repository(f"file://{tmp_path}"))
    lock = tmp_path / "contexts" / "context_x.json.lock"
    with _blobs._file_lock(tmp_path / "contexts" / "context_x.json"):
        dropping = threading.Thread(target=swap.drop_lock, args=("contexts/context_x.json",))
        dropping.start()
        waiting_on(lock.stat().st_ino)  # drop_lock waits for this holder ...
        assert lock.exists()  # ... so a writer queued behind it never ends up on a second lock file
    dropping.join()
    assert not lock.exists()


def waiting_on(inode: int) -> None:
    """Return once a process or thread waits for a flock on ``inode`` (Linux lists waiters with ``->``)."""
    for _ in range(2000):
        with open("/proc/locks") as locks:
            waiters = [fields for fields in map(str.split, locks) if len(fields) > 6 and fields[1] == "->"]
        if any(fields[6].endswith(f":{inode}") for fields in waiters):
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"nobody waited for the lock on inode {inode}")
