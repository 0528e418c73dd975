"""The cheap checks the agent loop makes per invocation, model call and node: they follow the state they check."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from ray_harness import Agent, tool
from ray_harness.telemetry import config as telemetry_config, metrics
from ray_harness.telemetry.metrics import live_sinks
from ray_harness.telemetry.tracing import NOOP, get_tracer
from ray_harness.testing import ScriptedModel, text
from ray_harness.tools.base import AgentTool, ToolProvider
from ray_harness.tools.registry import ToolRegistry


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


class _Provider(ToolProvider):
    def __init__(self) -> None:
        self.loads = 0

    async def load_tools(self) -> list[AgentTool]:
        self.loads += 1
        return [ping]

    def close(self) -> None:
        return None


def test_live_sinks_is_the_installed_list_and_follows_add_and_remove() -> None:
    sink = metrics.BaseSink()
    assert live_sinks is metrics.sinks() and sink not in live_sinks
    metrics.add_sink(sink)
    try:
        assert live_sinks[-1] is sink  # the name imported before the sink was added sees it
    finally:
        metrics.remove_sink(sink)
    assert sink not in live_sinks


def test_an_invocation_reports_to_a_sink_added_after_the_loop_was_imported() -> None:
    deltas: list[int] = []
    sink = metrics.BaseSink()
    sink.active_agents = lambda agent, delta: deltas.append(delta)  # type: ignore[method-assign]
    metrics.add_sink(sink)
    try:
        Agent(ScriptedModel(text("ok")), callback_handler=None)("hi")
    finally:
        metrics.remove_sink(sink)
    assert deltas == [1, -1]


def test_has_providers_says_whether_a_provider_is_registered_and_the_agent_loads_it() -> None:
    registry = ToolRegistry()
    registry.process_tools([ping])
    assert not registry.has_providers  # a tool is no provider
    provider = _Provider()
    agent = Agent(ScriptedModel(text("ok")), tools=[provider], callback_handler=None)
    assert agent.tool_registry.has_providers and agent.tool_registry.providers == [provider]
    agent("hi")
    assert provider.loads == 1 and agent.tool_names == ["ping"]


def test_tracing_follows_a_provider_installed_after_the_first_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setitem(telemetry_config._state, "env_checked", True)
    assert not telemetry_config.tracing_enabled() and get_tracer() is NOOP
    provider = TracerProvider()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    try:
        assert telemetry_config.tracing_enabled() and get_tracer().enabled
    finally:
        provider.shutdown()


def test_one_recording_tracer_serves_calls_until_the_provider_or_capture_setting_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    monkeypatch.setitem(telemetry_config._state, "env_checked", True)
    monkeypatch.setitem(telemetry_config._state, "capture_content", None)
    monkeypatch.delenv("RAY_HARNESS_CAPTURE_CONTENT", raising=False)
    first, second = TracerProvider(), TracerProvider()
    exported = InMemorySpanExporter()
    second.add_span_processor(SimpleSpanProcessor(exported))
    try:
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", first)
        tracer = get_tracer()
        assert get_tracer() is tracer and not tracer.capture_content
        monkeypatch.setitem(telemetry_config._state, "capture_content", True)
        capturing = get_tracer()
        assert capturing is not tracer and capturing.capture_content
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", second)  # a provider installed later gets the spans
        Agent(ScriptedModel(text("ok")), callback_handler=None)("hi")
        assert get_tracer() is not capturing
        assert "invoke_agent" in {span.name.split(" ")[0] for span in exported.get_finished_spans()}
    finally:
        first.shutdown()
        second.shutdown()
