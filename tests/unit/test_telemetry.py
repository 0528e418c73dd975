from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ray_harness import Agent, tool
from ray_harness.telemetry import config as telemetry_config
from ray_harness.testing import ScriptedModel, text, tool_call

FAKE_KEY = "sk-ant-api03-THIS-IS-A-FAKE-KEY-123456"


@tool
def lookup(query: str) -> str:
    """Look something up."""
    with trace.get_tracer("user-code").start_as_current_span("user span"):
        return f"found {query}"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    monkeypatch.setitem(telemetry_config._state, "capture_content", None)
    monkeypatch.delenv("RAY_HARNESS_CAPTURE_CONTENT", raising=False)
    yield exporter
    provider.shutdown()


def _tree(exporter: InMemorySpanExporter) -> dict[str, str | None]:
    finished = exporter.get_finished_spans()
    by_id = {span.context.span_id: span.name for span in finished}
    return {span.name: by_id.get(span.parent.span_id) if span.parent else None for span in finished}


def test_span_tree_of_a_tool_round_trip(spans: InMemorySpanExporter) -> None:
    agent = Agent(ScriptedModel(tool_call("lookup", {"query": "x"}, tool_use_id="t1"), text("done")), tools=[lookup],
                  name="researcher", trace_attributes={"tenant": "acme"})
    with trace.get_tracer("driver").start_as_current_span("driver"):
        agent("find x")
    tree = _tree(spans)
    assert tree["invoke_agent researcher"] == "driver"
    assert tree["execute_event_loop_cycle"] == "invoke_agent researcher"
    assert tree["chat"] == "execute_event_loop_cycle"
    assert tree["execute_tool lookup"] == "execute_event_loop_cycle"
    assert tree["user span"] == "execute_tool lookup"
    finished = {span.name: span for span in spans.get_finished_spans()}
    tool_span = finished["execute_tool lookup"].attributes
    assert tool_span["gen_ai.tool.name"] == "lookup"
    assert tool_span["gen_ai.tool.call.id"] == "t1"
    assert tool_span["ray_harness.tool.status"] == "success"
    chat = finished["chat"].attributes
    assert chat["gen_ai.request.model"] == "scripted"
    assert chat["gen_ai.usage.input_tokens"] > 0
    assert all(span.attributes.get("tenant") == "acme" for span in finished.values()
               if span.name not in ("driver", "user span"))
    assert finished["invoke_agent researcher"].attributes["gen_ai.response.finish_reasons"] == ("end_turn",)


def test_a_failed_tool_call_span_has_error_status(spans: InMemorySpanExporter) -> None:
    from opentelemetry.trace import StatusCode

    from ray_harness import tool

    @tool
    def broken(query: str) -> str:
        """Fails."""
        raise RuntimeError("backend down")

    Agent(ScriptedModel(tool_call("broken", {"query": "x"}), text("sorry")), tools=[broken])("go")
    span = {span.name: span for span in spans.get_finished_spans()}["execute_tool broken"]
    assert span.attributes["ray_harness.tool.status"] == "error"
    assert span.status.status_code == StatusCode.ERROR  # as the GenAI conventions ask, not only an attribute


def test_content_is_not_recorded_by_default(spans: InMemorySpanExporter) -> None:
    Agent(ScriptedModel(text("ok")))(f"my key is {FAKE_KEY}")
    for span in spans.get_finished_spans():
        assert FAKE_KEY not in str(dict(span.attributes or {}))


def test_content_recorded_when_opted_in(spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_HARNESS_CAPTURE_CONTENT", "1")
    Agent(ScriptedModel(text("ok")))("hello there")
    agent_span = next(s for s in spans.get_finished_spans() if s.name.startswith("invoke_agent"))
    assert "hello there" in agent_span.attributes["gen_ai.input.messages"]


def test_failed_invocation_marks_the_span(spans: InMemorySpanExporter) -> None:
    with pytest.raises(RuntimeError):
        Agent(ScriptedModel(RuntimeError("provider down")), retry_strategy=None)("x")
    agent_span = next(s for s in spans.get_finished_spans() if s.name.startswith("invoke_agent"))
    assert not agent_span.status.is_ok


def test_otel_metrics_of_a_tool_round_trip() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from ray_harness.telemetry import metrics

    reader = InMemoryMetricReader()
    sink = metrics.enable_otel_metrics(MeterProvider(metric_readers=[reader]))
    try:
        usage = {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}
        agent = Agent(ScriptedModel(tool_call("lookup", {"query": "x"}, usage=usage), text("done", usage=usage)),
                      tools=[lookup], name="m")
        agent("go")
    finally:
        metrics.remove_sink(sink)
    points: dict[tuple[str, tuple], float] = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, tuple(sorted(point.attributes.items())))
                    points[key] = getattr(point, "value", getattr(point, "count", None))
    assert points[("ray_harness_model_calls", (("agent", "m"),))] == 2
    assert points[("ray_harness_tokens", (("agent", "m"), ("direction", "input")))] == 14
    assert points[("ray_harness_tokens", (("agent", "m"), ("direction", "output")))] == 6
    assert points[("ray_harness_tool_calls", (("agent", "m"), ("status", "success"), ("tool", "lookup")))] == 1
    assert points[("ray_harness_active_agents", (("agent", "m"),))] == 0


def test_graph_node_and_sandbox_spans(spans: InMemorySpanExporter, tmp_path: object) -> None:
    import asyncio

    from ray_harness.multiagent import GraphBuilder
    from ray_harness.sandbox import LocalEnvironment

    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(text("a")), name="first"), "first")
    builder.add_node(Agent(ScriptedModel(text("b")), name="second"), "second")
    builder.add_edge("first", "second")
    builder.build(runtime="local")("task")
    tree = _tree(spans)
    assert tree["execute_node first"] == "invoke_graph"
    assert tree["invoke_agent first"] == "execute_node first"
    assert tree["invoke_agent second"] == "execute_node second"

    result = asyncio.run(LocalEnvironment().execute(f"echo {FAKE_KEY}"))
    assert result.exit_code == 0
    (execute,) = [s for s in spans.get_finished_spans() if s.name == "execute"]
    assert execute.attributes["ray_harness.sandbox.exit_code"] == 0
    assert FAKE_KEY not in str(dict(execute.attributes))


def test_otlp_grpc_export_reaches_a_real_grpc_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    """telemetry.setup("otlp-grpc") against a real OTLP/gRPC TraceService on 127.0.0.1."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    from ray_harness import telemetry

    received: list[str] = []

    class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):  # type: ignore[no-untyped-def]
            for resource_spans in request.resource_spans:
                for scope in resource_spans.scope_spans:
                    received.extend(span.name for span in scope.spans)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Receiver(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    previous = trace._TRACER_PROVIDER
    for key in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
                "RAY_HARNESS_CAPTURE_CONTENT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(telemetry_config, "_state", {"capture_content": None, "env_checked": True, "provider": None})
    provider = telemetry.setup("otlp-grpc", endpoint=f"http://127.0.0.1:{port}", simple=True)
    try:
        Agent(ScriptedModel(text("ok")), name="grpc-agent")("hi")
    finally:
        provider.shutdown()
        trace._TRACER_PROVIDER = previous
        server.stop(0)
        for key in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL"):
            os.environ.pop(key, None)  # setup() exported them for actors; later tests must not inherit them
    assert "invoke_agent grpc-agent" in received and "chat" in received


def test_task_label_names_the_innermost_node_or_row() -> None:
    from ray_harness.telemetry.runs import node_scope, row_scope, run_scope, task_label

    assert task_label() == ""
    with run_scope("eval", "my_eval"):
        assert task_label() == ""  # an evaluation, no row yet
        with row_scope("17"):
            assert task_label() == "ray_harness.row:my_eval/17"
            with run_scope("graph", "review"), node_scope("writer"):
                assert task_label() == "ray_harness.node:review/writer"  # a graph per row: its nodes win
            assert task_label() == "ray_harness.row:my_eval/17"
    with run_scope("swarm", "team"), node_scope("solo"):
        assert task_label() == "ray_harness.node:team/solo"
    with run_scope("graph", "pipeline"), node_scope("support"):
        assert task_label() == "ray_harness.node:pipeline/support"
        with run_scope("swarm", "desk"), node_scope("triage"):  # a swarm as a graph node: its members are its own
            assert task_label() == "ray_harness.node:desk/triage"
        assert task_label() == "ray_harness.node:pipeline/support"
    with run_scope("swarm", "desk"), node_scope("triage"), run_scope("graph", "inner"), node_scope("step"):
        assert task_label() == "ray_harness.node:inner/step"  # and a graph nested in a swarm member



async def test_a_stream_closed_mid_batch_has_ended_its_spans_when_aclose_returns(
        spans: InMemorySpanExporter) -> None:
    from tests.closing import two_waiting_tools
    from tests.unit.test_cancel_limits import _close_mid_batch

    tools: list[str] = []
    await _close_mid_batch(two_waiting_tools(tools), tools)
    names = sorted(span.name for span in spans.get_finished_spans())
    assert names == ["chat", "execute_event_loop_cycle", "execute_tool wait_long", "execute_tool wait_long",
                     "invoke_agent agent"]


def test_a_cancelled_invocation_leaves_its_spans_unset_and_names_the_cancellation(
        spans: InMemorySpanExporter) -> None:
    """As Strands: a cancellation is no failure (status UNSET), the span says what cancelled it."""
    import asyncio

    from opentelemetry.trace import StatusCode

    started = asyncio.Event()

    @tool
    async def slow(query: str) -> str:
        """Waits."""
        started.set()
        await asyncio.sleep(30)
        return "late"

    async def run() -> None:
        agent = Agent(ScriptedModel(tool_call("slow", {"query": "x"}), text("done")), tools=[slow], name="waiter")
        task = asyncio.create_task(agent.invoke_async("go"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    finished = {span.name: span for span in spans.get_finished_spans()}
    for name in ("invoke_agent waiter", "execute_event_loop_cycle"):
        assert finished[name].status.status_code == StatusCode.UNSET
        assert finished[name].attributes["ray_harness.cancellation.type"] == "CancelledError"
        assert not finished[name].events  # no exception recorded


def test_list_trace_attributes_reach_every_span_and_invalid_ones_none(spans: InMemorySpanExporter) -> None:
    agent = Agent(ScriptedModel(tool_call("lookup", {"query": "x"}), text("done")), tools=[lookup], name="tagged",
                  trace_attributes={"tags": ["a", "b"], "bad": {"nested": 1}})
    agent("go")
    for span in spans.get_finished_spans():
        if span.name != "user span":
            assert span.attributes.get("tags") == ("a", "b"), span.name
            assert "bad" not in span.attributes


def test_chat_and_tool_spans_carry_strands_usage_and_status_names(spans: InMemorySpanExporter) -> None:
    usage = {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10, "cacheReadInputTokens": 4}
    Agent(ScriptedModel(tool_call("lookup", {"query": "x"}, usage=usage), text("done")), tools=[lookup])("go")
    finished = spans.get_finished_spans()
    chat = next(span for span in finished if span.name == "chat").attributes
    assert (chat["gen_ai.usage.total_tokens"], chat["gen_ai.usage.cache_read.input_tokens"]) == (10, 4)
    assert "gen_ai.usage.cache_creation.input_tokens" not in chat  # not reported by the provider
    tool_span = next(span for span in finished if span.name == "execute_tool lookup").attributes
    assert tool_span["gen_ai.tool.status"] == "success"


def _otel_metric_points(work: Callable[[], object]) -> list[tuple[str, dict[str, Any], Any]]:
    """Do ``work`` with OpenTelemetry metrics enabled; every data point recorded: (metric, attributes, point)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from ray_harness.telemetry import metrics

    reader = InMemoryMetricReader()
    sink = metrics.enable_otel_metrics(MeterProvider(metric_readers=[reader]))
    try:
        work()
    finally:
        metrics.remove_sink(sink)
    return [(metric.name, dict(point.attributes), point) for resource in reader.get_metrics_data().resource_metrics
            for scope in resource.scope_metrics for metric in scope.metrics for point in metric.data.data_points]


def _run_report_graph() -> None:
    from ray_harness.multiagent import GraphBuilder

    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(text("a")), name="solo"), "only")
    builder.set_graph_id("report")
    builder.build(runtime="local")("task")


def test_otel_metrics_carry_the_run_scope_tags() -> None:
    calls = [attributes for name, attributes, _ in _otel_metric_points(_run_report_graph)
             if name == "ray_harness_model_calls"]
    assert len(calls) == 1
    assert calls[0]["agent"] == "solo" and calls[0]["graph"] == "report" and calls[0]["node"] == "only"
    assert calls[0]["run"]


def test_otel_metrics_have_the_run_level_metrics_of_the_ray_sink() -> None:
    """Node durations, runs in progress, evaluation rows and rate-limit waits, as on Ray (before: none of them)."""
    from ray_harness.evaluation import evaluate
    from ray_harness.telemetry import metrics

    def work() -> None:
        _run_report_graph()
        evaluate("tests.eval_targets:echo_agent", [{"prompt": "row"}], runtime="local", progress=False)
        metrics.rate_limit_wait("openai:gpt-x", 0.25)

    points = {(name, tuple(sorted((k, v) for k, v in attributes.items() if k != "run"))): point
              for name, attributes, point in _otel_metric_points(work)}
    assert points[("ray_harness_node_duration_s", (("graph", "report"), ("node", "only"), ("status", "completed")))
                  ].count == 1
    assert points[("ray_harness_runs_active", (("kind", "graph"), ("name", "report")))].value == 0
    assert points[("ray_harness_runs_active", (("kind", "eval"), ("name", "tests.eval_targets:echo_agent")))
                  ].value == 0
    assert points[("ray_harness_eval_rows", (("eval", "tests.eval_targets:echo_agent"), ("status", "completed")))
                  ].value == 1
    assert points[("ray_harness_rate_limit_wait_s", (("limiter", "openai:gpt-x"),))].sum == 0.25


def test_strands_attribute_names_for_the_tools_and_the_model_latency(spans: InMemorySpanExporter) -> None:
    """As Strands' tracer: ``gen_ai.agent.tools`` on invoke_agent, ``gen_ai.server.request.duration`` (ms) on chat."""
    import json

    Agent(ScriptedModel(text("done", delay=0.02)), tools=[lookup], name="timed")("go")
    finished = {span.name: span for span in spans.get_finished_spans()}
    assert json.loads(finished["invoke_agent timed"].attributes["gen_ai.agent.tools"]) == ["lookup"]
    assert finished["chat"].attributes["gen_ai.server.request.duration"] >= 20


def test_graph_swarm_and_node_spans_say_how_the_run_ended(spans: InMemorySpanExporter) -> None:
    """A graph returns FAILED (under "continue") or CANCELLED without raising: its spans said nothing of it."""
    from opentelemetry.trace import StatusCode

    from ray_harness import Swarm
    from ray_harness.hooks import BeforeNodeCallEvent
    from ray_harness.multiagent import GraphBuilder, Status

    graphs: list[object] = []

    @tool
    def stop_everything() -> str:
        """Cancel the graph this agent runs in."""
        graphs[0].cancel()  # type: ignore[attr-defined]
        return "cancelling"

    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(RuntimeError("model down")), name="bad", retry_strategy=None), "bad")
    builder.add_node(Agent(ScriptedModel(text("fine")), name="good"), "good")
    builder.set_failure_policy("continue")
    assert builder.build(runtime="local")("go").status == Status.FAILED
    failed = {span.name: span for span in spans.get_finished_spans()}
    assert failed["invoke_graph"].attributes["ray_harness.status"] == "failed"
    assert failed["invoke_graph"].status.status_code == StatusCode.ERROR
    assert failed["execute_node good"].attributes["ray_harness.status"] == "completed"
    assert failed["execute_node good"].status.status_code == StatusCode.UNSET
    spans.clear()

    stopper = GraphBuilder()
    stopper.add_node(Agent(ScriptedModel(tool_call("stop_everything", {}), text("unreached")),
                           tools=[stop_everything], name="stopper"), "stopper")
    graphs.append(stopper.build(runtime="local"))
    assert graphs[0]("go").status == Status.CANCELLED  # type: ignore[operator]
    cancelled = {span.name: span for span in spans.get_finished_spans()}
    assert cancelled["invoke_graph"].attributes["ray_harness.status"] == "cancelled"
    assert cancelled["execute_node stopper"].attributes["ray_harness.status"] == "cancelled"
    assert cancelled["invoke_graph"].status.status_code == StatusCode.UNSET  # a cancel is no failure
    spans.clear()

    swarm = Swarm([Agent(ScriptedModel(text("waiting")), name="solo")], runtime="local")
    swarm.add_hook(lambda event: event.interrupt("approve", "run it?"), BeforeNodeCallEvent)
    assert swarm("go").status == Status.INTERRUPTED
    interrupted = {span.name: span for span in spans.get_finished_spans()}
    assert interrupted["invoke_swarm"].attributes["ray_harness.status"] == "interrupted"


def test_a_span_scope_left_by_a_cancellation_names_it(spans: InMemorySpanExporter) -> None:
    import asyncio

    from opentelemetry.trace import StatusCode

    from ray_harness.telemetry.tracing import span_scope

    with pytest.raises(asyncio.CancelledError), span_scope("invoke_graph"):
        raise asyncio.CancelledError
    with pytest.raises(ValueError), span_scope("execute_node n"):
        raise ValueError("bad input")
    finished = {span.name: span for span in spans.get_finished_spans()}
    assert finished["invoke_graph"].status.status_code == StatusCode.UNSET
    assert finished["invoke_graph"].attributes["ray_harness.cancellation.type"] == "CancelledError"
    assert finished["execute_node n"].status.status_code == StatusCode.ERROR


def test_graph_and_swarm_trace_attributes_reach_their_invoke_spans(spans: InMemorySpanExporter) -> None:
    # Strands' Graph(...) and Swarm(...) take trace_attributes too; a switched import must not be a TypeError.
    from ray_harness.multiagent import Graph, GraphBuilder, Swarm

    built = GraphBuilder()
    built.add_node(Agent(ScriptedModel(text("a")), name="first"), "first")
    template = built.build(runtime="local")
    graph = Graph(template.nodes, template.edges, template.entry_points, runtime="local",
                  trace_attributes={"team": "search", "tags": ["a", "b"], "bad": {"x": 1}})
    graph("task")
    Swarm([Agent(ScriptedModel(text("done")), name="solo")], runtime="local", trace_attributes={"team": "desk"})("task")
    finished = {span.name: span for span in spans.get_finished_spans()}
    assert finished["invoke_graph"].attributes["team"] == "search"
    assert tuple(finished["invoke_graph"].attributes["tags"]) == ("a", "b")
    assert "bad" not in finished["invoke_graph"].attributes
    assert finished["invoke_swarm"].attributes["team"] == "desk"
