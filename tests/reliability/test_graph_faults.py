"""kill -9 of a host actor while a Graph batch runs on it (runtime="ray")."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ray_harness.types.exceptions import RemoteActorError
from tests.reliability.fault_targets import handing_tool_node, slow_node, tool_node

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


async def test_host_killed_mid_graph_batch_the_graph_completes() -> None:
    """A killed host's node is sent again to the restarted host: every run completes (the model call re-runs)."""
    from ray_harness.multiagent import Status
    kills = 0
    for _ in range(KILLS):
        await _host_stats()  # the hosts are up (again)
        graph = _graph()
        run = asyncio.create_task(graph.invoke_async("go"))
        busy = await _busy_host_pids(run)  # inside the left/right batch (0.6 s model calls)
        await asyncio.sleep(random.uniform(0.0, 0.2))
        if busy and not run.done():
            os.kill(random.choice(busy), signal.SIGKILL)
            kills += 1
        result = await asyncio.wait_for(run, 120)
        assert result.status == Status.COMPLETED, {node: str(item.result) for node, item in result.results.items()}
        assert [str(result.results[node].result).strip() for node in ("left", "right", "join")] == [
            "left done", "right done", "join done"]
        graph.shutdown()
    assert kills > 0  # the faults really hit running nodes


def _starts(marks: Path, label: str) -> list[int]:
    """The pids of the processes that started tool ``label`` (one file per start)."""
    return [int(path.read_text()) for path in marks.glob(f"{label}-*")]


def _file_exists(path: str) -> bool:
    return Path(path).exists()


def _all_starts(marks: Path) -> list[str]:
    return sorted(path.name.split("-")[0] for path in marks.iterdir())


def _outcome(result: Any) -> dict[str, str]:
    return {node: f"{item.status}: {item.result}" for node, item in result.results.items()}


async def _journal(graph: Any, node_id: str) -> str | None:
    """The path of the node slot's journal, as its host reports it (``None``: nothing written yet)."""
    from ray_harness.runtime._multiagent_pool import default_pool

    info = await default_pool().slot_info(graph.node_runner.slot_key(node_id))
    return None if info is None else info["journal"]


async def test_host_killed_mid_tool_batch_completed_tools_do_not_run_again(tmp_path: Path) -> None:
    """kill -9 while tool "b" runs and "a" is done: the node's slot is re-created from its journal."""
    from ray_harness.multiagent import GraphBuilder, Status

    for attempt in range(max(1, KILLS // 5)):
        marks = tmp_path / f"marks-{attempt}"
        marks.mkdir()
        builder = GraphBuilder()
        builder.add_node(tool_node(str(marks)), "tools")
        graph = builder.build(runtime="ray")
        await _host_stats()
        run = asyncio.create_task(graph.invoke_async("go"))
        deadline = time.monotonic() + 120
        # "a" finished and its result is journaled (the first write), "b" is running: a state, not a moment
        while not (_starts(marks, "b") and (journal := await _journal(graph, "tools"))):
            assert not run.done(), f"ended before the kill: {_outcome(run.result())}, starts {_all_starts(marks)}"
            assert time.monotonic() < deadline, "the tool batch never started"
            await asyncio.sleep(0.02)
        (pid,) = _starts(marks, "b")
        os.kill(pid, signal.SIGKILL)
        result = await asyncio.wait_for(run, 120)
        assert result.status == Status.COMPLETED, str(result.results["tools"].result)
        assert str(result.results["tools"].result).strip() == "got a,b"
        assert len(_starts(marks, "a")) == 1  # the completed tool never ran again
        assert len(_starts(marks, "b")) >= 2  # the running one ran again (at-least-once)
        history = graph.nodes["tools"].executor.messages
        assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
        graph.shutdown()
        assert journal and not _file_exists(journal)  # a released slot leaves no journal


async def _orchestration_host_pids() -> list[int]:
    """The orchestration hosts' pids (waits for a host Ray is restarting)."""
    from ray_harness.runtime._multiagent_pool import orchestration_pool

    return [(await host.ready.remote())["pid"] for host in orchestration_pool(check=False).hosts]


async def _run_killing_the_orchestration_host(orchestrator: Any, node_id: str) -> tuple[list[str], Any]:
    """Stream a run; kill -9 the orchestration hosts somewhere in ``node_id``'s 0.6 s model call.

    Returns the node stops and handoffs the caller saw (in order) and the run's result.
    """
    await _host_stats()
    pids = await _orchestration_host_pids()
    seen: list[str] = []
    event: dict[str, Any] = {}
    async for event in orchestrator.stream_async("go"):
        if event["type"] in ("multiagent_node_stop", "multiagent_handoff"):
            seen.append(event.get("node_id") or f"handoff to {','.join(event['to_node_ids'])}")
        if event["type"] == "multiagent_node_start" and event["node_id"] == node_id and pids:
            await asyncio.sleep(random.uniform(0.0, 0.4))
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            pids = []
    assert not pids, f"{node_id} never started"
    return seen, event["result"]


async def test_orchestration_host_killed_mid_graph_the_run_is_sent_again_and_completes(tmp_path: Path) -> None:
    """kill -9 of the orchestration host while a graph's second node runs: the driver sends the run again.

    The run completes; the first node (finished before the kill) and its tools do not run again; no node run is
    reported twice.
    """
    from ray_harness.multiagent import GraphBuilder, Status

    for attempt in range(KILLS):
        marks = tmp_path / f"marks-{attempt}"
        marks.mkdir()
        builder = GraphBuilder()
        builder.add_node(tool_node(str(marks), "first", b_seconds=0.05), "first")
        builder.add_node(slow_node("second"), "second")
        builder.add_edge("first", "second")
        graph = builder.build(runtime="ray")
        seen, result = await _run_killing_the_orchestration_host(graph, "second")
        assert result.status == Status.COMPLETED, _outcome(result)
        assert [str(result.results[n].result).strip() for n in ("first", "second")] == ["got a,b", "second done"]
        assert seen == ["first", "handoff to second", "second"]
        assert _all_starts(marks) == ["a", "b"]  # the first node's tools ran once
        assert [len(graph.nodes[n].executor.messages) for n in ("first", "second")] == [4, 2]
        graph.shutdown()


async def test_orchestration_host_killed_mid_swarm_the_run_is_sent_again_and_completes(tmp_path: Path) -> None:
    """kill -9 of the orchestration host while a swarm's second member runs: the run is sent again and completes.

    The first member (its tools, then a handoff) finished before the kill: its tools do not run again, and the
    swarm hands off again from the events its slot replays; no member run or handoff is reported twice.
    """
    from ray_harness.multiagent import Status, Swarm

    for attempt in range(max(1, KILLS // 2)):
        marks = tmp_path / f"marks-{attempt}"
        marks.mkdir()
        swarm = Swarm([handing_tool_node(str(marks), "first", "second"), slow_node("second")], runtime="ray")
        seen, result = await _run_killing_the_orchestration_host(swarm, "second")
        assert result.status == Status.COMPLETED, _outcome(result)
        assert [node.node_id for node in result.node_history] == ["first", "second"]
        assert seen == ["first", "handoff to second", "second"]
        assert _all_starts(marks) == ["a", "b"]  # the first member's tools ran once
        swarm.shutdown()


async def test_orchestration_host_killed_while_a_remote_agent_node_runs_the_run_completes(tmp_path: Path) -> None:
    """kill -9 of the orchestration host while a graph's ``RemoteAgent`` node runs its tools: the run completes.

    The re-sent request reaches the actor while the lost invocation of the same id may still run there: it waits
    for it and gets its result, or continues it from the journal. Completed tools never run again (the one running
    at the kill may: at-least-once); the actor's history has the run's turn once.
    """
    from ray_harness.multiagent import GraphBuilder, Status
    from ray_harness.runtime import RemoteAgent

    for attempt in range(max(1, KILLS // 2)):
        first_marks, second_marks = tmp_path / f"first-{attempt}", tmp_path / f"second-{attempt}"
        first_marks.mkdir()
        second_marks.mkdir()
        remote = RemoteAgent(tool_node(str(second_marks), "second", b_seconds=2.5))  # still running at the re-send
        builder = GraphBuilder()
        builder.add_node(tool_node(str(first_marks), "first", b_seconds=0.05), "first")
        builder.add_node(remote, "second")
        builder.add_edge("first", "second")
        graph = builder.build(runtime="ray")
        try:
            seen, result = await _run_killing_the_orchestration_host(graph, "second")
            assert result.status == Status.COMPLETED, _outcome(result)
            assert [str(result.results[n].result).strip() for n in ("first", "second")] == ["got a,b"] * 2
            assert seen == ["first", "handoff to second", "second"]
            assert _all_starts(first_marks) == ["a", "b"]  # the slot's node did not run again
            assert len(_starts(second_marks, "a")) == 1  # completed before the kill or not started: once
            assert 1 <= len(_starts(second_marks, "b")) <= 2, _all_starts(second_marks)
            assert [m["role"] for m in await remote.get_messages_async()] == ["user", "assistant"] * 2
        finally:
            graph.shutdown()
            remote.shutdown()
