"""AgentPool.run_batched on a real local Ray: runs started together share a host call, each keeps its own outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.testing import ModelCall, ScriptedModel, text

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@pytest.fixture(scope="module")
def pool(ray_session: Any) -> Iterator[Any]:
    from ray_harness.runtime import AgentPool

    created = AgentPool(size=2)
    yield created
    created.shutdown()


def _echo(call: ModelCall) -> Any:
    return text(f"echo {call.last_text}", delay=0.05)


def echo_agent() -> Agent:
    return Agent(ScriptedModel(_echo, loop=True), name="echo", retry_strategy=None)


async def test_runs_started_together_get_their_own_results(pool: Any) -> None:
    spec = pool.prepare(echo_agent)
    results = await asyncio.gather(*(pool.run_batched(spec, f"row {i}", run_id=f"batched-{i}") for i in range(200)))
    assert [str(result) for result in results] == [f"echo row {i}\n" for i in range(200)]
    assert all(host["running"] == 0 for host in await pool.stats())


async def test_an_error_fails_only_its_own_run(pool: Any) -> None:
    spec = pool.prepare(echo_agent)
    outcomes = await asyncio.gather(
        pool.run_batched(spec, "fine"),
        pool.run_batched("tests.integration.agents:broken_policy", "hi"),
        pool.run_batched("no_such_module:factory", "hi"),
        pool.run_batched(spec, "also fine"),
        return_exceptions=True,
    )
    assert str(outcomes[0]) == "echo fine\n" and str(outcomes[3]) == "echo also fine\n"
    assert isinstance(outcomes[1], RuntimeError) and "policy store is down" in str(outcomes[1])
    assert isinstance(outcomes[2], ModuleNotFoundError) and "no_such_module" in str(outcomes[2])


async def test_cancel_reaches_one_batched_run_and_the_batch_goes_on(pool: Any) -> None:
    spec = pool.prepare("tests.integration.agents:slow_model")
    quick = pool.prepare("tests.integration.agents:quick")
    slow = asyncio.create_task(pool.run_batched(spec, "wait", run_id="batched-slow"))
    neighbours = [asyncio.create_task(pool.run_batched(quick, f"n{i}")) for i in range(6)]
    assert {str(result) for result in await asyncio.wait_for(asyncio.gather(*neighbours), 120)} == {"quick\n"}
    await pool.cancel("batched-slow")
    cancelled = await asyncio.wait_for(slow, 120)  # its model would answer after 300 s
    assert cancelled.stop_reason == "cancelled"


async def test_a_caller_that_stops_waiting_leaves_the_other_runs_alone(pool: Any) -> None:
    spec = pool.prepare(echo_agent)
    abandoned = asyncio.create_task(pool.run_batched(spec, "gone"))
    kept = asyncio.create_task(pool.run_batched(spec, "kept"))
    await asyncio.sleep(0)
    abandoned.cancel()
    assert str(await asyncio.wait_for(kept, 120)) == "echo kept\n"
    with pytest.raises(asyncio.CancelledError):
        await abandoned


def _length(result: Any) -> int:
    return len(str(result))


async def test_a_digest_travels_instead_of_the_result(pool: Any) -> None:
    spec = pool.prepare(echo_agent)
    digests = await asyncio.gather(*(pool.run_batched(spec, "x" * i, digest=_length) for i in range(1, 4)))
    assert digests == [len(f"echo {'x' * i}\n") for i in range(1, 4)]

