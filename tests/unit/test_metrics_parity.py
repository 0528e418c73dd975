"""What an invocation reports, as Strands reports it: ``AgentResult`` text and JSON, ``EventLoopMetrics``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from ray_harness import Agent, AgentResult, tool
from ray_harness.agent import result as result_module
from ray_harness.agent.result import EventLoopMetrics
from ray_harness.checkpoint import Checkpoint
from ray_harness.interrupts import Interrupt
from ray_harness.testing import ScriptedModel, text, tool_call


class Person(BaseModel):
    name: str
    age: int


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


def _result(content: list[dict], **extra: object) -> AgentResult:
    message: Any = {"role": "assistant", "content": content}
    return AgentResult(stop_reason="end_turn", message=message, **extra)  # type: ignore[arg-type]


def test_str_is_interrupts_then_structured_output_then_text_and_citations() -> None:
    cited = {"citationsContent": {"content": [{"text": "cited"}], "citations": []}}
    assert str(_result([cited, {"text": "plain"}])) == "cited\nplain\n"
    assert str(_result([{"text": "ignored"}], structured_output=Person(name="A", age=3))) == '{"name":"A","age":3}'
    interrupt = Interrupt(id="i1", name="approve", reason={"why": 1})
    pending = _result([{"text": "ignored"}], interrupts=[interrupt], structured_output=Person(name="A", age=3))
    assert str(pending) == str([interrupt.to_dict()])
    assert pending.text == "ignored"  # the message's own text, whatever str() shows


def test_structured_output_of_an_invocation_is_its_str() -> None:
    agent = Agent(ScriptedModel(text("thinking"), tool_call("Person", {"name": "A", "age": 3})))
    result = agent("who?", structured_output_model=Person)
    assert json.loads(str(result)) == {"name": "A", "age": 3}


def test_to_dict_is_tagged_as_strands_and_from_dict_reads_it_back() -> None:
    original = _result([{"text": "paused"}], interrupts=[Interrupt(id="i1", name="approve")],
                       checkpoint=Checkpoint(position="after_model", cycle_index=2))
    original.metrics.add_usage({"inputTokens": 5, "outputTokens": 2, "totalTokens": 7}, 10, 0.5)
    data = json.loads(json.dumps(original.to_dict()))
    assert data["type"] == "agent_result"
    restored = AgentResult.from_dict(data)
    assert (restored.stop_reason, restored.message, restored.interrupts) == ("end_turn", original.message,
                                                                            original.interrupts)
    assert restored.checkpoint == original.checkpoint
    assert restored.metrics.accumulated_usage["totalTokens"] == 7 and restored.metrics.accumulated_cost_usd == 0.5
    with pytest.raises(TypeError, match="unexpected type"):
        AgentResult.from_dict({"type": "multiagent_result", "message": original.message})


def test_invocations_keep_each_cycles_usage_and_the_context_size() -> None:
    first = {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110}
    second = {"inputTokens": 40, "outputTokens": 5, "totalTokens": 70, "cacheReadInputTokens": 25}
    agent = Agent(ScriptedModel(tool_call("lookup", {"query": "x"}, usage=first), text("done", usage=second),
                                text("again", usage=first)), tools=[lookup])
    result = agent("go")
    invocation = result.metrics.latest_agent_invocation
    assert invocation is not None and [cycle.usage["inputTokens"] for cycle in invocation.cycles] == [100, 40]
    assert invocation.usage["totalTokens"] == 180
    assert result.context_size == 65  # cached tokens reported apart are part of the prompt (Strands' rule)
    assert result.projected_context_size == 70
    agent("more")
    summary = agent.event_loop_metrics.get_summary()
    assert [len(item["cycles"]) for item in summary["agent_invocations"]] == [2, 1]
    assert agent.event_loop_metrics.invocation_metrics == {"latencyMs": 0}  # per invocation, unlike accumulated


def test_a_new_agent_has_no_context_size() -> None:
    assert _result([{"text": "x"}]).context_size is None
    assert EventLoopMetrics().projected_context_size is None


def test_kept_invocations_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(result_module, "KEPT_INVOCATIONS", 3)
    metrics = EventLoopMetrics()
    for _ in range(5):
        metrics.start_invocation()
    assert len(metrics.agent_invocations) == 3
    assert metrics.latest_agent_invocation is not None
    assert metrics.latest_agent_invocation.usage is metrics.invocation_usage


def test_summary_tool_usage_has_strands_execution_stats_and_tool_info() -> None:
    metrics = EventLoopMetrics()
    metrics.add_tool("lookup", True, 0.5, tool_use={"toolUseId": "t1", "name": "lookup", "input": {"q": 1}})
    metrics.add_tool("lookup", False, 1.5)
    entry = metrics.get_summary()["tool_usage"]["lookup"]
    assert entry["execution_stats"] == {"call_count": 2, "success_count": 1, "error_count": 1, "total_time": 2.0,
                                        "average_time": 1.0, "success_rate": 0.5}
    assert entry["call_count"] == 2  # the flat keys stay
    assert entry["tool_info"] == {"tool_use_id": "t1", "name": "lookup", "input_params": {"q": 1}}


def test_an_invocations_tool_usage_names_the_latest_call_as_strands() -> None:
    agent = Agent(ScriptedModel(tool_call("lookup", {"query": "x"}, tool_use_id="call-7"), text("done")),
                  tools=[lookup])
    agent("go")
    info = agent.event_loop_metrics.get_summary()["tool_usage"]["lookup"]["tool_info"]
    assert info == {"tool_use_id": "call-7", "name": "lookup", "input_params": {"query": "x"}}


def _tree(trace: Any) -> list[Any]:
    return [trace.name, [_tree(child) for child in trace.children]]


def test_traces_are_strands_cycle_trees() -> None:
    from strands.telemetry.metrics import Trace as StrandsTrace

    agent = Agent(ScriptedModel(tool_call("lookup", {"query": "x"}, tool_use_id="t1"), text("done"), text("more")),
                  tools=[lookup])
    agent("go")
    traces = agent.event_loop_metrics.traces
    assert [_tree(trace) for trace in traces] == [
        ["Cycle 1", [["stream_messages", []], ["Tool: lookup", []], ["Recursive call", []]]],
        ["Cycle 2", [["stream_messages", []]]],
    ]
    first = traces[0]
    stream, tool_trace, recursion = first.children
    assert all(child.parent_id == first.id for child in first.children) and first.parent_id is None
    assert stream.message == agent.messages[1]
    assert tool_trace.raw_name == "lookup - t1" and tool_trace.metadata == {"toolUseId": "t1", "tool_name": "lookup"}
    assert tool_trace.message == agent.messages[2]  # the tool result message
    assert all(trace.duration() is not None and trace.duration() >= 0 for trace in [*traces, *first.children])
    assert recursion.end_time is not None and recursion.end_time >= traces[1].end_time  # to the invocation's end
    summary = agent.event_loop_metrics.get_summary()["traces"]
    assert set(summary[0]) == set(StrandsTrace("x").to_dict())
    assert summary[0]["children"][1]["parent_id"] == first.id
    agent("again")  # the agent's cycles are numbered over its life, as Strands numbers them
    assert [trace.name for trace in agent.event_loop_metrics.traces] == ["Cycle 1", "Cycle 2", "Cycle 3"]


def test_a_trace_read_while_the_invocation_runs_follows_it() -> None:
    seen: list[Any] = []

    @tool
    def peek() -> str:
        """Look at the running cycle's trace."""
        seen.append(agent.event_loop_metrics.traces[-1])
        return "ok"

    agent = Agent(ScriptedModel(tool_call("peek", {}), text("done")), tools=[peek])
    agent("go")
    (running,) = seen
    assert running is agent.event_loop_metrics.traces[0]  # the same object, completed since
    assert [child.name for child in running.children] == ["stream_messages", "Tool: peek", "Recursive call"]
    assert running.end_time is not None


def test_traces_are_bounded_and_a_result_carries_its_invocations_own() -> None:
    import pickle

    agent = Agent(ScriptedModel(text("a"), tool_call("lookup", {"query": "x"}), text("b")), tools=[lookup])
    agent("one")
    agent("two")
    metrics = agent.event_loop_metrics
    moved = pickle.loads(pickle.dumps(metrics))
    assert [trace.name for trace in moved.traces] == ["Cycle 2", "Cycle 3"]
    # The tree is rebuilt there from the notes (ids are drawn per process); tool results stay behind.
    here, there = metrics.traces[1].to_dict(), moved.traces[0].to_dict()
    assert [(c["name"], c["duration"]) for c in there["children"]] == [(c["name"], c["duration"])
                                                                       for c in here["children"]]
    assert there["children"][0]["message"] == here["children"][0]["message"]  # the model's message
    assert [c["message"] for c in there["children"] if c["name"].startswith("Tool:")] == [None]
    for _ in range(result_module.KEPT_CYCLE_DURATIONS + 100):
        metrics.start_cycle_trace().end()
    assert result_module.KEPT_CYCLE_DURATIONS <= len(metrics.traces) < result_module.KEPT_CYCLE_DURATIONS + 100
    assert metrics.traces[-1].name == f"Cycle {result_module.KEPT_CYCLE_DURATIONS + 103}"


@tool
def nap() -> str:
    """Sleep a little."""
    import time

    time.sleep(0.02)
    return "rested"


def test_cycle_durations_and_total_duration_as_strands_summarizes_them() -> None:
    import pickle

    agent = Agent(ScriptedModel(tool_call("nap", {}), text("done"), text("again")), tools=[nap])
    agent("go")
    metrics = agent.event_loop_metrics
    assert len(metrics.cycle_durations) == 2 and metrics.cycle_durations[0] >= 0.02  # the tool is in its cycle
    agent("more")
    assert len(metrics.cycle_durations) == 3 and metrics.total_duration == pytest.approx(sum(metrics.cycle_durations))
    summary = metrics.get_summary()
    assert summary["total_duration"] == metrics.total_duration
    assert summary["average_cycle_time"] == pytest.approx(metrics.total_duration / 3)
    # A result crossing processes carries the latest invocation's cycles only; the total stays whole.
    shipped = pickle.loads(pickle.dumps(metrics))
    assert shipped.cycle_durations == metrics.cycle_durations[-1:] and shipped.total_duration == metrics.total_duration
    other = Agent(ScriptedModel(), agent_id=agent.agent_id)
    other.restore(agent.snapshot())
    assert other.event_loop_metrics.total_duration == metrics.total_duration


def test_kept_cycle_durations_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(result_module, "KEPT_CYCLE_DURATIONS", 2)
    metrics = EventLoopMetrics()
    metrics.start_invocation()
    for seconds in (1.0, 2.0, 3.0):
        metrics.add_cycle_duration(seconds)
    assert metrics.cycle_durations == [2.0, 3.0] and metrics.total_duration == 6.0


def test_a_cycles_trace_reuses_the_cycles_own_clock_reads() -> None:
    # The model call starts with its cycle and the Recursive call when the cycle ends: the loop reads the clock
    # once for both (the cycle's timing), not once more per trace child.
    agent = Agent(ScriptedModel(tool_call("lookup", {"query": "x"}), text("done")), tools=[lookup])
    agent("go")
    first, second = agent.event_loop_metrics.traces
    stream, tool_trace, recursion = first.children
    assert stream.start_time == first.start_time and second.children[0].start_time == second.start_time
    assert recursion.start_time == first.end_time
    # Epoch seconds near 1.8e9 hold about 0.2 µs of precision.
    assert first.end_time - first.start_time == pytest.approx(agent.event_loop_metrics.cycle_durations[0], abs=1e-6)
    assert first.start_time <= stream.end_time <= tool_trace.start_time <= tool_trace.end_time <= first.end_time
    assert first.end_time <= second.start_time and recursion.end_time >= second.end_time


def test_traces_shipped_to_another_process_keep_their_epoch_times() -> None:
    import pickle

    agent = Agent(ScriptedModel(tool_call("lookup", {"query": "x"}), text("done")), tools=[lookup])
    agent("go")
    here = [trace.to_dict() for trace in agent.event_loop_metrics.traces]
    there = [trace.to_dict() for trace in pickle.loads(pickle.dumps(agent.event_loop_metrics)).traces]

    def times(tree: dict[str, Any]) -> list[float]:
        return [tree["start_time"], tree["end_time"], *(time for child in tree["children"] for time in times(child))]

    shipped, kept = [t for tree in there for t in times(tree)], [t for tree in here for t in times(tree)]
    assert len(shipped) == len(kept) == 12 and shipped == pytest.approx(kept, abs=1e-6)
