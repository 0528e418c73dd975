"""kill -9 of a host actor while a Graph batch runs on it (runtime="ray")."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from typing import Any

import pytest

from ray_harness.types.exceptions import RemoteActorError
from tests.integration.conftest import ray_session  # noqa: F401 - the shared session Ray
from tests.reliability.fault_targets import slow_node

pytestmark = [pytest.mark.ray, pytest.mark.reliability, pytest.mark.usefixtures("ray_session")]

KILLS = int(os.environ.get("RAY_HARNESS_FAULT_KILLS", "10"))


async def _host_stats() -> list[dict[str, Any]]:
    from ray_harness.runtime._multiagent_pool import default_pool

    deadline = time.monotonic() + 60
    while True:
        try:
            return list(await default_pool().stats())
        except RemoteActorError:
            assert time.monotonic() < deadline, "hosts did not come back"
            await asyncio.sleep(0.2)


async def _busy_host_pids(run: asyncio.Task[Any]) -> list[int]:
    """The pids of the hosts running a node of ``run`` right now (a state, not a guess at a moment)."""
    deadline = time.monotonic() + 120
    while True:
        busy = [host["pid"] for host in await _host_stats() if host["running"]]
        if busy or run.done():
            return busy
        assert time.monotonic() < deadline, "no node of the graph ever started on a host"
        await asyncio.sleep(0.02)


def _graph() -> Any:
    from ray_harness.multiagent import GraphBuilder

    builder = GraphBuilder()
    for name in ("left", "right", "join"):
        builder.add_node(slow_node(name), name)
    builder.add_edge("left", "join")
    builder.add_edge("right", "join")
    return builder.set_join("all").set_failure_policy("continue").build(runtime="ray")


async def test_host_killed_mid_graph_batch() -> None:
    from ray_harness.multiagent import Status
    outcomes = []
    for _ in range(KILLS):
        await _host_stats()  # the hosts are up (again)
        run = asyncio.create_task(_graph().invoke_async("go"))
        busy = await _busy_host_pids(run)  # inside the left/right batch (0.6 s model calls)
        await asyncio.sleep(random.uniform(0.0, 0.2))
        if busy:
            os.kill(random.choice(busy), signal.SIGKILL)
        result = await asyncio.wait_for(run, 120)
        outcomes.append(result.status)
        if result.status == Status.COMPLETED:
            assert str(result.results["join"].result).strip().endswith("join done")
            continue
        assert result.status == Status.FAILED
        failed = [node for node, item in result.results.items() if item.status == Status.FAILED]
        assert failed and set(failed) <= {"left", "right"}
        for node in failed:
            message = str(result.results[node].result)
            assert "ray_harness:host:" in message  # the error names what died
        survivors = {"left", "right"} - set(failed)
        for node in survivors:  # completed work in the same batch is kept
            assert result.results[node].status == Status.COMPLETED
        assert result.results["join"].status == Status.CANCELLED  # pruned, not run on partial inputs
    assert Status.FAILED in outcomes  # the faults really hit running nodes
