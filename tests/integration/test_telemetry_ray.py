"""Telemetry across actors: spans of agents in actors join the driver's trace; Ray metrics are scraped."""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


class _Receiver:
    """A minimal OTLP/HTTP trace receiver on 127.0.0.1 (protobuf, as the real exporter sends it)."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.spans: list[Any] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource_spans in request.resource_spans:
                    for scope in resource_spans.scope_spans:
                        receiver.spans.extend(scope.spans)
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Receiver]:
    from opentelemetry import trace

    from ray_harness import telemetry
    from ray_harness.telemetry import config

    receiver = _Receiver()
    previous_provider = trace._TRACER_PROVIDER
    monkeypatch.setattr(config, "_state", {"capture_content": None, "env_checked": False, "provider": None})
    # Set (not delete) before setup(), which exports them for actors: monkeypatch records nothing for deleting
    # an absent variable, so the value setup() wrote would outlive the test and send every later process's
    # spans to this receiver once it is gone (their exit then hangs on export retries).
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)  # setup("otlp-http") does not set it
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # actors flush their batches every 100 ms
    provider = telemetry.setup("otlp-http", endpoint=receiver.endpoint, simple=True)
    yield receiver
    provider.shutdown()
    trace._TRACER_PROVIDER = previous_provider
    receiver.close()


def _wait(predicate: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for telemetry"
        time.sleep(0.1)


def test_actor_spans_share_the_driver_trace(otlp: _Receiver) -> None:
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


def test_one_trace_per_run_and_every_span_has_its_parent(otlp: _Receiver) -> None:
    """Pooled graph nodes, swarm members and evaluation rows continue the driver's trace.

    One test for the three: the default pool's hosts configure their exporter once, at their start, so
    they keep sending to the receiver of the test that started them.
    """
    from opentelemetry import trace

    from ray_harness.evaluation import evaluate
    from ray_harness.runtime._multiagent_pool import default_pool
    from tests.integration import observed_agents

    # Hosts started by earlier tests export to their receivers: the next use builds fresh hosts that use ours.
    default_pool().shutdown()
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
