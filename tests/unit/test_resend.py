"""The driver's side of sending a Graph run again after its orchestration host died (``runtime._resend``)."""

from __future__ import annotations

from typing import Any

from ray_harness import Agent, GraphBuilder, Swarm
from ray_harness.runtime._orchestrator_wire import object_table
from ray_harness.runtime._resend import ReportedRuns, resendable
from ray_harness.testing import ScriptedModel, text


def _event(kind: str, node_id: str | None = None) -> dict[str, Any]:
    return {"type": kind} if node_id is None else {"type": f"multiagent_node_{kind}", "node_id": node_id}


def test_a_re_sent_run_reports_only_node_runs_the_caller_did_not_see_end() -> None:
    reported = ReportedRuns()
    first = [_event("start", "a"), _event("stream", "a"), _event("stop", "a"), _event("start", "b"),
             _event("stream", "b")]  # the host dies while "b" runs
    assert all(reported.new(event) for event in first)
    reported.resent()
    replay = [_event("start", "a"), _event("stop", "a"), _event("start", "b"), _event("stream", "b"),
              _event("stop", "b"), _event("start", "a"), _event("stop", "a"), _event("result")]
    # "a"'s first run was seen: skipped with its events; "b"'s run repeats what the caller got of it (held, not
    # reported twice), then goes on; a second run of "a" (a cycle) and the result are new.
    assert [reported.new(event) for event in replay] == [False, False, False, False, True, True, True, True]
    assert reported.released == []
    reported.resent()  # lost again: now both runs of "a" and the run of "b" were seen
    again = [_event("start", "a"), _event("stop", "a"), _event("start", "b"), _event("stop", "b"),
             _event("start", "a"), _event("stop", "a"), _event("result")]
    assert [reported.new(event) for event in again] == [False] * 6 + [True]


def test_an_interrupted_node_run_is_not_reported_again() -> None:
    reported = ReportedRuns()
    assert reported.new(_event("start", "ask")) and reported.new(_event("interrupt", "ask"))
    reported.resent()
    assert [reported.new(e) for e in (_event("start", "ask"), _event("interrupt", "ask"), _event("result"))] == [
        False, False, True]


def test_handoffs_the_caller_got_are_not_reported_again_whatever_their_order() -> None:
    reported = ReportedRuns()

    def handoff(source: str, target: str) -> dict[str, Any]:
        return {"type": "multiagent_handoff", "from_node_ids": [source], "to_node_ids": [target]}

    assert [reported.new(e) for e in (_event("stop", "a"), handoff("a", "b"), handoff("a", "c"))] == [True] * 3
    reported.resent()
    replay = [_event("stop", "a"), handoff("a", "c"), handoff("a", "b"), _event("stop", "b"), handoff("b", "a")]
    assert [reported.new(e) for e in replay] == [False, False, False, True, True]


def _agent(name: str) -> Agent:
    return Agent(ScriptedModel(text("ok")), name=name)


class _Remote:
    """A member that is no in-slot Agent: it has a tool registry and streams (a RemoteAgent has no tool registry)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tool_registry = _agent(name).tool_registry

    async def stream_async(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - never run
        yield {}


def test_runs_can_be_sent_again_unless_a_swarm_has_a_member_outside_the_slots() -> None:
    builder = GraphBuilder()
    builder.add_node(_agent("a"), "a")
    assert resendable(object_table(builder.build(runtime="local")))
    assert resendable(object_table(Swarm([_agent("s1"), _agent("s2")], runtime="local")))
    nested = GraphBuilder()
    nested.add_node(_agent("b"), "b")
    nested.add_node(Swarm([_agent("s3"), _Remote("s4")], runtime="local"), "team")
    assert not resendable(object_table(nested.build(runtime="local")))


def _stream(node_id: str, text: str) -> dict[str, Any]:
    return {"type": "multiagent_node_stream", "node_id": node_id, "event": {"type": "text_delta", "text": text}}


def test_a_lost_node_run_that_runs_again_differently_is_reported_from_its_start() -> None:
    """The held events that repeated the lost run are released before the first one that differs."""
    reported = ReportedRuns()
    seen = [_event("start", "b"), _stream("b", "Hel"), _stream("b", "lo")]
    assert all(reported.new(event) for event in seen)
    reported.resent()
    # The node ran again (it had not completed): the same start and first chunk, then another answer.
    assert not reported.new(_event("start", "b")) and not reported.new(_stream("b", "Hel"))
    assert reported.released == []
    diverging = _stream("b", "p!")
    assert reported.new(diverging) and reported.released == seen[:2]  # to yield, in order, before "p!"
    reported.released.clear()
    assert reported.new(_event("stop", "b"))
    # Lost once more after it ended: that run is skipped whole.
    reported.resent()
    assert [reported.new(e) for e in (_event("start", "b"), _stream("b", "x"), _event("stop", "b"))] == [False] * 3


def test_a_node_run_lost_twice_while_it_repeated_is_compared_with_all_the_caller_got() -> None:
    reported = ReportedRuns()
    seen = [_event("start", "b"), _stream("b", "one"), _stream("b", "two")]
    assert all(reported.new(event) for event in seen)
    reported.resent()
    assert not reported.new(_event("start", "b"))  # held: lost again before the rest came
    reported.resent()
    assert [reported.new(event) for event in seen] == [False] * 3  # the whole run as the caller got it
    assert reported.new(_stream("b", "three")) and reported.new(_event("stop", "b")) and not reported.released


def test_an_event_that_cannot_be_compared_counts_as_different() -> None:
    class Uncomparable:
        def __eq__(self, other: object) -> bool:
            raise TypeError("no")

        __hash__ = None  # type: ignore[assignment]

    reported = ReportedRuns()
    first = {"type": "multiagent_node_stream", "node_id": "b", "event": {"value": Uncomparable()}}
    assert reported.new(first)
    reported.resent()
    again = {"type": "multiagent_node_stream", "node_id": "b", "event": {"value": Uncomparable()}}
    assert reported.new(again) and reported.released == []


def test_passing_yields_the_released_events_before_the_one_that_released_them() -> None:
    reported = ReportedRuns()
    seen = [_event("start", "b"), _stream("b", "Hel")]
    assert list(reported.passing(seen)) == seen
    reported.resent()
    again = [_event("start", "b"), _stream("b", "Hel"), _stream("b", "lo"), _event("stop", "b"), _event("result")]
    assert list(reported.passing(again)) == again[2:]  # repeated: held, and the run goes on from there
    reported.resent()
    other = [_event("start", "b"), _stream("b", "Hi"), _event("stop", "b"), _event("result")]
    assert list(reported.passing(other)) == [_event("result")]  # "b" ended before: skipped whole
    fresh = ReportedRuns()
    assert list(fresh.passing(seen)) == seen
    fresh.resent()
    differs = [_event("start", "b"), _stream("b", "Hi"), _event("stop", "b")]
    assert list(fresh.passing(differs)) == differs  # the held start is released before "Hi": from its start
