"""LocalNodeRunner remembers each agent's bind-time conversation; ``reset_node`` puts exactly that back."""

from __future__ import annotations

from typing import Any

from ray_harness import Agent
from ray_harness.agent.snapshot import AgentSnapshot
from ray_harness.multiagent.node_runner import LocalNodeRunner
from ray_harness.testing import ScriptedModel, text


def _agent() -> Agent:
    agent = Agent(ScriptedModel(text("ok")), name="writer",
                  messages=[{"role": "user", "content": [{"text": "first"}]}])
    agent.state.set("notes", {"seen": ["a"]})
    return agent


def test_reset_restores_the_bind_time_conversation_after_in_place_edits() -> None:
    agent = _agent()
    runner = LocalNodeRunner()
    runner.bind({"writer": agent})
    # In-place edits of what the agent held at bind time, and new state and messages.
    agent.messages[0]["content"][0]["text"] = "edited"
    agent.messages.append({"role": "assistant", "content": [{"text": "later"}]})
    agent.state.set("notes", {"seen": ["a", "b"]})
    agent.state.set("extra", 1)

    runner.reset_node("writer")
    assert agent.messages == [{"role": "user", "content": [{"text": "first"}]}]
    assert agent.state.get() == {"notes": {"seen": ["a"]}}

    # The restored conversation is the agent's own copy: editing it does not change what the next reset restores.
    agent.messages[0]["content"][0]["text"] = "edited again"
    agent.messages.append({"role": "assistant", "content": [{"text": "later"}]})
    runner.reset_node("writer")
    assert agent.messages == [{"role": "user", "content": [{"text": "first"}]}]


def test_reset_keeps_the_metrics_and_the_model_cursor_of_the_run_since() -> None:
    agent = _agent()
    runner = LocalNodeRunner()
    runner.bind({"writer": agent})
    agent("go")
    assert agent.event_loop_metrics.model_calls == 1
    runner.reset_node("writer")
    assert len(agent.messages) == 1
    assert agent.event_loop_metrics.model_calls == 1  # only the conversation goes back


class _Snapshotting:
    """A node that snapshots itself without being an Agent (as a RemoteAgent does through its actor)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.snapshots = 0

    def snapshot(self) -> AgentSnapshot:
        self.snapshots += 1
        return self.agent.snapshot()

    def restore(self, snapshot: Any) -> None:
        self.agent.restore(snapshot)


def test_a_node_that_snapshots_itself_is_remembered_through_its_snapshot() -> None:
    node = _Snapshotting(_agent())
    runner = LocalNodeRunner()
    runner.bind({"writer": node})
    assert node.snapshots == 1
    node.agent.messages.append({"role": "assistant", "content": [{"text": "later"}]})
    runner.reset_node("writer")
    assert node.agent.messages == [{"role": "user", "content": [{"text": "first"}]}]


def test_new_agents_reset_to_an_empty_conversation_that_no_run_changes() -> None:
    first = Agent(ScriptedModel(text("a"), text("b")), name="first")
    second = Agent(ScriptedModel(text("c")), name="second")
    runner = LocalNodeRunner()
    runner.bind({"first": first, "second": second})
    first("go")
    first.state.set("k", 1)
    runner.reset_node("first")
    assert first.messages == [] and first.state.get() == {}
    # Edits of the restored (empty) conversation reach neither the next reset nor another agent's.
    first.messages.append({"role": "user", "content": [{"text": "later"}]})
    first.state.set("k", 2)
    second("go")
    runner.reset_node("second")
    runner.reset_node("first")
    assert first.messages == [] == second.messages and first.state.get() == {} == second.state.get()
    assert not first.interrupt_state.interrupts and not second.interrupt_state.activated
