"""Graph and Swarm orchestration on pre-started orchestration hosts (``runtime="ray"``, ``runtime._orchestrator``).

Assertions are on results, events and hosts: the orchestrator's hooks and the node models run in actors.
Module-level tools here are imported by the host actors (``tests.integration.test_orchestrator_actor``).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent, GraphBuilder, Status, Swarm, ToolContext, tool
from ray_harness.hooks import BeforeNodeCallEvent
from ray_harness.testing import ScriptedModel, text, tool_call
from tests.integration.agents import meet
from tests.integration.test_telemetry_ray import otlp  # noqa: F401 - the OTLP receiver fixture
from tests.multiagent.conftest import make_agent

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@tool(context=True)
async def sleep_then_mark(path: str, seconds: float, tool_context: ToolContext) -> str:
    """Wait (stopping early on cancel), then write a marker file: it must never appear once the run is cancelled."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if tool_context.cancel_signal.is_set():
            return "stopped by cancel"
        await asyncio.sleep(0.02)
    Path(path).write_text("still running", encoding="utf-8")  # noqa: ASYNC240 - tiny write in a test tool
    return "marked"


@tool(context=True)
def approve(tool_context: ToolContext) -> str:
    """Ask a human."""
    return f"approved: {tool_context.interrupt('approval', reason='go?')}"


def actor_of(name: str) -> Any:
    import ray

    from ray_harness.runtime._cluster import current_namespace

    return ray.get_actor(name, namespace=current_namespace())


async def stream_killing_the_orchestration_host(graph: Any, task: str, at_start_of: str) -> list[dict[str, Any]]:
    """``graph.stream_async(task)``'s events; its orchestration host is killed (-9) when node ``at_start_of`` starts.

    The node should then be in a slow model call, the nodes before it finished in this run.
    """
    import signal

    pid = (await actor_of(graph._node_runner.orchestration_host_name).ready.remote())["pid"]
    events: list[dict[str, Any]] = []
    async for event in graph.stream_async(task):
        events.append(event)
        if event["type"] == "multiagent_node_start" and event["node_id"] == at_start_of and pid:
            os.kill(pid, signal.SIGKILL)
            pid = 0
    assert not pid, f"node {at_start_of} never started"
    return events


def two_node_graph(graph_id: str | None = None, delay: float = 0.0) -> Any:
    builder = GraphBuilder()
    builder.add_node(make_agent("a", *[text("a done", delay=delay)] * 3), "a")
    builder.add_node(make_agent("b", *[text("b done", delay=delay)] * 3), "b")
    builder.add_edge("a", "b")
    if graph_id is not None:
        builder.set_graph_id(graph_id)
    return builder.build(runtime="ray")


async def test_a_new_graph_runs_on_a_pre_started_orchestration_host() -> None:
    graph_id = f"named-{uuid.uuid4().hex[:6]}"
    graph = two_node_graph(graph_id, delay=0.5)
    task = asyncio.create_task(graph.invoke_async("t"))
    deadline = time.monotonic() + 30
    while graph._node_runner.orchestration_host_name is None:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    name = graph._node_runner.orchestration_host_name
    assert name.startswith("ray_harness:orchestrator:")
    host = actor_of(name)
    while not await host.orchestrations.remote():  # the run is listed on its host while it runs
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.02)
    assert (await task).status == Status.COMPLETED
    assert await host.orchestrations.remote() == []
    info = await host.ready.remote()
    assert info["pid"] != os.getpid()
    assert (await graph.invoke_async("again")).status == Status.COMPLETED
    assert graph._node_runner.orchestration_host_name == name  # one object, one host
    # More Graph/Swarm objects start no actor: they run on the same pre-started hosts.
    other = two_node_graph(graph_id)
    swarm = Swarm([make_agent("solo", text("x"))], runtime="ray")
    assert (await other.invoke_async("t")).status == Status.COMPLETED
    assert (await swarm.invoke_async("t")).status == Status.COMPLETED
    for orchestrator in (other, swarm):
        assert orchestrator._node_runner.orchestration_host_name.startswith("ray_harness:orchestrator:")
    assert actor_of(name)._actor_id == host._actor_id
    graph.shutdown()
    other.shutdown()
    swarm.shutdown()


async def test_swarms_with_handoffs_and_streamed_graphs_never_hang_on_a_one_host_pool() -> None:
    # A regression test: an orchestration that sent nodes to its own host waited forever for their stream.
    from ray_harness.runtime import AgentPool, RayRuntime

    runtime = RayRuntime(pool=AgentPool(size=1))
    for attempt in range(4):
        go = tool_call("handoff_to_agent", {"agent_name": "second", "message": "go", "context": {"k": 1}})
        first = make_agent("first", go, text("handed"))
        second = make_agent("second", text(f"answer {attempt}"))
        swarm = Swarm([first, second], runtime=runtime)
        result = await asyncio.wait_for(swarm.invoke_async("t"), 120)
        assert result.status == Status.COMPLETED
        assert [n.node_id for n in result.node_history] == ["first", "second"]
        events = [event async for event in swarm.stream_async("again")]
        assert events[-1]["result"].status in (Status.COMPLETED, Status.FAILED)
        swarm.shutdown()

        builder = GraphBuilder()
        builder.add_node(make_agent("a", text("a done")), "a")
        builder.add_node(make_agent("b", text("b done")), "b")
        builder.add_edge("a", "b")
        graph = builder.build(runtime=runtime)
        streamed = [event async for event in graph.stream_async("t")]
        assert streamed[-1]["result"].status == Status.COMPLETED
        assert [e["node_id"] for e in streamed if e["type"] == "multiagent_node_stop"] == ["a", "b"]
        graph.shutdown()


async def test_a_ready_batch_starts_in_parallel_and_events_arrive_in_order_per_node(tmp_path: Path) -> None:
    directory = str(tmp_path)
    builder = GraphBuilder()
    names = [f"n{i}" for i in range(4)]
    for name in names:
        async def answer(call: Any, name: str = name) -> Any:
            return text(f"{name} {await meet(directory, name, len(names))}")

        builder.add_node(make_agent(name, text("warm"), answer), name)
    graph = builder.build(runtime="ray")
    await graph.invoke_async("warm up")
    events = [event async for event in graph.stream_async("go")]
    assert events[-1]["result"].status == Status.COMPLETED
    # Every node's model call waited until all four had started: the batch ran in parallel.
    assert {str(events[-1]["result"].results[name].result).strip() for name in names} == \
        {f"{name} met" for name in names}
    for name in names:
        mine = [e for e in events if e.get("node_id") == name]
        assert mine[0]["type"] == "multiagent_node_start" and mine[-1]["type"] == "multiagent_node_stop"
        inner = [e["event"]["type"] for e in mine if e["type"] == "multiagent_node_stream"]
        assert inner and inner[-1] == "result"
        assert mine[-1]["node_result"].status == Status.COMPLETED
    # The driver's agents have the run's messages.
    assert graph.nodes["n0"].executor.messages[-1]["content"] == [{"text": "n0 met"}]
    assert graph.nodes["n0"].executor.model.remaining == 0
    assert [n.node_id for n in events[-1]["result"].execution_order][:0] == []
    assert all(node is graph.nodes[node.node_id] for node in events[-1]["result"].execution_order)
    graph.shutdown()


async def test_cancel_mid_run_stops_every_host(tmp_path: Path) -> None:
    from ray_harness.runtime._multiagent_pool import default_pool

    marker = tmp_path / "marker.txt"
    builder = GraphBuilder()
    for name in ("t1", "t2"):
        model = ScriptedModel(text("warm"), tool_call("sleep_then_mark", {"path": str(marker), "seconds": 8.0}),
                              text("never"))
        builder.add_node(Agent(model, tools=[sleep_then_mark], name=name, retry_strategy=None), name)
    graph = builder.build(runtime="ray")
    await graph.invoke_async("warm up")
    task = asyncio.create_task(graph.invoke_async("go"))
    pool = default_pool()
    deadline = time.monotonic() + 20
    while sum(host["running"] for host in await pool.stats()) < 2:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)
    graph.cancel()
    result = await asyncio.wait_for(task, 60)
    assert result.status == Status.CANCELLED
    assert {result.results[n].status for n in ("t1", "t2")} == {Status.CANCELLED}
    assert sum(host["running"] for host in await pool.stats()) == 0
    await asyncio.sleep(8.5)  # past the tools' own 8 s: a tool that ignored the cancel would have marked by now
    assert not marker.exists(), "a tool kept running after cancel"
    assert await actor_of(graph._node_runner.orchestration_host_name).orchestrations.remote() == []
    graph.shutdown()


async def test_interrupt_in_a_node_suspends_and_resumes_from_the_driver() -> None:
    builder = GraphBuilder()
    builder.add_node(make_agent("ask", tool_call("approve", {}), text("asked"), tools=[approve]), "ask")
    builder.add_node(make_agent("other", text("other done")), "other")
    builder.add_node(make_agent("last", text("last done")), "last")
    builder.add_edge("ask", "last")
    builder.add_edge("other", "last")
    graph = builder.set_join("all").build(runtime="ray")
    first = await graph.invoke_async("t")
    assert first.status == Status.INTERRUPTED and graph.state.status == Status.INTERRUPTED
    assert [item.name for item in first.interrupts] == ["approval"]
    assert graph.nodes["other"].executor.model.remaining == 0
    responses = [{"interruptResponse": {"interruptId": first.interrupts[0].id, "response": "yes"}}]
    second = await graph.invoke_async(responses)
    assert second.status == Status.COMPLETED
    assert [n.node_id for n in second.execution_order] == ["other", "ask", "last"]  # "other" did not run again
    ask = graph.nodes["ask"].executor
    assert any(block.get("toolResult", {}).get("content") == [{"text": "approved: yes"}]
               for message in ask.messages for block in message["content"])
    graph.shutdown()


async def test_node_errors_are_failed_results_or_the_original_type() -> None:
    from ray.exceptions import RayError

    builder = GraphBuilder()
    builder.add_node(make_agent("bad", RuntimeError("model exploded")), "bad")
    graph = builder.build(runtime="ray")
    with pytest.raises(RuntimeError, match="model exploded") as raised:
        await graph.invoke_async("t")
    assert type(raised.value) is RuntimeError and not isinstance(raised.value, RayError)
    assert graph.state.results["bad"].status == Status.FAILED  # the driver's graph has the end state

    swarm = Swarm([make_agent("broken", ValueError("provider down"))], runtime="ray")
    result = await swarm.invoke_async("t")
    assert result.status == Status.FAILED
    assert isinstance(result.results["broken"].result, ValueError)
    graph.shutdown()
    swarm.shutdown()


async def test_an_unpicklable_graph_is_a_clear_type_error(tmp_path: Path) -> None:
    handle = open(tmp_path / "log.txt", "w", encoding="utf-8")  # noqa: SIM115, ASYNC230 - it must not pickle
    try:
        graph = two_node_graph()

        def log(event: BeforeNodeCallEvent) -> None:
            handle.write(event.node_id)

        graph.add_hook(log)
        with pytest.raises(TypeError, match=r"hook registry.*runtime='local'"):
            await graph.invoke_async("t")
        assert graph._node_runner.orchestration_host_name is None  # nothing was sent
    finally:
        handle.close()


async def test_nested_orchestrators_run_inside_the_parent_orchestration() -> None:
    inner = GraphBuilder()
    inner.add_node(make_agent("i1", text("inner one")), "i1")
    inner_graph = inner.build(runtime="ray")
    team = Swarm([make_agent("s1", text("swarm answer"))], runtime="ray")
    outer = GraphBuilder()
    outer.add_node(inner_graph, "inner")
    outer.add_node(team, "team")
    graph = outer.build(runtime="ray")
    result = await graph.invoke_async("t")
    assert result.status == Status.COMPLETED
    assert graph._node_runner.orchestration_host_name is not None
    assert inner_graph._node_runner.orchestration_host_name is None
    assert team._node_runner.orchestration_host_name is None
    # The nested orchestrators' state and agents came back to the driver.
    assert inner_graph.state.status == Status.COMPLETED
    assert inner_graph.nodes["i1"].executor.messages[-1]["content"] == [{"text": "inner one"}]
    assert team.nodes["s1"].executor.messages[-1]["content"] == [{"text": "swarm answer"}]
    graph.shutdown()


async def test_session_writes_happen_in_the_driver(tmp_path: Path) -> None:
    from tests.multiagent.conftest import JsonFileStore

    store = JsonFileStore(tmp_path / "graph.json")
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("x")), "a")
    graph = builder.set_session_manager(store).build(runtime="ray")
    assert (await graph.invoke_async("t")).status == Status.COMPLETED
    assert store.writes >= 2  # the driver's store object did the writes
    graph.shutdown()


async def test_session_writes_reach_the_driver_while_a_quiet_run_goes_on(tmp_path: Path) -> None:
    # invoke_async sends almost no events back; the writes must not wait for the end of the run.
    from tests.multiagent.conftest import JsonFileStore

    store = JsonFileStore(tmp_path / "graph.json")
    gate = tmp_path / "b-may-answer"

    async def b_answers_once_the_gate_opens(call: Any) -> Any:
        while not await asyncio.to_thread(gate.exists):  # noqa: ASYNC110 - the test process opens it
            await asyncio.sleep(0.02)
        return text("b done")

    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("a done")), "a")
    builder.add_node(make_agent("b", b_answers_once_the_gate_opens), "b")
    builder.add_edge("a", "b")
    graph = builder.set_session_manager(store).build(runtime="ray")
    run = asyncio.ensure_future(graph.invoke_async("t"))
    deadline = time.monotonic() + 120
    completed: list[str] = []
    while "a" not in completed:
        assert time.monotonic() < deadline and not run.done()
        await asyncio.sleep(0.05)
        saved = store.read_multi_agent_json() or {}
        completed = list(saved.get("completed_nodes") or [])
    assert not run.done()  # b is still waiting for the gate: the write arrived while the run went on
    assert completed == ["a"], saved
    gate.touch()
    assert (await run).status == Status.COMPLETED
    graph.shutdown()


def test_orchestrator_spans_are_children_of_the_driver_span(otlp: Any) -> None:  # noqa: F811 - the fixture
    from opentelemetry import trace

    from ray_harness.runtime._multiagent_pool import orchestration_pool
    from tests.integration.test_telemetry_ray import _wait

    # The pre-started orchestration hosts predate this test's OTLP set-up: the next graph starts them again.
    orchestration_pool().shutdown()
    graph = two_node_graph()
    with trace.get_tracer("test").start_as_current_span("driver") as driver:
        assert graph("t").status == Status.COMPLETED
    trace_id = driver.get_span_context().trace_id.to_bytes(16, "big")
    span_id = driver.get_span_context().span_id.to_bytes(8, "big")

    def graph_spans() -> list[Any]:
        return [s for s in otlp.spans if s.name == "invoke_graph" and s.trace_id == trace_id]

    _wait(lambda: len(graph_spans()) == 1)
    (graph_span,) = graph_spans()
    assert graph_span.parent_span_id == span_id  # the span of the orchestration host hangs under the driver's
    # (The pooled hosts may predate the OTLP set-up of this test, so their agent spans are not awaited here.)
    nodes = [s for s in otlp.spans if s.name.startswith("execute_node") and s.trace_id == trace_id]
    assert len(nodes) == 2 and all(s.parent_span_id == graph_span.span_id for s in nodes)
    graph.shutdown()


def test_invocations_reuse_the_checked_pools_and_a_shutdown_here_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray_harness.runtime import _multiagent_pool, _orchestrator_client

    checks: list[str] = []
    alive = _multiagent_pool.pool_is_alive

    def counted(pool: Any) -> bool:
        checks.append(pool.host_names[0])
        return alive(pool)

    monkeypatch.setattr(_multiagent_pool, "pool_is_alive", counted)
    monkeypatch.setattr(_orchestrator_client, "POOL_CHECK_INTERVAL_S", 3600.0)  # no check falls due during the test
    graph = two_node_graph()
    assert graph("first").status == Status.COMPLETED
    checks.clear()
    assert graph("second").status == Status.COMPLETED
    assert checks == []  # no GCS look-up: the pools checked at the first invocation are reused
    old_host = actor_of(graph._node_runner.orchestration_host_name)._actor_id
    _multiagent_pool.orchestration_pool(check=False).shutdown()  # this process retires the host: checked again
    assert graph("third").status == Status.COMPLETED
    assert checks, "a pool shut down in this process must be checked before the next invocation"
    assert actor_of(graph._node_runner.orchestration_host_name)._actor_id != old_host
    graph.shutdown()


def test_an_orchestration_host_killed_elsewhere_gets_the_run_on_its_replacement(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    from ray_harness.runtime import _orchestrator_client

    monkeypatch.setattr(_orchestrator_client, "POOL_CHECK_INTERVAL_S", 3600.0)  # the kill is not noticed by a check
    graph = two_node_graph()
    assert graph("first").status == Status.COMPLETED
    name = graph._node_runner.orchestration_host_name
    old = actor_of(name)
    ray.kill(old, no_restart=True)  # as another driver's shutdown would: nothing in this process knows
    deadline = time.monotonic() + 60
    while True:  # until the killed actor gave up its name
        try:
            if actor_of(name)._actor_id != old._actor_id:
                break
        except ValueError:
            break
        assert time.monotonic() < deadline, "the killed host kept its name"
        time.sleep(0.05)
    result = graph("second")  # the dead host fails the call before the run began: sent again to the new host
    assert result.status == Status.COMPLETED
    assert [n.node_id for n in result.execution_order] == ["a", "b"]
    assert len(graph.nodes["b"].executor.messages) == 4  # both runs' turns, none twice
    assert actor_of(name)._actor_id != old._actor_id
    graph.shutdown()


@pytest.mark.parametrize("changed", [False, True], ids=["same-copies", "changed-copies"])
async def test_an_orchestration_host_killed_mid_run_the_run_is_sent_again_and_completed_nodes_do_not_rerun(
        changed: bool) -> None:
    """kill -9 of the orchestration host while node "b" runs: the driver sends the run again; it completes.

    Node "a" had completed in the lost run: its slot answers the re-sent run with what that run sent (it runs twice
    in all, not three times), and its stop event is not yielded twice. ``changed``: the driver cleared every node's
    history before the run, so each copy ships its snapshot; the re-send ships the same state and is answered too.
    """
    from ray_harness.runtime._multiagent_pool import default_pool

    builder = GraphBuilder()
    builder.add_node(make_agent("a", *[text("a done")] * 3), "a")
    builder.add_node(make_agent("b", text("b done"), *[text("b done", delay=2.0)] * 3), "b")
    builder.add_edge("a", "b")
    graph = builder.build(runtime="ray")
    assert (await graph.invoke_async("first")).status == Status.COMPLETED
    if changed:
        for node in graph.nodes.values():
            node.executor.messages.clear()  # a changed copy: its next request sends the snapshot along
    events = await stream_killing_the_orchestration_host(graph, "second", at_start_of="b")
    result = events[-1]["result"]
    assert result.status == Status.COMPLETED
    assert [str(result.results[n].result).strip() for n in ("a", "b")] == ["a done", "b done"]
    assert [e["node_id"] for e in events if e["type"] == "multiagent_node_stop"] == ["a", "b"]
    # "b" was going on: its re-sent run repeats the events the caller got of it (the same script, or the lost run
    # answered from its slot), which are not yielded again.
    assert [e["node_id"] for e in events if e["type"] == "multiagent_node_start"] == ["a", "b"]
    assert (await default_pool().slot_info(graph._node_runner.slot_key("a")))["runs"] == 2  # not run again
    turns = ["second"] if changed else ["first", "second"]
    for name in ("a", "b"):  # each node's turn of each run, once ("b" gets the task inside its input)
        messages = graph.nodes[name].executor.messages
        prompts = [m["content"][0]["text"] for m in messages if m["role"] == "user"]
        assert len(messages) == 2 * len(turns) and all(t in p for t, p in zip(turns, prompts, strict=True)), prompts
    assert (await graph.invoke_async("third")).status == Status.COMPLETED
    assert [len(graph.nodes[n].executor.messages) for n in ("a", "b")] == [2 * len(turns) + 2] * 2
    graph.shutdown()


async def test_an_orchestration_host_killed_while_a_remote_agent_node_runs_the_run_completes() -> None:
    """kill -9 of the orchestration host while a ``RemoteAgent`` node runs: the re-sent run completes.

    The re-sent request for that node reaches its actor while the lost run's invocation of the same id still runs
    there: it waits for it and gets its result (the actor's model is not called again).
    """
    from ray_harness.runtime import RemoteAgent

    remote = RemoteAgent(make_agent("r", text("r done"), *[text("r done", delay=2.0)] * 3))
    builder = GraphBuilder()
    builder.add_node(make_agent("a", *[text("a done")] * 3), "a")
    builder.add_node(remote, "r")
    builder.add_edge("a", "r")
    graph = builder.build(runtime="ray")
    try:
        assert (await graph.invoke_async("first")).status == Status.COMPLETED
        events = await stream_killing_the_orchestration_host(graph, "second", at_start_of="r")
        result = events[-1]["result"]
        assert result.status == Status.COMPLETED, result
        assert [str(result.results[n].result).strip() for n in ("a", "r")] == ["a done", "r done"]
        assert len(await remote.get_messages_async()) == 4  # the first and the second run's turn, once each
    finally:
        graph.shutdown()
        remote.shutdown()


async def test_an_orchestration_host_killed_mid_swarm_the_run_is_sent_again_and_the_handoff_is_replayed() -> None:
    """kill -9 of the orchestration host while the second member runs: the swarm run is sent again and completes.

    The first member's slot answers with the events its run streamed (the handoff tool's among them, which the
    swarm needs to hand off again) and its journaled result: it does not run again; no event is yielded twice.
    """
    import signal

    from ray_harness.runtime._multiagent_pool import default_pool

    go = tool_call("handoff_to_agent", {"agent_name": "second", "message": "go", "context": {"k": 1}})
    first = make_agent("first", go, text("handed"))
    second = make_agent("second", text("second answer", delay=2.0))
    swarm = Swarm([first, second], runtime="ray")
    host_name: str | None = None
    events: list[dict[str, Any]] = []
    killed = False
    async for event in swarm.stream_async("task"):
        events.append(event)
        if host_name is None:
            host_name = swarm._node_runner.orchestration_host_name
        if event["type"] == "multiagent_node_start" and event["node_id"] == "second" and not killed:
            assert host_name is not None
            os.kill((await actor_of(host_name).ready.remote())["pid"], signal.SIGKILL)
            killed = True
    assert killed, "the second member never started"
    result = events[-1]["result"]
    assert result.status == Status.COMPLETED, result
    assert [n.node_id for n in result.node_history] == ["first", "second"]
    assert str(result.results["second"].result).strip() == "second answer"
    assert [e["node_id"] for e in events if e["type"] == "multiagent_node_stop"] == ["first", "second"]
    assert [e["to_node_ids"] for e in events if e["type"] == "multiagent_handoff"] == [["second"]]
    assert (await default_pool().slot_info(swarm._node_runner.slot_key("first")))["runs"] == 1  # not run again
    assert len(swarm.nodes["first"].executor.messages) == 4  # prompt, handoff call, its result, "handed"
    swarm.shutdown()


async def test_an_orchestration_host_killed_for_good_mid_run_the_run_goes_to_its_replacement() -> None:
    """The orchestration host is killed for good (as another driver's pool shutdown would) while node "b" runs.

    The run is sent to a new orchestration host; node "a" (completed on the node pool, which lives on) is
    answered by its slot, not run again.
    """
    import ray

    from ray_harness.runtime._multiagent_pool import default_pool

    builder = GraphBuilder()
    builder.add_node(make_agent("a", *[text("a done")] * 2), "a")
    builder.add_node(make_agent("b", *[text("b done", delay=2.0)] * 2), "b")
    builder.add_edge("a", "b")
    graph = builder.build(runtime="ray")
    old: Any = None
    events: list[dict[str, Any]] = []
    async for event in graph.stream_async("go"):
        events.append(event)
        if event["type"] == "multiagent_node_start" and event["node_id"] == "b" and old is None:
            old = actor_of(graph._node_runner.orchestration_host_name)
            ray.kill(old, no_restart=True)
    assert old is not None, "node b never started"
    result = events[-1]["result"]
    assert result.status == Status.COMPLETED
    assert [e["node_id"] for e in events if e["type"] == "multiagent_node_stop"] == ["a", "b"]
    assert actor_of(graph._node_runner.orchestration_host_name)._actor_id != old._actor_id
    assert (await default_pool().slot_info(graph._node_runner.slot_key("a")))["runs"] == 1
    assert [len(graph.nodes[n].executor.messages) for n in ("a", "b")] == [2, 2]
    graph.shutdown()


async def test_an_orchestration_host_killed_when_a_member_runs_again_no_completed_run_runs_again() -> None:
    """A swarm hands back to its first member; the orchestration host dies during that second visit.

    The re-sent run gets both completed runs (first's and second's) from their slots, each as it was sent — first's
    slot has run again since, and still answers its earlier run — and only the visit that was going on runs.
    """
    import signal

    from ray_harness.runtime._multiagent_pool import default_pool

    go = tool_call("handoff_to_agent", {"agent_name": "second", "message": "go"})
    back = tool_call("handoff_to_agent", {"agent_name": "first", "message": "back"})
    swarm = Swarm([make_agent("first", go, text("handed"), text("final", delay=2.0)),
                   make_agent("second", back, text("handed back"))], runtime="ray")
    visits = 0
    events: list[dict[str, Any]] = []
    async for event in swarm.stream_async("task"):
        events.append(event)
        if event["type"] == "multiagent_node_start" and event["node_id"] == "first":
            visits += 1
            if visits == 2:
                host = actor_of(swarm._node_runner.orchestration_host_name)
                os.kill((await host.ready.remote())["pid"], signal.SIGKILL)
    # The visit that was going on ran again with the same script: it repeats what the caller got of it (its
    # start), which is not reported twice.
    assert visits == 2, visits
    result = events[-1]["result"]
    assert result.status == Status.COMPLETED, result
    assert [n.node_id for n in result.node_history] == ["first", "second", "first"]
    assert [e["node_id"] for e in events if e["type"] == "multiagent_node_stop"] == ["first", "second", "first"]
    assert [e["to_node_ids"] for e in events if e["type"] == "multiagent_handoff"] == [["second"], ["first"]]
    runs = [(await default_pool().slot_info(swarm._node_runner.slot_key(n)))["runs"] for n in ("first", "second")]
    assert runs == [2, 1]
    assert str(result.results["first"].result).strip() == "final"
    swarm.shutdown()
