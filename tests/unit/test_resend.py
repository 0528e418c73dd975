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
    # "a"'s first run was seen: skipped with its events; "b" is reported again from its start; a second run of
    # "a" (a cycle) and the result are new.
    assert [reported.new(event) for event in replay] == [False, False, True, True, True, True, True, True]
    reported.resent()  # lost again: now both runs of "a" and the run of "b" were seen
    again = [_event("start", "a"), _event("stop", "a"), _event("start", "b"), _event("stop", "b"),
             _event("start", "a"), _event("stop", "a"), _event("result")]
    assert [reported.new(event) for event in again] == [False] * 6 + [True]


def _agent(name: str) -> Agent:
    return Agent(ScriptedModel(text("ok")), name=name)


def test_graph_runs_can_be_sent_again_and_swarm_runs_anywhere_in_the_tree_cannot() -> None:
    builder = GraphBuilder()
    builder.add_node(_agent("a"), "a")
    assert resendable(object_table(builder.build(runtime="local")))
    swarm = Swarm([_agent("s1"), _agent("s2")], runtime="local")
    assert not resendable(object_table(swarm))
    nested = GraphBuilder()
    nested.add_node(_agent("b"), "b")
    nested.add_node(Swarm([_agent("s3"), _agent("s4")], runtime="local"), "team")
    assert not resendable(object_table(nested.build(runtime="local")))
