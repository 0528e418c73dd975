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
