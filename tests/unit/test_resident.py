"""Resident orchestrators' bookkeeping, without Ray (``ray_harness.runtime._resident``)."""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness import GraphBuilder
from ray_harness.hooks import BeforeNodeCallEvent
from ray_harness.multiagent.graph_model import GraphState
from ray_harness.runtime._orchestrator_wire import object_table
from ray_harness.runtime._resident import DriverCopy, Resident, Residents, Sync, apply_sync
from ray_harness.testing import text
from tests.multiagent.conftest import make_agent


def graph() -> Any:
    builder = GraphBuilder()
    builder.add_node(make_agent("a", text("a done")), "a")
    builder.add_node(make_agent("b", text("b done")), "b")
    builder.add_edge("a", "b")
    return builder.build(runtime="local")


def resident(token: str) -> Resident:
    orchestrator = graph()
    return Resident(orchestrator, object_table(orchestrator), token, lambda outbox: None)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_copy_is_taken_only_at_its_token_and_is_not_kept_while_it_runs() -> None:
    residents = Residents()
    residents.keep("g/orchestrator:1", resident("t1"))
    assert residents.take("g/orchestrator:1", "t0") is None  # another run's end state: ship again
    taken = residents.take("g/orchestrator:1", "t1")
    assert taken is not None and taken.token == "t1"
    assert residents.take("g/orchestrator:1", "t1") is None  # running: a second request misses
    residents.keep("g/orchestrator:1", taken)
    assert residents.keys() == ["g/orchestrator:1"]


def test_the_least_recently_used_copy_goes_first_beyond_the_limit() -> None:
    residents = Residents(limit=2)
    for key in ("a/o", "b/o"):
        residents.keep(key, resident("t"))
    again = residents.take("a/o", "t")
    assert again is not None
    residents.keep("a/o", again)  # now the most recently used
    residents.keep("c/o", resident("t"))
    assert residents.keys() == ["a/o", "c/o"]


def test_idle_copies_are_dropped_and_release_goes_by_prefix() -> None:
    clock = Clock()
    residents = Residents(idle_timeout=10.0, clock=clock)
    residents.keep("g1/orchestrator:x", resident("t"))
    clock.now = 5.0
    residents.keep("g2/orchestrator:y", resident("t"))
    clock.now = 12.0  # g1 idle for 12 s, g2 for 7 s
    assert residents.take("g1/orchestrator:x", "t") is None
    assert residents.keys() == ["g2/orchestrator:y"]
    residents.keep("g3/orchestrator:z", resident("t"))
    assert residents.release(["g2/", "nothing/"]) == 1
    assert residents.keys() == ["g3/orchestrator:z"]


def test_nothing_changed_means_an_empty_sync() -> None:
    g = graph()
    copy = DriverCopy("t", object_table(g))
    sync = copy.sync(object_table(g))
    assert sync is not None and not sync


def test_an_edited_agent_travels_as_its_snapshot_and_the_copy_restores_it() -> None:
    driver, host = graph(), graph()
    copy = DriverCopy("t", object_table(driver))
    driver.nodes["a"].executor.messages.append({"role": "user", "content": [{"text": "edited"}]})
    sync = copy.sync(object_table(driver))
    assert sync is not None and list(sync.agents) == [("target", "", "a")] and not sync.runs

    changed: list[str] = []

    class Runner:
        def copy_changed(self, node_id: str) -> None:
            changed.append(node_id)

    table = object_table(host)
    table[("node_runner", "")] = Runner()
    apply_sync(sync, table)
    assert host.nodes["a"].executor.messages == driver.nodes["a"].executor.messages
    assert changed == ["a"]  # the node's slot gets the snapshot with its next request


def test_reassigned_run_state_travels_and_is_applied() -> None:
    driver, host = graph(), graph()
    copy = DriverCopy("t", object_table(driver))
    driver.state = GraphState(task="restored")  # as deserialize_state or a session restore does
    sync = copy.sync(object_table(driver))
    assert sync is not None and list(sync.runs) == [""] and not sync.agents
    apply_sync(sync, object_table(host))
    assert host.state.task == "restored"


def test_a_hook_added_or_an_object_replaced_ships_the_orchestrator_again() -> None:
    g = graph()
    copy = DriverCopy("t", object_table(g))

    def skip(event: BeforeNodeCallEvent) -> None:
        event.cancel_node = True

    g.add_hook(skip)
    assert copy.sync(object_table(g)) is None
    h = graph()
    copy = DriverCopy("t", object_table(h))
    h.nodes["a"].executor = make_agent("a", text("other"))
    assert copy.sync(object_table(h)) is None


def test_a_sync_is_checked_by_type() -> None:
    with pytest.raises(TypeError, match="Sync"):
        apply_sync({"agents": {}}, {})  # type: ignore[arg-type]
    assert not Sync()


def test_a_copy_that_takes_over_the_structure_still_sees_what_changes_after_it() -> None:
    g = graph()
    first = DriverCopy("t1", object_table(g))
    assert first.sync(object_table(g)) is not None  # the structure the next copy takes over was checked
    second = DriverCopy("t2", object_table(g), first)
    assert second.token == "t2"
    empty = second.sync(object_table(g))
    assert empty is not None and not empty
    g.nodes["b"].executor.messages.append({"role": "user", "content": [{"text": "edited"}]})
    g.state = GraphState(task="restored")
    sync = second.sync(object_table(g))
    assert sync is not None and list(sync.agents) == [("target", "", "b")] and list(sync.runs) == [""]

    def skip(event: BeforeNodeCallEvent) -> None:
        event.cancel_node = True

    g.add_hook(skip)
    assert second.sync(object_table(g)) is None


def test_a_digest_hashed_at_once_equals_the_running_digest_also_for_no_messages() -> None:
    from ray_harness.runtime._slots import MessagesDigest, conversation_digest

    agent = make_agent("a", text("a done"))
    assert agent.messages == []
    assert conversation_digest(agent) == conversation_digest(agent, MessagesDigest())
    agent.messages.append({"role": "user", "content": [{"text": "hi"}]})
    assert conversation_digest(agent) == conversation_digest(agent, MessagesDigest(agent.messages))
