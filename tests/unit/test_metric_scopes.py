"""Run and node scopes: what every metric is tagged with, how the tags cross a process boundary, run reports."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from ray_harness import Agent, GraphBuilder, Swarm, tool
from ray_harness.hooks import BeforeNodeCallEvent
from ray_harness.multiagent import Status
from ray_harness.runtime._telemetry import RayMetricsSink  # imports Ray's metric classes (they need no Ray running)
from ray_harness.telemetry import metrics, runs
from ray_harness.telemetry.propagation import attached, current_carrier
from ray_harness.testing import ScriptedModel, text, tool_call


class _Recorder(metrics.BaseSink):
    """A metrics sink that keeps what it was told, with the tags current at the time."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.events: list[tuple[Any, ...]] = []

    def model_call(self, agent: str, usage: dict[str, int], latency_s: float, cost_usd: float) -> None:
        self.calls.append((agent, runs.metric_tags(agent)))

    def run_started(self, run: str, kind: str, name: str, nodes: int) -> None:
        self.events.append(("run_started", kind, name, nodes))

    def run_finished(self, run: str, kind: str, name: str, status: str) -> None:
        self.events.append(("run_finished", kind, name, status))

    def nested_run_started(self, run: str, kind: str, name: str, nodes: int) -> None:
        self.events.append(("nested_run_started", kind, name, nodes))

    def nested_run_finished(self, run: str, kind: str, name: str, status: str) -> None:
        self.events.append(("nested_run_finished", kind, name, status))

    def node_finished(self, run: str, node: str, status: str, duration_s: float) -> None:
        assert duration_s >= 0
        self.events.append(("node_finished", node, status))


@pytest.fixture(autouse=True)
def _no_process_job() -> Iterator[None]:
    """Tests start with no job of this process's own: in a suite run, an earlier test's Ray registered one."""
    saved = list(runs._job_source)
    runs.set_job_source(None)
    yield
    runs.set_job_source(saved[0] if saved else None)


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    sink = _Recorder()
    metrics.add_sink(sink)
    yield sink
    metrics.remove_sink(sink)


def _agent(name: str) -> Agent:
    return Agent(ScriptedModel(text(f"{name} done")), name=name)


def test_model_calls_in_a_graph_carry_the_run_graph_and_node(recorder: _Recorder) -> None:
    builder = GraphBuilder()
    builder.add_node(_agent("researcher"), "research")
    builder.add_node(_agent("writer"), "write")
    builder.add_edge("research", "write")
    builder.set_graph_id("report")
    assert builder.build(runtime="local")("go").status == Status.COMPLETED

    tags = dict(recorder.calls)
    assert tags["researcher"]["graph"] == "report" and tags["researcher"]["node"] == "research"
    assert tags["writer"]["node"] == "write"
    assert tags["researcher"]["run"] and tags["researcher"]["run"] == tags["writer"]["run"]
    assert recorder.events == [("run_started", "graph", "report", 2), ("node_finished", "research", "completed"),
                               ("node_finished", "write", "completed"), ("run_finished", "graph", "report",
                                                                         "completed")]
    assert runs.current_tags() == {}  # nothing leaks out of the run


def test_a_swarm_reports_its_members_as_nodes(recorder: _Recorder) -> None:
    swarm = Swarm([_agent("solo")], id="helpdesk", runtime="local")
    swarm("hello")
    assert recorder.calls[0][1]["swarm"] == "helpdesk" and recorder.calls[0][1]["node"] == "solo"
    assert ("run_finished", "swarm", "helpdesk", "completed") in recorder.events


def test_tags_travel_in_the_carrier_and_the_receivers_own_run_id_does_not_override_them() -> None:
    with runs.run_scope("graph", "g", run_id="r1"), runs.node_scope("n"):
        carrier = current_carrier()
    assert carrier is not None and runs.current_tags() == {}
    with attached(carrier), runs.scoped({"run": "invocation-7"}):
        assert runs.current_tags() == {"graph": "g", "run": "r1", "node": "n"}
    with attached(None), runs.scoped({"run": "invocation-7"}):
        assert runs.current_tags() == {"run": "invocation-7"}


def test_a_failing_node_and_run_are_reported_failed(recorder: _Recorder) -> None:
    with pytest.raises(RuntimeError), runs.run_scope("graph", "g"), runs.node_scope("bad"):
        raise RuntimeError("boom")
    assert recorder.events[-2:] == [("node_finished", "bad", "failed"), ("run_finished", "graph", "g", "failed")]


def test_per_run_tags_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_HARNESS_METRICS_RUN_TAGS", "0")
    runs.run_tags_enabled.cache_clear()
    try:
        with runs.run_scope("eval", "nightly"):
            assert runs.metric_tags("a") == {"agent": "a", "eval": "nightly"}
    finally:
        runs.run_tags_enabled.cache_clear()


def _one_node_graph(graph_id: str, node: Any) -> Any:
    builder = GraphBuilder()
    builder.add_node(node, "only")
    builder.set_graph_id(graph_id)
    return builder.build(runtime="local")


def test_a_graph_inside_an_evaluation_row_reports_as_nested_in_the_evaluations_run(recorder: _Recorder) -> None:
    with runs.run_scope("eval", "nightly") as run:
        assert _one_node_graph("per_row", _agent("a"))("go").status == Status.COMPLETED
    assert recorder.events == [("run_started", "eval", "nightly", 0), ("nested_run_started", "graph", "per_row", 1),
                               ("node_finished", "only", "completed"),
                               ("nested_run_finished", "graph", "per_row", "completed"),
                               ("run_finished", "eval", "nightly", "completed")]
    assert dict(recorder.calls)["a"]["run"] == run  # the row's model calls count for the evaluation's run


def test_a_graph_as_a_node_reports_as_nested_in_the_outer_graphs_run(recorder: _Recorder) -> None:
    outer = _one_node_graph("outer", _one_node_graph("inner", _agent("a")))
    assert outer("go").status == Status.COMPLETED
    assert [event[:3] for event in recorder.events] == [
        ("run_started", "graph", "outer"), ("nested_run_started", "graph", "inner"), ("node_finished", "only", "completed"),
        ("nested_run_finished", "graph", "inner"), ("node_finished", "only", "completed"),
        ("run_finished", "graph", "outer")]


def test_a_graph_that_returns_failed_under_continue_is_reported_failed(recorder: _Recorder) -> None:
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(RuntimeError("model down")), name="bad", retry_strategy=None), "bad")
    builder.add_node(_agent("good"), "good")
    builder.set_failure_policy("continue")
    builder.set_graph_id("partly")
    assert builder.build(runtime="local")("go").status == Status.FAILED  # a result, no exception
    assert ("node_finished", "bad", "failed") in recorder.events
    assert recorder.events[-1] == ("run_finished", "graph", "partly", "failed")  # before: "completed"


def test_a_graph_cancelled_from_inside_is_reported_cancelled_with_its_node(recorder: _Recorder) -> None:
    graphs: list[Any] = []

    @tool
    def stop_everything() -> str:
        """Cancel the graph this agent runs in."""
        graphs[0].cancel()
        return "cancelling"

    agent = Agent(ScriptedModel(tool_call("stop_everything", {}), text("unreached")), tools=[stop_everything],
                  name="stopper")
    graphs.append(_one_node_graph("stopped", agent))
    result = graphs[0]("go")
    assert result.status == Status.CANCELLED and result.results["only"].status == Status.CANCELLED
    assert recorder.events[-2:] == [("node_finished", "only", "cancelled"),  # before: both "completed"
                                    ("run_finished", "graph", "stopped", "cancelled")]


def test_a_run_stopped_for_an_interrupt_is_reported_interrupted(recorder: _Recorder) -> None:
    graph = _one_node_graph("approval", _agent("a"))
    graph.add_hook(lambda event: event.interrupt("approve", "run it?"), BeforeNodeCallEvent)
    assert graph("go").status == Status.INTERRUPTED
    assert recorder.events[-1] == ("run_finished", "graph", "approval", "interrupted")
    swarm = Swarm([Agent(ScriptedModel(text("waiting")), name="solo")], id="desk", runtime="local")
    swarm.add_hook(lambda event: event.interrupt("approve", "run it?"), BeforeNodeCallEvent)
    assert swarm("go").status == Status.INTERRUPTED
    assert recorder.events[-1] == ("run_finished", "swarm", "desk", "interrupted")


def test_the_status_of_a_scope_comes_from_its_outcome_only_without_an_exception(recorder: _Recorder) -> None:
    with runs.run_scope("graph", "g", outcome=lambda: "pending"), runs.node_scope("n", outcome=lambda: None):
        pass
    assert recorder.events[-2:] == [("node_finished", "n", "completed"), ("run_finished", "graph", "g", "completed")]
    with pytest.raises(RuntimeError), runs.run_scope("graph", "g", outcome=lambda: Status.INTERRUPTED):
        raise RuntimeError("boom")
    assert recorder.events[-1] == ("run_finished", "graph", "g", "failed")


@pytest.fixture
def own_job() -> Iterator[Any]:
    """Set this process's own job (what the Ray runtime registers: its Ray job id); restored after the test."""
    saved = list(runs._job_source)

    def set_job(job: str) -> None:
        runs.set_job_source(lambda: job)

    yield set_job
    runs.set_job_source(saved[0] if saved else None)


def test_the_job_travels_with_a_call_and_work_without_one_is_the_processs_own(own_job: Any) -> None:
    own_job("driver-2")  # the driver that makes the call
    assert runs.current_job() == "driver-2" and runs.current_tags() == {}
    carrier = current_carrier()
    own_job("driver-1")  # the actor that receives it was started by another driver
    with attached(carrier), runs.scoped({"run": "invocation-7"}):
        assert runs.current_job() == "driver-2"
        assert runs.metric_tags("a") == {"agent": "a", "run": "invocation-7", "job": "driver-2"}
        with runs.run_scope("graph", "g"), runs.node_scope("n"):  # scopes keep it; onward calls carry it
            assert runs.metric_tags("a")["job"] == "driver-2"
            forwarded = current_carrier()
    assert runs.current_job() == "driver-1"  # the actor's own work
    with attached(forwarded):  # a host two calls away: still the first driver's job
        assert runs.current_job() == "driver-2" and runs.current_tags()["node"] == "n"
    with attached(current_carrier()):
        assert runs.current_job() == "driver-1"


def test_without_a_job_source_no_job_travels() -> None:
    saved = list(runs._job_source)
    runs.set_job_source(None)
    try:
        assert runs.current_job() == "" and current_carrier() is None
        with runs.run_scope("graph", "g"):
            carrier = current_carrier()
        assert carrier is not None and "job" not in json.loads(carrier["ray-harness-tags"])
    finally:
        runs.set_job_source(saved[0] if saved else None)


def _ray_sink() -> Any:
    sink = RayMetricsSink(flush_interval_s=3600)  # nothing reaches Ray during the test (no Ray is started)
    sink._job = "driver-1"  # the job of the process (its default tag): what job_id() gives an actor on Ray
    return sink


class _Handed:
    """What a sink's flushes hand to Ray's counters and gauges: ``(metric, tags) -> amount / last value``."""

    def __init__(self, sink: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sink = sink
        self.increments: dict[tuple[Any, tuple[tuple[str, str], ...]], float] = {}
        self.gauges: dict[tuple[Any, tuple[tuple[str, str], ...]], float] = {}
        for metric in (sink._calls, sink._tokens, sink._cost, sink._tools, sink._rows):
            monkeypatch.setattr(metric, "inc", functools.partial(self._inc, metric))
        for metric in (sink._active, sink._pending, sink._runs):
            monkeypatch.setattr(metric, "set", functools.partial(self._set, metric))

    def _inc(self, metric: Any, amount: float, tags: dict[str, str]) -> None:
        key = (metric, tuple(tags.items()))
        self.increments[key] = self.increments.get(key, 0) + amount

    def _set(self, metric: Any, value: float, tags: dict[str, str]) -> None:
        self.gauges[(metric, tuple(tags.items()))] = value

    def flushed(self) -> _Handed:
        self.sink.flush()
        return self


def _carrier(job: str) -> dict[str, str]:
    return {"ray-harness-tags": json.dumps({"job": job})}


def test_the_ray_sink_tags_what_a_call_brought_with_the_callers_job(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = _ray_sink()
    handed = _Handed(sink, monkeypatch)
    try:
        with attached(_carrier("driver-2")):
            sink.model_call("a", {"inputTokens": 3, "outputTokens": 1}, 0.1, 0.0)
            sink.eval_row("", "nightly", "completed", 0)
        sink.model_call("a", {"inputTokens": 5}, 0.1, 0.0)  # the process's own work: the default tag (its job)
        increments = handed.flushed().increments
        tokens = {tags: amount for (metric, tags), amount in increments.items() if metric is sink._tokens}
        assert tokens == {(("agent", "a"), ("job", "driver-2"), ("direction", "input")): 3,
                          (("agent", "a"), ("job", "driver-2"), ("direction", "output")): 1,
                          (("agent", "a"), ("direction", "input")): 5}
        calls = {tags: amount for (metric, tags), amount in increments.items() if metric is sink._calls}
        assert calls == {(("agent", "a"), ("job", "driver-2")): 1, (("agent", "a"),): 1}
        [rows] = [tags for metric, tags in increments if metric is sink._rows]
        assert dict(rows)["job"] == "driver-2"
    finally:
        sink.close()


def test_the_ray_sinks_gauges_count_per_job(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = _ray_sink()
    handed = _Handed(sink, monkeypatch)

    def shown(gauge: Any) -> dict[str, float]:
        """The gauge's values per job, as Ray holds them after a flush (each its last value set)."""
        return {dict(tags)["job"]: value for (metric, tags), value in handed.flushed().gauges.items()
                if metric is gauge}

    try:
        with attached(_carrier("driver-2")):
            sink.active_agents("a", 1)
            sink.interrupts_pending("a", 2)
        sink.active_agents("a", 1)
        assert shown(sink._active) == {"driver-2": 1, "driver-1": 1}
        with attached(_carrier("driver-2")):
            sink.active_agents("a", -1)
        assert shown(sink._active) == {"driver-2": 0, "driver-1": 1}
        with attached(_carrier("driver-3")):
            sink.active_agents("a", -1)  # an end that lost its context's job ends a running one of the agent
            sink.interrupts_pending("a", 0)  # the agent's pending count moves to driver-3: driver-2's is cleared
        assert shown(sink._active) == {"driver-2": 0, "driver-1": 0}
        assert shown(sink._pending) == {"driver-2": 0, "driver-3": 0}
    finally:
        sink.close()


def test_the_ray_sink_sets_a_gauge_again_only_when_its_value_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = _ray_sink()
    handed = _Handed(sink, monkeypatch)
    try:
        sink.interrupts_pending("a", 0)
        sink.active_agents("a", 1)
        sink.active_agents("a", -1)
        handed.flushed()
        assert handed.gauges == {(sink._pending, (("agent", "a"), ("job", "driver-1"))): 0,
                                 (sink._active, (("agent", "a"), ("job", "driver-1"))): 0}
        handed.gauges.clear()
        sink.interrupts_pending("a", 0)  # reported at the end of every invocation: the same count
        assert handed.flushed().gauges == {}
        sink.interrupts_pending("a", 1)
        sink.active_agents("a", 1)
        assert handed.flushed().gauges == {(sink._pending, (("agent", "a"), ("job", "driver-1"))): 1,
                                           (sink._active, (("agent", "a"), ("job", "driver-1"))): 1}
    finally:
        sink.close()
