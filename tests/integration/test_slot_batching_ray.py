"""Node slot runs started together go to their host in one streamed call; each keeps its stream, cancel, misses.

A pool of its own (one host, its own names): the host's call counts belong to these tests alone.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest
from ray import cloudpickle

from ray_harness import Agent, GraphBuilder, Status
from ray_harness.testing import ScriptedModel, text
from tests.integration import agents

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@pytest.fixture(scope="module")
def pool(ray_session: Any) -> Iterator[Any]:
    from ray_harness.runtime import AgentPool

    created = AgentPool(size=1, name_prefix="ray_harness:test-slot-batching:")
    yield created
    created.shutdown()


async def calls(pool: Any) -> dict[str, int]:
    """The host's streamed calls by method (and runs in ``stream_many`` calls); the groups they sent left out."""
    return {key: count for key, count in (await pool.stats())[0]["calls"].items() if key != "stream_many_groups"}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {key: after.get(key, 0) - before.get(key, 0) for key in after if after.get(key, 0) != before.get(key, 0)}


def request(node: str, slot: Any = None, run_id: str | None = None) -> Any:
    from ray_harness.runtime._wire import InvokeRequest, SlotSync

    return InvokeRequest(invocation_id=run_id or f"{node}-{uuid.uuid4().hex[:8]}", prompt=f"to {node}",
                         events="result", snapshot=True, agent_key=f"batching-{uuid.uuid4().hex[:8]}/{node}",
                         slot=slot or SlotSync())


async def results(stream: AsyncGenerator[Any, None]) -> list[Any]:
    from ray_harness.runtime._wire import ResultItem

    return [item.result async for item in stream if isinstance(item, ResultItem)]


def wide_graph(pool: Any, width: int) -> Any:
    from ray_harness.runtime.multiagent import RayRuntime

    builder = GraphBuilder()
    for i in range(width):
        builder.add_node(Agent(ScriptedModel(text(f"answer {i}"), loop=True), name=f"n{i}", retry_strategy=None),
                         f"n{i}")
    return builder.build(runtime=RayRuntime(pool=pool))


async def test_a_wide_graph_s_nodes_on_one_host_go_in_one_call_per_invocation(pool: Any) -> None:
    graph = wide_graph(pool, 6)
    try:
        before = await calls(pool)
        first = await graph.invoke_async("go")
        middle = await calls(pool)
        events = [event async for event in graph.stream_async("again")]  # streamed events too
        after = await calls(pool)
    finally:
        graph.shutdown()
    assert first.status == Status.COMPLETED and len(first.results) == 6
    assert delta(before, middle) == {"stream_many": 1, "stream_many_runs": 6}  # agents shipped in that call
    assert delta(middle, after) == {"stream_many": 1, "stream_many_runs": 6}
    streamed = [event for event in events if event.get("type") == "multiagent_node_stream"]
    assert {event["node_id"] for event in streamed} == {f"n{i}" for i in range(6)}
    final = events[-1]["result"]
    assert {node_id: str(result.result) for node_id, result in final.results.items()} == {
        f"n{i}": f"answer {i}\n" for i in range(6)}
    assert [str(m["content"][0]["text"]) for m in graph.nodes["n3"].executor.messages if m["role"] == "assistant"] \
        == ["answer 3", "answer 3"]  # each node's state came back to its own copy


async def test_cancel_reaches_one_run_in_a_batch_and_the_others_finish(pool: Any) -> None:
    slow, quick = agents.slow_model(), agents.quick()
    slow_request = request("slow")
    before = await calls(pool)
    streams = [pool.stream_slot(slow, slow_request, host=0),
               *(pool.stream_slot(quick, request(f"quick{i}"), host=0) for i in range(3))]
    tasks = [asyncio.ensure_future(results(stream)) for stream in streams]
    quick_results = await asyncio.wait_for(asyncio.gather(*tasks[1:]), 120)
    assert [str(result) for [result] in quick_results] == ["quick\n"] * 3
    await pool.cancel(slow_request.invocation_id)
    [cancelled] = await asyncio.wait_for(tasks[0], 120)  # its model would answer after 300 s
    assert cancelled.stop_reason == "cancelled"
    assert delta(before, await calls(pool)) == {"stream_many": 1, "stream_many_runs": 4}


async def test_a_stream_that_stops_early_cancels_only_its_run(pool: Any) -> None:
    slow, quick = agents.slow_model(), agents.quick()
    gone = asyncio.ensure_future(results(pool.stream_slot(slow, request("gone"), host=0)))
    kept = asyncio.ensure_future(results(pool.stream_slot(quick, request("kept"), host=0)))
    await asyncio.sleep(0.5)  # both sent (one call); the slow run is waiting for its model
    assert pool._slot_streams._pumps  # the batch in flight ...
    shipped = cloudpickle.loads(cloudpickle.dumps(pool))  # ... stays here when the pool ships with a graph
    assert not shipped._slot_streams._pumps and shipped.host_names == pool.host_names
    gone.cancel()
    [result] = await asyncio.wait_for(kept, 120)
    assert str(result) == "quick\n"
    with pytest.raises(asyncio.CancelledError):
        await gone
    deadline = asyncio.get_running_loop().time() + 120
    while (await pool.stats())[0]["running"]:  # the abandoned run was cancelled on the host (else: 300 s)
        assert asyncio.get_running_loop().time() < deadline, "the abandoned run kept running"
        await asyncio.sleep(0.1)


async def test_slot_misses_in_a_batch_are_sent_again_with_the_agent(pool: Any) -> None:
    from ray_harness.runtime._wire import SlotSync

    first, second = agents.quick(), agents.quick()
    requests = [request("a", SlotSync(revision=3)), request("b", SlotSync(revision=3))]  # slots the host lacks
    before = await calls(pool)
    answers = await asyncio.wait_for(asyncio.gather(
        results(pool.stream_slot(first, requests[0], host=0)),
        results(pool.stream_slot(second, requests[1], host=0))), 120)
    assert [str(result) for [result] in answers] == ["quick\n", "quick\n"]
    assert delta(before, await calls(pool)) == {"stream_many": 2, "stream_many_runs": 4}  # misses, then the runs
    for item in requests:
        info = await pool.slot_info(str(item.agent_key))
        assert info is not None and (info["builds"], info["runs"]) == (1, 1)
    await pool.release_slots(["batching-"])


async def test_an_error_fails_only_its_own_run_in_a_batch(pool: Any) -> None:
    from ray_harness.runtime._spec import agent_spec

    broken = agent_spec("tests.integration.agents:broken_policy")
    outcomes = await asyncio.gather(
        results(pool.stream_slot(agents.quick(), request("fine"), host=0)),
        results(pool._stream(broken, request("broken"), 0)),
        return_exceptions=True)
    assert [str(result) for result in outcomes[0]] == ["quick\n"]  # type: ignore[union-attr]
    assert isinstance(outcomes[1], RuntimeError) and "policy store is down" in str(outcomes[1])


async def test_a_host_killed_mid_batch_gets_every_run_of_the_batch_again(ray_session: Any) -> None:
    from ray_harness.runtime import AgentPool
    from ray_harness.runtime.multiagent import RayRuntime

    doomed = AgentPool(size=1, name_prefix="ray_harness:test-slot-batching-kill:", max_restarts=-1)
    builder = GraphBuilder()
    for i in range(3):
        model = ScriptedModel(text(f"answer {i}", delay=1.0), loop=True)
        builder.add_node(Agent(model, name=f"n{i}", retry_strategy=None), f"n{i}")
    graph = builder.build(runtime=RayRuntime(pool=doomed))
    try:
        run = asyncio.create_task(graph.invoke_async("go"))
        deadline = asyncio.get_running_loop().time() + 120
        while True:  # the three runs are on the host, in one call: a state, not a moment
            [host] = await doomed.stats()
            if host["running"] == 3:
                break
            assert asyncio.get_running_loop().time() < deadline and not run.done(), host
            await asyncio.sleep(0.02)
        assert host["calls"].get("stream_many_runs") == 3
        os.kill(host["pid"], signal.SIGKILL)
        result = await asyncio.wait_for(run, 120)
        assert result.status == Status.COMPLETED
        assert {node_id: str(item.result) for node_id, item in result.results.items()} == {
            f"n{i}": f"answer {i}\n" for i in range(3)}
        assert (await doomed.stats())[0]["pid"] != host["pid"]  # sent again to the restarted host
    finally:
        graph.shutdown()
        doomed.shutdown()
