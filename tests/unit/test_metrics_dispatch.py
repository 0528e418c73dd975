"""The metrics fan-out calls each installed sink's report methods, looked up when the sink was added."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ray_harness.telemetry import metrics


class _Sink(metrics.BaseSink):
    def __init__(self) -> None:
        self.reports: list[tuple[Any, ...]] = []

    def model_call(self, agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
        self.reports.append(("model_call", agent, usage, latency_s, cost_usd))

    def node_started(self, run: str, node: str) -> None:
        self.reports.append(("node_started", run, node))


@pytest.fixture
def sink() -> Iterator[_Sink]:
    installed = _Sink()
    metrics.add_sink(installed)
    yield installed
    metrics.remove_sink(installed)


def test_a_sink_gets_the_reports_it_has_methods_for_in_order(sink: _Sink) -> None:
    metrics.active_agents("a", 1)  # BaseSink's: ignored
    metrics.model_call("a", {"inputTokens": 1}, 0.5, 0.25)
    metrics.node_started("r", "n")
    metrics.node_finished("r", "n", "completed", 0.1)  # no such method: not told
    assert sink.reports == [("model_call", "a", {"inputTokens": 1}, 0.5, 0.25), ("node_started", "r", "n")]


def test_a_removed_sink_gets_nothing_and_added_again_gets_its_methods_then(sink: _Sink) -> None:
    metrics.remove_sink(sink)
    metrics.node_started("r", "before")
    told: list[str] = []
    sink.node_started = lambda run, node: told.append(node)  # type: ignore[method-assign]
    metrics.add_sink(sink)
    metrics.add_sink(sink)  # twice: still one sink
    metrics.node_started("r", "after")
    assert sink.reports == [] and told == ["after"]


def test_a_sink_overriding_a_base_method_gets_that_report() -> None:
    class Counting(metrics.BaseSink):
        def __init__(self) -> None:
            self.deltas: list[int] = []

        def active_agents(self, agent: str, delta: int) -> None:
            self.deltas.append(delta)

    counting = Counting()
    metrics.add_sink(counting)
    try:
        metrics.active_agents("a", 1)
        metrics.active_agents("a", -1)
        metrics.interrupts_pending("a", 0)  # not overridden
    finally:
        metrics.remove_sink(counting)
    metrics.active_agents("a", 1)
    assert counting.deltas == [1, -1]
