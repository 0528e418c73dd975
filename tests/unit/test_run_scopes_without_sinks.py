"""``run_scope`` / ``node_scope`` (entered per graph invocation and per node) report to the metric sinks.

Without a sink they only set the tags: the outcome (the run's or node's status) is asked for the sinks alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from ray_harness.telemetry import metrics
from ray_harness.telemetry.runs import current_tags, node_scope, run_scope


class _Sink(metrics.MetricsSink):
    def __init__(self) -> None:
        self.reports: list[tuple[Any, ...]] = []

    def run_finished(self, run: str, kind: str, name: str, status: str) -> None:
        self.reports.append(("run_finished", kind, name, status))

    def node_finished(self, run: str, node: str, status: str, duration_s: float) -> None:
        self.reports.append(("node_finished", node, status, duration_s >= 0))


@pytest.fixture
def no_sinks() -> Iterator[None]:
    installed = list(metrics.sinks())
    for sink in installed:
        metrics.remove_sink(sink)
    try:
        yield
    finally:
        for sink in installed:
            metrics.add_sink(sink)


def test_without_sinks_the_scopes_set_tags_and_ask_no_outcome(no_sinks: None) -> None:
    asked: list[str] = []

    def outcome(what: str) -> Any:
        asked.append(what)
        return "failed"

    with run_scope("graph", "g", nodes=1, outcome=lambda: outcome("run")) as run:
        assert re.fullmatch(r"[0-9a-f]{16}", run)
        with node_scope("a", outcome=lambda: outcome("node")):
            assert current_tags() == {"graph": "g", "run": run, "node": "a"}
        assert current_tags() == {"graph": "g", "run": run}
    assert current_tags() == {}
    assert asked == []


def test_with_a_sink_the_scopes_report_the_outcome(no_sinks: None) -> None:
    sink = metrics.add_sink(_Sink())
    try:
        with run_scope("graph", "g", nodes=1, outcome=lambda: "interrupted"):
            with node_scope("a", outcome=lambda: "failed"):
                pass
            with pytest.raises(KeyError), node_scope("b", outcome=lambda: "completed"):
                raise KeyError("b")
    finally:
        metrics.remove_sink(sink)
    assert sink.reports == [("node_finished", "a", "failed", True), ("node_finished", "b", "failed", True),
                            ("run_finished", "graph", "g", "interrupted")]
