"""AgentPool / AgentHost on a real local Ray: many runs per host, cancel of one run, broadcasts."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text
from tests.integration import agents

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@pytest.fixture(scope="module")
def pool(ray_session: Any) -> Iterator[Any]:
    from ray_harness.runtime import AgentPool

    created = AgentPool(size=2)
    yield created
    created.shutdown()


def test_the_driver_and_every_ray_process_share_one_state_dir(ray_session: Any) -> None:
    """One ``ray_session`` for the whole test session: a second instance (a module importing the fixture)
    would point the driver's RAY_HARNESS_STATE_DIR away from the one the raylet, so every host, started with."""
    import ray

    @ray.remote(num_cpus=0)
    def state_dir() -> str | None:
        return os.environ.get("RAY_HARNESS_STATE_DIR")

    assert ray.get(state_dir.remote()) == os.environ["RAY_HARNESS_STATE_DIR"] == ray_session["state_dir"]


async def _wait_running(pool: Any, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while sum(host["running"] for host in await pool.stats()) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {count} runs started")
        await asyncio.sleep(0.02)


async def test_runs_an_agent_by_value_and_by_factory(pool: Any) -> None:
    by_factory = await pool.run("tests.integration.agents:calculator", "2+3?", run_id="factory-run")
    by_value = await pool.run(Agent(ScriptedModel(text("by value")), name="valued"), "hi")
    by_callable = await pool.run(agents.calculator, "2+3?")
    assert (str(by_factory), str(by_value), str(by_callable)) == ("5\n", "by value\n", "5\n")


async def test_many_concurrent_runs_share_the_hosts(pool: Any, tmp_path: Path) -> None:
    spec = pool.prepare("tests.integration.agents:meeting")
    directory = str(tmp_path)
    results = await asyncio.gather(*(pool.run(spec, f"{directory}|run{i}|60") for i in range(60)))
    # Each run's model call waited until all 60 had started: they ran at once, spread over both hosts.
    assert {str(r) for r in results} == {"met\n"}
    assert len(set(agents.party_pids(directory).values())) == 2


async def test_cancel_one_pooled_run_leaves_the_others_alone(pool: Any, tmp_path: Path) -> None:
    slow = asyncio.create_task(pool.run("tests.integration.agents:slow_model", "wait", run_id="to-cancel"))
    tool = asyncio.create_task(pool.run("tests.integration.agents:slow_tool", "wait", run_id="tool-to-cancel"))
    # The neighbours wait for a fifth party (this test, after the cancels): they are certainly running when the
    # cancels arrive, however slowly the machine starts them.
    neighbours = [asyncio.create_task(pool.run("tests.integration.agents:meeting", f"{tmp_path}|n{i}|5"))
                  for i in range(4)]
    await _wait_running(pool, 6)
    await pool.cancel("to-cancel")
    await pool.cancel("tool-to-cancel")
    cancelled = await asyncio.wait_for(slow, 120)  # the model and the tool would take 300 s
    tool_cancelled = await asyncio.wait_for(tool, 120)
    assert (cancelled.stop_reason, str(cancelled)) == ("cancelled", "Cancelled by user\n")
    assert tool_cancelled.stop_reason == "cancelled"
    assert not any(task.done() for task in neighbours)
    (tmp_path / "test").write_text("0")  # the fifth party
    assert [str(r) for r in await asyncio.gather(*neighbours)] == ["met\n"] * 4


async def test_cancel_all_broadcasts_to_every_host(pool: Any) -> None:
    ids = [f"bulk-{i}" for i in range(20)]
    runs = [asyncio.create_task(pool.run("tests.integration.agents:slow_model", "wait", run_id=i)) for i in ids]
    await _wait_running(pool, 20)
    assert {host["running"] > 0 for host in await pool.stats()} == {True}
    await pool.cancel_all(ids)
    results = await asyncio.wait_for(asyncio.gather(*runs), 120)  # the models would answer after 300 s
    assert {r.stop_reason for r in results} == {"cancelled"}


async def test_a_cancel_that_overtakes_its_run_still_lands(pool: Any) -> None:
    handle = pool.run_handle(["early-bird"])
    await handle.cancel()  # the run has not started anywhere yet: every host remembers the id
    result = await asyncio.wait_for(pool.run("tests.integration.agents:slow_model", "wait", run_id="early-bird"), 120)
    assert result.stop_reason == "cancelled"


async def test_run_handle_reaches_dedicated_actors_and_pooled_slots(pool: Any) -> None:
    from ray_harness.runtime import RemoteAgent, RunHandle

    remote = RemoteAgent("tests.integration.agents:slow_model", name="handle-member")
    try:
        dedicated = asyncio.create_task(remote.invoke_async("wait"))
        pooled = asyncio.create_task(pool.run("tests.integration.agents:slow_model", "wait", run_id="handle-pooled"))
        await _wait_running(pool, 1)
        deadline = time.monotonic() + 20
        while not remote.info()["busy"] and time.monotonic() < deadline:  # noqa: ASYNC110 - polling another process
            await asyncio.sleep(0.02)
        handle = RunHandle("graph-1")
        handle.add_agent(remote)
        slot = pool.slot_of("handle-pooled")
        assert slot is not None
        handle.add_pool_run(slot[0], slot[1], "handle-pooled")
        assert await handle.cancel() == 2
        results = await asyncio.wait_for(asyncio.gather(dedicated, pooled), 120)
        assert [r.stop_reason for r in results] == ["cancelled", "cancelled"]
    finally:
        remote.shutdown()


async def test_resident_agents_keep_their_history(pool: Any) -> None:
    source = Agent(ScriptedModel(text("one"), text("two")), name="resident")
    first = await pool.run(source, "first", agent_key="chat-1")
    second = await pool.run(source, "second", agent_key="chat-1")
    assert (str(first), str(second)) == ("one\n", "two\n")
    assert len(await pool.resident_messages("chat-1")) == 4
    assert await pool.release("chat-1") is True


async def test_streaming_from_a_pooled_host(pool: Any) -> None:
    kinds = [event["type"] async for event in pool.stream("tests.integration.agents:streaming", "2+2?")]
    assert kinds[-1] == "result"
    assert kinds.count("text_delta") == 4


async def test_a_quiet_pooled_stream_sends_only_the_result(pool: Any) -> None:
    loud = [event async for event in pool.stream("tests.integration.agents:calculator", "2+2?")]
    quiet = [event async for event in pool.stream("tests.integration.agents:calculator", "2+2?", events="result")]
    assert "tool_result" in {event["type"] for event in loud}
    assert [event["type"] for event in quiet] == ["result"]
    assert str(quiet[0]["result"]) == str(loud[-1]["result"])


async def test_errors_keep_their_type_across_the_pool(pool: Any) -> None:
    with pytest.raises(RuntimeError, match="policy store is down"):
        await pool.run("tests.integration.agents:broken_policy", "hi")
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        await pool.run("no_such_module:factory", "hi")


async def test_a_restarted_host_keeps_the_rate_limits_registered_in_it(ray_session: Any) -> None:
    import os
    import signal
    import uuid

    from ray_harness.models.rate_limit import RateLimit
    from ray_harness.runtime import AgentPool

    own = AgentPool(size=1, namespace=f"ray_harness_limits_{uuid.uuid4().hex[:6]}")
    try:
        key = f"scripted:limited-{uuid.uuid4().hex[:6]}"  # registered in the host only, never in this driver
        await own.register_rate_limits({key: RateLimit(requests_per_minute=60)})
        (before,) = await own.stats()
        assert key in before["rate_limits"]  # beside any limits this driver forwards to the actors it starts
        os.kill(before["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 120
        while True:  # the same host, restarted by Ray in a new process
            try:
                (after,) = await own.stats()
                if after["pid"] != before["pid"]:
                    break
            except Exception:  # unavailable while Ray restarts it
                pass
            assert time.monotonic() < deadline, "the host was not restarted"
            await asyncio.sleep(0.2)
        assert key in after["rate_limits"]
    finally:
        own.shutdown()


async def test_a_pool_replaces_a_host_that_is_gone_for_good(ray_session: Any) -> None:
    """Another driver's hosts die with it (Ray kills an actor with its owner): later runs get a new host.

    A pool attaches to hosts already running under its names; when the driver that started them exits,
    its runs used to fail with ``RemoteActorError`` forever.
    """
    import uuid

    import ray

    from ray_harness.runtime import AgentPool
    from ray_harness.types.exceptions import RemoteActorError

    own = AgentPool(size=1, namespace=f"ray_harness_gone_{uuid.uuid4().hex[:6]}")
    try:
        assert str(await own.run(agents.calculator, "2+3")).strip() == "5"
        (before,) = await own.stats()
        ray.kill(own.hosts[0], no_restart=True)  # what the exit of the driver that owns the host does
        while True:  # the dead host's name is free again (a GCS look-up; Ray frees it within moments)
            try:
                ray.get_actor(own.host_names[0], namespace=own.namespace)
            except ValueError:
                break
            await asyncio.sleep(0.05)
        with pytest.raises(RemoteActorError):  # the run that met the dead host fails, as a host loss does
            await own.run(agents.calculator, "2+3")
        assert str(await own.run(agents.calculator, "2+3")).strip() == "5"
        (after,) = await own.stats()
        assert after["pid"] != before["pid"]
        assert ray.get_actor(own.host_names[0], namespace=own.namespace)._actor_id == own.hosts[0]._actor_id
    finally:
        own.shutdown()


async def test_a_run_in_flight_when_the_pool_shuts_down_says_the_host_was_stopped(ray_session: Any) -> None:
    import uuid

    from ray_harness.runtime import AgentPool
    from ray_harness.types.exceptions import ActorStoppedError

    own = AgentPool(size=1, namespace=f"ray_harness_stopped_{uuid.uuid4().hex[:6]}")
    running = asyncio.create_task(own.run("tests.integration.agents:slow_model", "hi"))  # answers after 300 s
    await _wait_running(own, 1)
    await asyncio.to_thread(own.shutdown)
    with pytest.raises(ActorStoppedError, match="stopped on purpose") as caught:
        await asyncio.wait_for(running, 120)
    assert caught.value.actor_name == own.host_names[0]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"max_restarts": "3"}, "max_restarts"),
    ({"namespace": ""}, "namespace"),  # used to fall back to the driver's namespace silently
    ({"resources": {"x": "1"}}, r"resources\['x'\]"),
])
def test_bad_pool_arguments_name_the_field(ray_session: Any, kwargs: dict[str, Any], field: str) -> None:
    from ray_harness.runtime import AgentPool

    with pytest.raises(ValueError, match=field):
        AgentPool(size=1, **kwargs)
