"""Fault injection on a real local Ray: kill -9 of actor processes at random moments.

Every run must end with the correct result or a clear typed error naming what died; no finished
work may be lost or duplicated; nothing may be left running.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ray_harness.types.exceptions import RemoteActorError

pytestmark = [pytest.mark.ray, pytest.mark.reliability, pytest.mark.usefixtures("ray_session")]

KILLS = int(os.environ.get("RAY_HARNESS_FAULT_KILLS", "10"))


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def _wait_for(predicate: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.02)


async def _stats_when_up(pool: Any) -> list[dict[str, Any]]:
    """Host stats once Ray finished restarting the host (calls fail with RemoteActorError meanwhile)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return list(await pool.stats())
        except RemoteActorError:
            assert time.monotonic() < deadline, "the host did not come back"
            await asyncio.sleep(0.2)


async def test_dedicated_agent_killed_mid_model_call_completes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    from ray_harness.runtime import RemoteAgent

    remote = RemoteAgent("tests.reliability.fault_targets:slow_model_agent", name="fault-model",
                         max_restarts=-1)
    try:
        for attempt in range(KILLS):
            pid = remote.info()["pid"]
            call = asyncio.create_task(remote.invoke_async(f"q{attempt}"))
            await asyncio.sleep(random.uniform(0.05, 0.4))  # somewhere inside the 0.6 s model call
            _kill(pid)
            result = await asyncio.wait_for(call, 60)
            assert str(result) == f"done: q{attempt}\n"
            assert remote.info()["pid"] != pid
        history = remote.messages
        prompts = [m["content"][0]["text"] for m in history if m["role"] == "user"]
        assert prompts == [f"q{i}" for i in range(KILLS)]  # each question once, in order: nothing duplicated
    finally:
        remote.shutdown()


async def test_pooled_host_killed_mid_tool_batch_gives_a_typed_error_then_recovers() -> None:
    from ray_harness.runtime import AgentPool

    pool = AgentPool(size=1, max_restarts=-1, namespace="ray_harness_faults_pool")
    try:
        for attempt in range(KILLS):
            pid = (await _stats_when_up(pool))[0]["pid"]
            run = asyncio.create_task(pool.run("tests.reliability.fault_targets:batch_agent", "go",
                                               run_id=f"batch-{attempt}"))
            await asyncio.sleep(random.uniform(0.2, 1.0))  # tool "a" done, tool "b" still running
            _kill(pid)
            with pytest.raises(RemoteActorError) as info:
                await asyncio.wait_for(run, 60)
            assert "ray_harness:host:0" in str(info.value) or info.value.actor_name == "ray_harness:host:0"
        await _stats_when_up(pool)
        healthy = await pool.run("tests.reliability.fault_targets:batch_agent", "go", run_id="after")
        assert str(healthy) == "got a,b\n"
    finally:
        pool.shutdown()


ROWS = 1000


def test_evaluation_host_killed_mid_dataset_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    import threading

    from ray_harness.evaluation import evaluate
    from ray_harness.runtime import AgentPool

    pool = AgentPool(size=2, max_restarts=-1, namespace="ray_harness_faults_eval")
    out = tmp_path / "rows.jsonl"
    # ≥ 1,000/16 × 0.15 s ≈ 9.4 s: time for several kills even when each host takes a second or two to come back
    # (400 rows left room for only two on a fast machine).
    rows = [{"prompt": f"r{i}"} for i in range(ROWS)]
    done = threading.Event()
    kills: list[int] = []

    def killer() -> None:
        from ray_harness.agent.agent import run_sync

        while len(kills) < KILLS:
            if done.wait(random.uniform(0.2, 0.6)):
                return
            try:
                stats = run_sync(pool.stats())
            except RemoteActorError:  # a host is still restarting from the previous kill: not a kill yet
                continue
            victim = random.choice(stats)["pid"]
            _kill(victim)
            kills.append(victim)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        summary = evaluate("tests.reliability.fault_targets:eval_row_agent", rows, concurrency=16, output=str(out),
                           pool=pool)
    finally:
        done.set()
        thread.join()
        pool.shutdown()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(kills) >= 3  # the faults really happened while rows were in flight
    assert sorted(r["index"] for r in records) == list(range(ROWS))  # none lost, none duplicated
    assert summary["errors"] == 0
    assert all(r["output"] == f"row r{r['index']}\n" for r in records)


