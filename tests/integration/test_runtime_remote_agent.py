"""RemoteAgent on a real local Ray: cancel, ordering, restart after kill -9, other drivers, errors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ray_harness.types.exceptions import ConcurrencyException, RemoteActorError
from tests.conftest import RAY_NAMESPACE
from tests.integration.agents import crashing_factory

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]

ROOT = Path(__file__).resolve().parents[2]


def _remote(source: Any, **kwargs: Any) -> Any:
    from ray_harness.runtime import RemoteAgent

    return RemoteAgent(source, **kwargs)


def _run_driver(code: str, timeout: float = 240) -> str:
    """Run ``code`` in a second Python driver process connected to the test session's Ray."""
    import ray

    # The session's own GCS address, not "auto": another Ray on the machine must not be picked up.
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": address}
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, timeout=timeout,
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


async def _wait_until(predicate: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_cancel_during_a_long_model_call_returns_at_once() -> None:
    remote = _remote("tests.integration.agents:slow_model", name="cancel-model")
    try:
        running = asyncio.create_task(remote.invoke_async("hello"))
        await _wait_until(lambda: remote.info()["busy"])
        await asyncio.sleep(0.2)
        await remote.cancel_async()
        result = await asyncio.wait_for(running, 120)  # the model would answer after 300 s
        assert (result.stop_reason, str(result)) == ("cancelled", "Cancelled by user\n")
        usage = result.metrics.accumulated_usage  # the cut call's request is estimated, not dropped
        assert usage["estimatedTokens"] == usage["totalTokens"] == usage["inputTokens"] > 0
        assert remote.info()["busy"] is False
    finally:
        remote.shutdown()


async def test_cancel_during_a_long_tool() -> None:
    remote = _remote("tests.integration.agents:slow_tool", name="cancel-tool")
    try:
        running = asyncio.create_task(remote.invoke_async("wait"))
        await _wait_until(lambda: remote.info()["busy"])
        await asyncio.sleep(0.3)
        remote.cancel()
        result = await asyncio.wait_for(running, 120)  # the tool would wait 300 s
        assert result.stop_reason == "cancelled"
        tool_result = remote.messages[-1]["content"][0]["toolResult"]
        assert tool_result["content"][0]["text"] == "stopped by cancel"
    finally:
        remote.shutdown()


async def test_closing_the_stream_early_cancels_the_invocation() -> None:
    """The driver stops reading (``aclose()``): the invocation is cancelled in the actor (its tool stops, as for
    ``cancel()``), and the next call, queued behind it, runs once it has ended."""
    remote = _remote("tests.integration.agents:slow_tool", name="close-early")
    try:
        stream = remote.stream_async("wait")
        async for event in stream:
            if event.get("type") == "tool_start":
                break
        await stream.aclose()
        await asyncio.wait_for(remote.invoke_async("again"), 120)  # the first call's tool would wait 300 s
        results = [block["toolResult"]["content"][0]["text"] for message in remote.messages
                   for block in message["content"] if "toolResult" in block]
        assert results[0] == "stopped by cancel"
    finally:
        remote.shutdown()


async def test_invocations_queue_in_order_by_default() -> None:
    remote = _remote("tests.integration.agents:sleepy", name="queued")
    try:
        calls = [remote.invoke_async(f"call {i}") for i in range(3)]
        results = await asyncio.gather(*calls)
        assert [r.stop_reason for r in results] == ["end_turn"] * 3
        prompts = [m["content"][0]["text"] for m in remote.messages if m["role"] == "user"]
        assert prompts == ["call 0", "call 1", "call 2"]
    finally:
        remote.shutdown()


async def test_throw_mode_rejects_a_concurrent_invocation() -> None:
    remote = _remote("tests.integration.agents:sleepy", name="throwing", concurrent_invocation_mode="throw")
    try:
        first = asyncio.create_task(remote.invoke_async("first"))
        await _wait_until(lambda: remote.info()["busy"])
        with pytest.raises(ConcurrencyException, match="already running"):
            await remote.invoke_async("second")
        assert (await first).stop_reason == "end_turn"
    finally:
        remote.shutdown()


async def test_kill_9_mid_tool_batch_completes_after_restart(tmp_path: Path) -> None:
    remote = _remote(crashing_factory(str(tmp_path)), name="crash-restart")
    try:
        first_pid = remote.info()["pid"]
        running = asyncio.create_task(remote.invoke_async("run the batch"))
        pids = tmp_path / "pids.txt"
        await _wait_until(lambda: pids.exists() and pids.read_text().strip() != "")
        runs = tmp_path / "runs.txt"
        await _wait_until(lambda: sorted(runs.read_text().split()) == ["a", "b", "c"])
        await asyncio.sleep(0.2)  # the two quick results are persisted as they complete
        os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)
        result = await asyncio.wait_for(running, 60)
        assert (result.stop_reason, str(result)) == ("end_turn", "results: recorded a, recorded b, recorded c\n")
        counts = runs.read_text().split()
        assert (counts.count("a"), counts.count("b"), counts.count("c")) == (1, 1, 2)  # c was running: at-least-once
        info = remote.info()
        assert info["restored"] is True and info["pid"] != first_pid
        history = remote.messages
        assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
        assert [b["toolResult"]["toolUseId"] for b in history[2]["content"]] == ["use-a", "use-b", "use-c"]
    finally:
        remote.shutdown()


def test_get_from_a_second_driver_process() -> None:
    remote = _remote("tests.integration.agents:calculator", name="shared-calc")
    try:
        output = _run_driver(f"""
            from ray_harness import runtime
            from ray_harness.runtime import RemoteAgent
            runtime.init(namespace={RAY_NAMESPACE!r})
            agent = RemoteAgent.get("shared-calc")
            print(repr(str(agent("2+3?"))))
        """)
        assert output.strip() == repr("5\n")
        assert len(remote.messages) == 4  # the second driver's call ran in this agent
    finally:
        remote.shutdown()


def test_detached_agent_resumes_an_interrupt_after_its_driver_exits() -> None:
    from ray_harness.runtime import RemoteAgent

    output = _run_driver(f"""
        from ray_harness import runtime
        from ray_harness.runtime import RemoteAgent
        runtime.init(namespace={RAY_NAMESPACE!r})
        agent = RemoteAgent("tests.integration.agents:approvals", name="detached-approvals", detached=True)
        result = agent("send 10")
        print(result.stop_reason, result.interrupts[0].id)
    """)
    stop_reason, interrupt_id = output.split()
    assert stop_reason == "interrupt"
    agent = RemoteAgent.get("detached-approvals")
    try:
        result = agent([{"interruptResponse": {"interruptId": interrupt_id, "response": "yes"}}])
        assert (result.stop_reason, str(result)) == ("end_turn", "done\n")
    finally:
        RemoteAgent.kill("detached-approvals")
    with pytest.raises(ValueError, match="no RemoteAgent named 'detached-approvals'"):
        RemoteAgent.get("detached-approvals")


def test_max_tokens_crosses_with_its_partial_message_and_the_actor_keeps_it() -> None:
    from ray_harness import Agent
    from ray_harness.testing import ScriptedModel, text
    from ray_harness.types.exceptions import MaxTokensReachedException

    agent = Agent(ScriptedModel(text("partial", stop_reason="max_tokens"), text("the rest")), name="truncated")
    remote = _remote(agent, name="truncated")
    try:
        with pytest.raises(MaxTokensReachedException) as caught:
            remote("x")
        partial = {"role": "assistant", "content": [{"text": "partial"}]}
        assert caught.value.partial_message == partial
        assert remote.messages == [{"role": "user", "content": [{"text": "x"}]}, partial]
        assert str(remote("continue")) == "the rest\n"
    finally:
        remote.shutdown()


def test_a_dead_actor_is_a_remote_actor_error() -> None:
    import ray

    remote = _remote("tests.integration.agents:calculator", name="doomed", max_restarts=0)
    ray.kill(remote.actor, no_restart=True)
    with pytest.raises(RemoteActorError, match="ray_harness:agent:doomed") as caught:
        remote("2+3?")
    assert caught.value.actor_name == "ray_harness:agent:doomed"


def _broken_factory() -> Any:
    raise ZeroDivisionError("no agent today")


@pytest.mark.parametrize("source", [_broken_factory, "tests.integration.agents:no_such_factory"])
def test_a_factory_that_fails_raises_its_own_error_and_leaves_no_actor(source: Any) -> None:
    import ray

    expected = ZeroDivisionError if callable(source) else AttributeError
    with pytest.raises(expected) as caught:  # as runtime.md says: its own type, never Ray's wrapper
        _remote(source, name="unbuildable")
    assert "died" not in str(caught.value)
    names = {entry["name"] for entry in ray.util.list_named_actors(all_namespaces=True)}
    assert "ray_harness:agent:unbuildable" not in names


def test_duplicate_name_points_to_get() -> None:
    remote = _remote("tests.integration.agents:calculator", name="twice")
    try:
        with pytest.raises(ValueError, match=r"use RemoteAgent.get\('twice'\)"):
            _remote("tests.integration.agents:calculator", name="twice")
    finally:
        remote.shutdown()


def test_actor_names_are_readable_in_ray_listings() -> None:
    # `ray list actors` / the dashboard read the same GCS table; without a dashboard process we ask the GCS.
    import ray

    remote = _remote("tests.integration.agents:calculator", name="visible")
    try:
        names = {(entry["namespace"], entry["name"]) for entry in ray.util.list_named_actors(all_namespaces=True)}
        assert (RAY_NAMESPACE, "ray_harness:agent:visible") in names
    finally:
        remote.shutdown()


def test_unreachable_address_fails_fast_with_a_clear_error() -> None:
    code = """
        from ray_harness import runtime
        try:
            runtime.init(address="127.0.0.1:9")
        except ConnectionError as error:
            print("ConnectionError:", error)
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    started = time.monotonic()
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, timeout=240,
                               capture_output=True, text=True, check=False)
    assert time.monotonic() - started < 120  # Ray's own connect retries alone would take minutes
    assert "ConnectionError: cannot reach the Ray cluster at '127.0.0.1:9': connection refused" in completed.stdout


async def test_kill_9_mid_stream_still_ends_with_the_result(tmp_path: Path) -> None:
    remote = _remote(crashing_factory(str(tmp_path)), name="crash-stream")
    try:
        kinds: list[str] = []
        final = None

        async def consume() -> None:
            nonlocal final
            async for event in remote.stream_async("run the batch"):
                kinds.append(event["type"])
                if event["type"] == "result":
                    final = event["result"]

        running = asyncio.create_task(consume())
        pids, runs = tmp_path / "pids.txt", tmp_path / "runs.txt"
        await _wait_until(lambda: pids.exists() and pids.read_text().strip() != "")
        await _wait_until(lambda: runs.exists() and sorted(runs.read_text().split()) == ["a", "b", "c"])
        await asyncio.sleep(0.2)
        os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)
        await asyncio.wait_for(running, 60)
        assert kinds[-1] == "result" and final is not None
        assert str(final) == "results: recorded a, recorded b, recorded c\n"
        counts = runs.read_text().split()
        assert (counts.count("a"), counts.count("b")) == (1, 1)  # completed tools did not run again
    finally:
        remote.shutdown()


async def test_kill_9_mid_stream_still_streams_the_events_of_the_step_that_ran_again(tmp_path: Path) -> None:
    """Ray's own retry of a streamed call skips as many items as the lost attempt had sent: the re-run tool's
    ``tool_start``/``tool_result`` and the tool-result message never reached the consumer."""
    remote = _remote(crashing_factory(str(tmp_path)), name="crash-stream-events")
    try:
        events: list[dict[str, Any]] = []

        async def consume() -> None:
            async for event in remote.stream_async("run the batch"):
                events.append(event)

        running = asyncio.create_task(consume())
        pids, runs = tmp_path / "pids.txt", tmp_path / "runs.txt"
        await _wait_until(lambda: pids.exists() and pids.read_text().strip() != "")
        await _wait_until(lambda: runs.exists() and sorted(runs.read_text().split()) == ["a", "b", "c"])
        await _wait_until(lambda: sum(event["type"] == "tool_result" for event in events) == 2)  # a and b
        os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)
        await asyncio.wait_for(running, 60)
        results = [event["tool_result"]["toolUseId"] for event in events if event["type"] == "tool_result"]
        # a and b run concurrently (either may finish first); c ran again in the new process, and its result came
        assert (sorted(results[:2]), results[2:]) == (["use-a", "use-b"], ["use-c"])
        messages = [event["message"] for event in events if event["type"] == "message"]
        assert [block["toolResult"]["toolUseId"] for block in messages[-2]["content"]] == ["use-a", "use-b", "use-c"]
        assert events[-1]["type"] == "result"
    finally:
        remote.shutdown()


async def test_snapshot_of_a_remote_agent_is_its_actors_state() -> None:
    from ray_harness import Agent
    from ray_harness.agent import AgentSnapshot
    from ray_harness.testing import ScriptedModel

    remote = _remote("tests.integration.agents:calculator", name="snapshot-me")
    try:
        await remote.invoke_async("what is 2 + 3?")
        snapshot = await remote.snapshot_async()
        assert isinstance(snapshot, AgentSnapshot)
        assert snapshot.messages == await remote.get_messages_async()
        assert snapshot.metrics.cycle_count >= 1 and snapshot.model_state is not None
        # The snapshot is the actor's state, restorable into an in-process agent with the same agent_id.
        local = Agent(ScriptedModel(["unused"]), agent_id=snapshot.agent_id)
        local.restore(AgentSnapshot.model_validate_json(remote.snapshot().model_dump_json()))
        assert local.messages == snapshot.messages
    finally:
        remote.shutdown()


# -- stopped on purpose: shutdown()/kill() are not crashes -----------------------------------------------------


async def test_a_call_in_flight_when_shutdown_runs_says_the_agent_was_stopped() -> None:
    from ray_harness.types.exceptions import ActorStoppedError

    remote = _remote("tests.integration.agents:slow_model", name="stopped-mid-call")
    running = asyncio.create_task(remote.invoke_async("hello"))  # the model would answer after 300 s
    streaming = asyncio.create_task(_drain(remote.stream_async("queued behind it")))
    await _wait_until(lambda: remote.info()["busy"])
    await asyncio.to_thread(remote.shutdown)
    for task in (running, streaming):
        with pytest.raises(ActorStoppedError, match="stopped on purpose") as caught:
            await asyncio.wait_for(task, 120)
        assert caught.value.actor_name == "ray_harness:agent:stopped-mid-call"
        assert "died" not in str(caught.value)
    with pytest.raises(ActorStoppedError, match="stopped on purpose"):
        remote("after the shutdown")
    remote.shutdown()  # a second shutdown does nothing


async def _drain(events: Any) -> list[Any]:
    return [event async for event in events]


def test_kill_from_another_driver_stops_a_call_in_flight_with_actor_stopped_error() -> None:
    from ray_harness.types.exceptions import ActorStoppedError

    remote = _remote("tests.integration.agents:slow_model", name="killed-elsewhere")
    ref = remote.client.submit("run", remote._request("hello", None, None, None, events="result"))
    _run_driver(f"""
        from ray_harness import runtime
        from ray_harness.runtime import RemoteAgent
        runtime.init(namespace={RAY_NAMESPACE!r})
        RemoteAgent.kill("killed-elsewhere")
    """)
    from ray_harness.runtime._errors import call_sync

    with pytest.raises(ActorStoppedError, match="stopped on purpose"):
        call_sync(ref, remote.actor_name, timeout=120)
    with pytest.raises(ActorStoppedError):
        remote("again")


# -- resources the cluster can never give ---------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"resources": {"no_such_resource": 1}}, r"resources\['no_such_resource'\]=1 \(no node has it\)"),
    ({"num_cpus": 64}, r"num_cpus=64 \(the largest node has 2\)"),
    ({"resources": {"GPU": 1}}, r"resources\['GPU'\]=1 \(no node has it\)"),  # Ray's num_gpus, checked too
])
def test_resources_no_node_has_fail_at_once_naming_them(kwargs: dict[str, Any], named: str) -> None:
    """Ray would wait forever (printing only an autoscaler warning): the embedded test Ray has no autoscaler."""
    import ray

    with pytest.raises(ValueError, match=named):
        _remote("tests.integration.agents:calculator", name="unplaceable", **kwargs)
    names = {entry["name"] for entry in ray.util.list_named_actors(all_namespaces=True)}
    assert "ray_harness:agent:unplaceable" not in names


def test_a_pool_whose_hosts_no_node_can_hold_fails_at_once() -> None:
    from ray_harness.runtime import AgentPool

    with pytest.raises(ValueError, match=r"AgentPool hosts .*resources\['no_such_resource'\]=1"):
        AgentPool(size=1, namespace="ray_harness_unplaceable", resources={"no_such_resource": 1})


def test_resources_some_node_has_are_accepted() -> None:
    import ray

    node = next(n for n in ray.nodes() if n["Alive"])
    own = next(name for name in node["Resources"] if name.startswith("node:"))  # every node has node:<ip>
    remote = _remote("tests.integration.agents:calculator", name="placeable", num_cpus=0.5, resources={own: 0.01})
    try:
        assert str(remote("2+3?")) == "5\n"
    finally:
        remote.shutdown()


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"num_cpus": -1}, "num_cpus"),
    ({"resources": {"x": -1}}, r"resources\['x'\]"),
    ({"resources": {"x": "1"}}, r"resources\['x'\]"),
    ({"resources": {"CPU": 1}}, "num_cpus"),
    ({"resources": ["x"]}, "resources must be a dict"),
])
def test_bad_resource_arguments_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        _remote("tests.integration.agents:calculator", name="badly-sized", **kwargs)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"max_concurrency": 0}, "max_concurrency"),  # Ray accepts 0, and the actor then never runs a call
    ({"detached": "no"}, "detached"),  # truthy: it used to make a detached agent
    ({"persist": None}, "persist"),
    ({"namespace": ""}, "namespace"),  # used to fall back to the driver's namespace silently
    ({"state_dir": 3}, "state_dir"),
])
def test_bad_arguments_are_refused_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    import ray

    with pytest.raises(ValueError, match=field):
        _remote("tests.integration.agents:calculator", name="badly-made", **kwargs)
    names = {entry["name"] for entry in ray.util.list_named_actors(all_namespaces=True)}
    assert "ray_harness:agent:badly-made" not in names


@pytest.mark.parametrize("name", [3, ""])
def test_get_with_a_bad_name_names_the_field(name: Any) -> None:
    from ray_harness.runtime import RemoteAgent

    with pytest.raises(ValueError, match="name must be a non-empty string"):
        RemoteAgent.get(name)


async def test_a_crash_is_not_a_stop_and_says_why_the_actor_died() -> None:
    from ray_harness.types.exceptions import ActorStoppedError

    remote = _remote("tests.integration.agents:slow_model", name="crashed", max_restarts=0)
    running = asyncio.create_task(remote.invoke_async("hello"))
    await _wait_until(lambda: remote.info()["busy"])
    os.kill(remote.info()["pid"], signal.SIGKILL)
    with pytest.raises(RemoteActorError, match=r"died:.*worker process has died") as caught:
        await asyncio.wait_for(running, 120)
    assert not isinstance(caught.value, ActorStoppedError)
