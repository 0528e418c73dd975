"""Telemetry across actors: spans of agents in actors join the driver's trace; Ray metrics are scraped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration._otlp import Receiver, receiving, wait

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    with receiving(monkeypatch) as receiver:
        yield receiver


_wait = wait


def test_actor_spans_share_the_driver_trace(otlp: Receiver) -> None:
    from opentelemetry import trace

    from ray_harness.runtime import AgentPool, RemoteAgent

    name = f"traced-{uuid.uuid4().hex[:6]}"
    remote = RemoteAgent("tests.integration.agents:calculator", name=name)
    pool = AgentPool(size=1, namespace=f"ray_harness_traced_{uuid.uuid4().hex[:6]}")
    try:
        with trace.get_tracer("test").start_as_current_span("driver") as driver:
            remote("what is 2+3?")
            from ray_harness.agent.agent import run_sync

            run_sync(pool.run("tests.integration.agents:calculator", "again", run_id="traced-run"))
        trace_id = driver.get_span_context().trace_id.to_bytes(16, "big")
        span_id = driver.get_span_context().span_id.to_bytes(8, "big")

        def actor_roots() -> list[Any]:
            return [s for s in otlp.spans if s.name.startswith("invoke_agent") and s.trace_id == trace_id]

        _wait(lambda: len(actor_roots()) >= 2)
        assert all(s.parent_span_id == span_id for s in actor_roots())  # children of the driver span
        names = {s.name for s in otlp.spans if s.trace_id == trace_id}
        assert {"chat", "execute_event_loop_cycle"} <= names
        assert any(n.startswith("execute_tool") for n in names)
    finally:
        remote.shutdown()
        pool.shutdown()


def test_actor_spans_reach_an_otlp_grpc_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    """setup("otlp-grpc", endpoint="http://...") in the driver: actors configured from the inherited OTEL_* variables
    export over plaintext gRPC too (before: TLS to a plaintext receiver, and no actor span ever arrived)."""
    from opentelemetry import trace

    from ray_harness.runtime import RemoteAgent

    with receiving(monkeypatch, "grpc") as otlp:
        remote = RemoteAgent("tests.integration.agents:calculator", name=f"grpc-traced-{uuid.uuid4().hex[:6]}")
        try:
            with trace.get_tracer("test").start_as_current_span("driver grpc") as driver:
                remote("what is 2+3?")
            trace_id = driver.get_span_context().trace_id.to_bytes(16, "big")
            wait(lambda: any(s.name.startswith("invoke_agent") for s in otlp.in_trace(trace_id)), timeout=60,
                 what="the actor's invoke_agent span over gRPC")
            assert "driver grpc" in {s.name for s in otlp.in_trace(trace_id)}
        finally:
            remote.shutdown()


def test_ray_metrics_reach_the_prometheus_endpoint() -> None:
    import ray

    from ray_harness.runtime import AgentPool

    node = ray._private.worker.global_worker.node
    port = getattr(node, "metrics_export_port", None)
    if not port:
        pytest.skip("this Ray exposes no metrics export port")
    pool = AgentPool(size=1, namespace=f"ray_harness_metrics_{uuid.uuid4().hex[:6]}")
    try:
        from ray_harness.agent.agent import run_sync

        run_sync(pool.run("tests.integration.agents:calculator", "metrics please", run_id="metrics-run"))
    finally:
        pool.shutdown()

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return response.read().decode()

    text = ""

    def seen() -> bool:
        nonlocal text
        text = scrape()
        return "ray_harness_tokens" in text and "ray_harness_tool_calls" in text

    _wait(seen, timeout=60)
    token_lines = [line for line in text.splitlines() if "ray_harness_tokens" in line and not line.startswith("#")]
    assert any('direction="input"' in line and "agent=" in line for line in token_lines)
    tool_lines = [line for line in text.splitlines() if "ray_harness_tool_calls" in line and not line.startswith("#")]
    assert any('status="success"' in line for line in tool_lines)


def test_one_trace_per_run_and_every_span_has_its_parent(otlp: Receiver) -> None:
    """Pooled graph nodes, swarm members and evaluation rows continue the driver's trace.

    One test for the three: the default pool's hosts configure their exporter once, at their start, so
    they keep sending to the receiver of the test that started them.
    """
    from opentelemetry import trace

    from ray_harness.evaluation import evaluate
    from ray_harness.runtime._multiagent_pool import default_pool, orchestration_pool
    from tests.integration import observed_agents

    # Hosts started by earlier tests export to their receivers: the next use builds fresh hosts that use ours
    # (the orchestration hosts too: the graph's and the swarm's spans start there).
    default_pool().shutdown()
    orchestration_pool().shutdown()
    for kind in ("graph", "swarm", "evaluation"):
        target: Any = None
        with trace.get_tracer("test").start_as_current_span(f"driver {kind}") as driver:
            if kind == "graph":
                target = observed_agents.observed_graph()
                target("trace the graph")
            elif kind == "swarm":
                target = observed_agents.observed_swarm()
                target("trace the swarm")
            else:
                evaluate("tests.integration.observed_agents:metered", [{"prompt": "row"}], runtime="ray",
                         progress=False)
        if target is not None:
            target.shutdown()
        trace_id = driver.get_span_context().trace_id.to_bytes(16, "big")
        chats_expected = 4 if kind == "graph" else 2  # two model calls per metered agent

        def in_trace(trace_id: bytes = trace_id) -> list[Any]:
            return [s for s in otlp.spans if s.trace_id == trace_id]

        root = driver.get_span_context().span_id.to_bytes(8, "big")

        def orphans(trace_id: bytes = trace_id, root: bytes = root) -> list[str]:
            spans = in_trace(trace_id)
            ids = {s.span_id for s in spans} | {root}
            return [s.name for s in spans if s.parent_span_id and s.parent_span_id not in ids]

        def complete(wanted: int = chats_expected) -> bool:
            # Parents end (and are exported) after their children: wait until the trace closes up.
            return sum(s.name == "chat" for s in in_trace()) >= wanted and not orphans()

        try:
            _wait(complete, timeout=60)
        except AssertionError:
            raise AssertionError(f"{kind}: spans whose parent never arrived: {orphans()}") from None
        spans = in_trace()
        assert sum(s.name.startswith("invoke_agent") for s in spans) >= chats_expected // 2, kind


def test_each_evaluation_row_is_one_complete_trace_without_a_driver_span(otlp: Receiver) -> None:
    """Rows on pooled hosts (a list) and on Ray Data hosts (a Dataset): one trace per row, every parent present;
    under a driver span the Ray Data rows are its children."""
    import ray
    from opentelemetry import trace

    from ray_harness.evaluation import evaluate
    from ray_harness.runtime._multiagent_pool import default_pool

    default_pool().shutdown()  # hosts started by earlier tests export to their own receivers
    target = "tests.integration.observed_agents:metered"
    for kind in ("list", "dataset"):
        seen = len(otlp.spans)
        rows = [{"prompt": f"{kind} row {i}"} for i in range(2)]
        evaluate(target, rows if kind == "list" else ray.data.from_items(rows), runtime="ray", progress=False)

        def roots(seen: int = seen) -> list[Any]:
            return [s for s in otlp.spans[seen:] if s.name.startswith("invoke_agent") and not s.parent_span_id]

        wait(lambda: len(roots()) >= 2, what=f"{kind}: a root span per row")
        assert len({s.trace_id for s in roots()}) == len(roots()) == 2, kind  # one trace per row
        for root in roots():
            def complete(trace_id: bytes = root.trace_id) -> bool:
                spans = otlp.in_trace(trace_id)
                return sum(s.name == "chat" for s in spans) >= 2 and not otlp.orphans(trace_id)

            try:
                wait(complete, timeout=60)
            except AssertionError:
                raise AssertionError(f"{kind}: spans whose parent never arrived: {otlp.orphans(root.trace_id)}"
                                     ) from None

    with trace.get_tracer("test").start_as_current_span("driver dataset") as driver:
        evaluate(target, ray.data.from_items([{"prompt": "a"}, {"prompt": "b"}]), progress=False)
    driver_trace = driver.get_span_context().trace_id.to_bytes(16, "big")
    driver_id = driver.get_span_context().span_id.to_bytes(8, "big")

    def children_complete() -> bool:
        spans = otlp.in_trace(driver_trace)
        return sum(s.name == "chat" for s in spans) >= 4 and not otlp.orphans(driver_trace, driver_id)

    wait(children_complete, timeout=60, what="the dataset rows under the driver span")
    agents = [s for s in otlp.in_trace(driver_trace) if s.name.startswith("invoke_agent")]
    assert len(agents) == 2 and all(s.parent_span_id == driver_id for s in agents)


def test_a_sandbox_actor_call_continues_the_trace(otlp: Receiver, tmp_path: Any) -> None:
    import os

    from opentelemetry import trace

    from ray_harness import Agent
    from ray_harness.runtime import RemoteSandbox
    from ray_harness.sandbox import LocalEnvironment
    from ray_harness.testing import ScriptedModel, text, tool_call

    sandbox = RemoteSandbox(LocalEnvironment(working_dir=tmp_path), name=f"traced-{uuid.uuid4().hex[:6]}")
    try:
        agent = Agent(ScriptedModel(tool_call("sandbox_shell", {"command": "echo traced"}), text("ran it")),
                      sandbox=sandbox)
        with trace.get_tracer("test").start_as_current_span("driver sandbox") as driver:
            assert "ran it" in str(agent("run it in the sandbox"))
    finally:
        sandbox.shutdown()
    trace_id = driver.get_span_context().trace_id.to_bytes(16, "big")
    # The tool streams the command (execute_streaming), so the span of the command is the actor's.
    wait(lambda: any(s.name == "sandbox execute" for s in otlp.in_trace(trace_id)), what="the sandbox execute span")

    def from_the_actor() -> list[Any]:
        return [s for s in otlp.in_trace(trace_id) if otlp.pids.get(s.span_id) not in (0, os.getpid())]

    wait(lambda: bool(from_the_actor()) and not otlp.orphans(trace_id), timeout=30,
         what="a span from the sandbox actor in the driver's trace")
    assert {s.name for s in from_the_actor()} >= {"sandbox execute"}


def test_metrics_of_a_call_from_another_driver_carry_that_drivers_job() -> None:
    """Tokens spent by a second driver in an agent this driver started count for the second driver's job.

    Read where they are recorded: the actor's Ray metrics sink, as handed to Ray (its default tag filled in).
    """
    import ray

    from ray_harness.runtime import RemoteAgent
    from tests.conftest import RAY_NAMESPACE

    name = f"job-tags-{uuid.uuid4().hex[:6]}"
    remote = RemoteAgent("tests.integration.job_agents:job_reporter", name=name)
    try:
        remote("mine")  # this driver's own call
        output = _run_driver(f"""
            import ray
            from ray_harness import runtime
            from ray_harness.runtime import RemoteAgent
            runtime.init(namespace={RAY_NAMESPACE!r})
            RemoteAgent.get({name!r})("theirs")
            print(ray.get_runtime_context().get_job_id())
        """)
        other = output.strip().splitlines()[-1]
        own = ray.get_runtime_context().get_job_id()
        assert other and other != own
        assert str(remote("report")) == "reported\n"
        reported = remote.messages[-2]["content"][0]["toolResult"]["content"][0]["text"]
        assert json.loads(reported) == sorted([own, other])  # before: the actor's creator's job only
    finally:
        remote.shutdown()


def _run_driver(code: str) -> str:
    """Run ``code`` in a second Python driver connected to the test session's Ray; its stdout."""
    import ray

    address = ray.get_runtime_context().gcs_address  # the session's own GCS, not "auto"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": address}
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, timeout=240,
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout
