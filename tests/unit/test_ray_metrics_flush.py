"""RayMetricsSink hands its histogram observations to Ray's inner metric as ``observe`` would (no Ray running)."""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness.runtime._telemetry import RayMetricsSink  # imports Ray's metric classes (they need no Ray running)


class _Inner:
    """Stands in for Ray's C++ metric behind a ``ray.util.metrics`` object: keeps the ``record`` calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, dict[str, str]]] = []

    def record(self, value: float, tags: dict[str, str]) -> None:
        self.calls.append((value, dict(tags)))


@pytest.fixture
def sink() -> Any:
    made = RayMetricsSink(flush_interval_s=3600)  # nothing reaches Ray during the test (no Ray is started)
    made._job = "driver-1"
    yield made
    made.close()


def _observe_calls(histogram: Any, observations: list[tuple[float, dict[str, str]]]) -> list[tuple[float, dict[str, str]]]:
    """The ``record`` calls Ray's own ``observe`` makes for these observations."""
    inner, histogram._metric = histogram._metric, _Inner()
    try:
        for value, tags in observations:
            histogram.observe(value, tags)
        return list(histogram._metric.calls)
    finally:
        histogram._metric = inner


def test_a_flush_makes_the_record_calls_observe_makes(sink: Any) -> None:
    sink.rate_limit_wait("openai:gpt", 0.25)
    sink.rate_limit_wait("openai:gpt", 0.5)
    sink.rate_limit_wait("bedrock:claude", 3.0)
    sink.node_finished("r1", "draft", "completed", 0.07)
    expected = {
        "rate": _observe_calls(sink._rate_wait, [(0.25, {"limiter": "openai:gpt", "job": "driver-1"}),
                                                 (0.5, {"limiter": "openai:gpt", "job": "driver-1"}),
                                                 (3.0, {"limiter": "bedrock:claude", "job": "driver-1"})]),
        "node": _observe_calls(sink._node_duration, [(0.07, {"graph": "", "swarm": "", "node": "draft",
                                                             "status": "completed", "job": "driver-1"})]),
    }
    sink._rate_wait._metric, sink._node_duration._metric = _Inner(), _Inner()
    sink.flush()
    assert sink._rate_wait._metric.calls == expected["rate"]
    assert sink._node_duration._metric.calls == expected["node"]


def test_a_tag_set_is_merged_and_checked_once(sink: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    histogram = sink._rate_wait
    histogram._metric = _Inner()
    checks: list[dict[str, str]] = []
    check = histogram._validate_tags
    monkeypatch.setattr(histogram, "_validate_tags", lambda tags: (checks.append(tags), check(tags))[1])
    for _ in range(3):
        sink.rate_limit_wait("openai:gpt", 0.25)
        sink.flush()
    assert len(histogram._metric.calls) == 3 and len(checks) == 1


def test_model_calls_are_counted_per_scope_and_their_latencies_recorded_without_the_run(
        sink: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from ray_harness.telemetry.runs import node_scope, run_scope

    counted: list[tuple[str, float, dict[str, str]]] = []
    for name in ("_calls", "_tokens", "_cost"):
        monkeypatch.setattr(getattr(sink, name), "inc", lambda amount, tags, name=name: counted.append(
            (name, amount, tags)))
    usage = {"inputTokens": 3, "outputTokens": 2}
    observed: list[tuple[float, dict[str, str]]] = []
    with run_scope("graph", "g", run_id="r1"):
        for node, latency in (("a", 0.1), ("a", 0.2), ("b", 0.3)):  # the tags follow the scope, call by call
            with node_scope(node):
                sink.model_call("agent", usage, latency, 0.5)
                observed.append((latency, {"agent": "agent", "graph": "g", "node": node}))
    with run_scope("graph", "g", run_id="r2"), node_scope("a"):  # another run: the same latency series
        sink.model_call("agent", {"inputTokens": 1}, 0.4, 0.0)
        observed.append((0.4, {"agent": "agent", "graph": "g", "node": "a"}))
    expected = _observe_calls(sink._latency, observed)
    sink._latency._metric = _Inner()
    sink.flush()
    assert sink._latency._metric.calls == expected
    scope = {"agent": "agent", "graph": "g"}
    assert counted == [
        ("_calls", 2, {**scope, "run": "r1", "node": "a"}),
        ("_tokens", 6, {**scope, "run": "r1", "node": "a", "direction": "input"}),
        ("_tokens", 4, {**scope, "run": "r1", "node": "a", "direction": "output"}),
        ("_cost", 1.0, {**scope, "run": "r1", "node": "a"}),
        ("_calls", 1, {**scope, "run": "r1", "node": "b"}),
        ("_tokens", 3, {**scope, "run": "r1", "node": "b", "direction": "input"}),
        ("_tokens", 2, {**scope, "run": "r1", "node": "b", "direction": "output"}),
        ("_cost", 0.5, {**scope, "run": "r1", "node": "b"}),
        ("_calls", 1, {**scope, "run": "r2", "node": "a"}),
        ("_tokens", 1, {**scope, "run": "r2", "node": "a", "direction": "input"}),
    ]
