"""Resident node slots without Ray: the host's slot book (revisions, idle timeout with a fake clock), the digest
that tells a changed copy and the slot wire types."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from ray_harness import Agent
from ray_harness.runtime._slots import (
    DEFAULT_SLOT_IDLE_TIMEOUT,
    SLOT_IDLE_TIMEOUT_ENV,
    SlotBook,
    conversation_digest,
    slot_idle_timeout,
    slot_key,
)
from ray_harness.runtime._wire import (
    InvokeRequest,
    SlotMissItem,
    SlotSync,
    WireItem,
    is_terminal,
    pack_snapshot,
    unpack_snapshot,
)
from ray_harness.testing import ScriptedModel


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_idle_slots_expire_after_the_timeout_only_when_nothing_is_in_flight() -> None:
    clock = FakeClock()
    book = SlotBook(clock)
    book.open("g/a")
    book.open("g/b")
    clock.now += 59
    assert book.expired(60) == []
    book.enter("g/b")  # a request arrives for b and is still running
    clock.now += 1
    assert book.expired(60) == ["g/a"]
    clock.now += 600
    assert book.expired(60) == ["g/a"]  # b has a request in flight
    book.leave("g/b")
    assert book.expired(60) == ["g/a"]  # b was used just now
    clock.now += 60
    assert sorted(book.expired(60)) == ["g/a", "g/b"]
    assert book.expired(60, busy=lambda key: key == "g/a") == ["g/b"]
    assert book.expired(0) == []  # 0: no idle timeout


def test_revisions_count_runs_and_restores_and_prefixes_select_one_graph() -> None:
    book = SlotBook(FakeClock())
    book.open(slot_key("g1", "a"))
    book.open(slot_key("g1", "b"))
    book.open(slot_key("g2", "a"))
    assert book.revision("g1/a") == 0 and book.revision("missing") == -1
    assert book.started("g1/a", restored=False) == 1
    assert book.started("g1/a", restored=True) == 2
    entry = book.get("g1/a")
    assert entry is not None and (entry.runs, entry.restores, entry.builds) == (2, 1, 1)
    assert sorted(book.with_prefix(["g1/"])) == ["g1/a", "g1/b"]
    assert book.with_prefix([]) == []
    assert book.drop("g1/a") and not book.drop("g1/a") and "g1/a" not in book
    assert len(book) == 2


def test_idle_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SLOT_IDLE_TIMEOUT_ENV, raising=False)
    assert slot_idle_timeout() == DEFAULT_SLOT_IDLE_TIMEOUT
    monkeypatch.setenv(SLOT_IDLE_TIMEOUT_ENV, "2.5")
    assert slot_idle_timeout() == 2.5
    assert slot_idle_timeout("0") == 0
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(ValueError, match=SLOT_IDLE_TIMEOUT_ENV):
            slot_idle_timeout(bad)


def _agent(**kwargs: Any) -> Agent:
    return Agent(ScriptedModel(["one", "two"]), name="a", agent_id="a1", **kwargs)


def test_digest_survives_the_round_trip_and_sees_every_change() -> None:
    slot = _agent()
    slot("hello")
    slot.state.set("k", {"v": [1, 2]})
    copy = _agent()
    copy.restore(unpack_snapshot(pack_snapshot(slot.snapshot())))  # what the orchestrator's copy gets
    assert conversation_digest(copy) == conversation_digest(slot)
    again = _agent()
    again.restore(pickle.loads(pickle.dumps(copy.snapshot())))  # the driver's copy, from the end state
    assert conversation_digest(again) == conversation_digest(slot)
    before = conversation_digest(copy)
    copy.messages.append({"role": "user", "content": [{"text": "edited"}]})
    assert conversation_digest(copy) != before
    copy.messages.pop()
    assert conversation_digest(copy) == before
    copy.state.set("k", 3)
    assert conversation_digest(copy) != before


def test_a_snapshots_digest_is_its_agents_and_sees_every_change() -> None:
    from ray_harness.runtime._slots import snapshot_digest

    agent = _agent()
    agent("hello")
    agent.state.set("k", 1)
    snapshot = unpack_snapshot(pack_snapshot(agent.snapshot()))  # what a host gets from a changed copy
    assert snapshot_digest(snapshot) == conversation_digest(agent)
    assert snapshot_digest(snapshot.model_copy(update={"messages": snapshot.messages[:1]})) != snapshot_digest(snapshot)
    assert snapshot_digest(snapshot.model_copy(update={"state": {"k": 2}})) != snapshot_digest(snapshot)
    agent.interrupt_state.activated = True
    assert snapshot_digest(unpack_snapshot(pack_snapshot(agent.snapshot()))) != snapshot_digest(snapshot)


def test_digest_of_bytes_content() -> None:
    agent = _agent()
    agent.messages.append({"role": "user", "content": [{"image": {"format": "png", "source": {"bytes": b"\x89P"}}}]})
    digest = conversation_digest(agent)
    agent.messages[0]["content"][0]["image"]["source"]["bytes"] = b"\x89Q"
    assert conversation_digest(agent) != digest


def test_slot_requests_need_a_key_and_misses_are_terminal_items() -> None:
    with pytest.raises(ValidationError, match="agent_key"):
        InvokeRequest(invocation_id="r", slot=SlotSync())
    request = InvokeRequest(invocation_id="r", agent_key="g/a", slot=SlotSync(revision=3))
    assert request.slot is not None and request.slot.revision == 3 and request.slot.snapshot is None
    miss = TypeAdapter(WireItem).validate_python({"kind": "slot_miss", "agent_key": "g/a", "reason": "stale"})
    assert isinstance(miss, SlotMissItem) and is_terminal(miss)
    with pytest.raises(ValidationError, match="reason"):
        SlotMissItem(agent_key="g/a", reason="gone")  # type: ignore[arg-type]


def test_completed_runs_are_kept_for_a_re_send_from_the_revision_they_started_at() -> None:
    from ray_harness.runtime._slots import KEPT_RUNS, CompletedRun

    book = SlotBook(FakeClock())
    book.open("g/a")
    first, second = "o1:u:a:0", "o1:u:a:1"  # two visits of one orchestration request "o1"
    book.started("g/a", restored=False)  # the first visit, from revision 0
    assert book.completed_run("g/a", first, 0) is None  # still running: nothing kept
    x = CompletedRun(0, ("event", "result"), "o1")
    book.completed("g/a", first, x)
    assert book.completed_run("g/a", first, 0) is x
    assert book.completed_run("g/a", first, 1) is None and book.completed_run("g/a", first, None) is None
    assert book.completed_run("g/a", second, 0) is None and book.completed_run("g/b", first, 0) is None
    book.started("g/a", restored=False)  # the second visit, from revision 1: the first stays kept
    book.completed("g/a", second, CompletedRun(1, ("result",), "o1"))
    assert book.completed_run("g/a", first, 0) is x
    for n in range(KEPT_RUNS - 1):
        book.completed("g/a", f"o1:u:a:{2 + n}", CompletedRun(2 + n, (), "o1"))
    assert book.completed_run("g/a", first, 0) is None  # the oldest goes beyond KEPT_RUNS
    assert book.completed_run("g/a", second, 1) is not None
    book.drop("g/a")
    book.open("g/a")  # a new slot under the same key keeps nothing of the old one
    assert book.completed_run("g/a", second, 1) is None


def test_a_later_orchestration_drops_the_runs_kept_for_an_earlier_one() -> None:
    """Its driver got the earlier run's end before it started the later one: those runs are never sent again."""
    from ray_harness.runtime._slots import CompletedRun

    book = SlotBook(FakeClock())
    book.open("g/a")
    book.open("g/b")
    book.completed("g/a", "a0", CompletedRun(0, ("result",), "o1"))
    book.completed("g/a", "a1", CompletedRun(1, ("result",), "o1"))
    book.completed("g/b", "b0", CompletedRun(0, ("result",), "o1"))
    book.completed("g/a", "a2", CompletedRun(2, ("result",), "o2"))
    assert book.completed_run("g/a", "a0", 0) is None and book.completed_run("g/a", "a1", 1) is None
    assert book.completed_run("g/a", "a2", 2) is not None
    assert book.completed_run("g/b", "b0", 0) is not None  # another slot: its next run decides
    book.completed("g/a", "alone", CompletedRun(3, ("result",)))  # a run of no orchestration is its own
    assert book.completed_run("g/a", "a2", 2) is None and book.completed_run("g/a", "alone", 3) is not None
    book.completed("g/a", "alone too", CompletedRun(4, ("result",)))
    assert book.completed_run("g/a", "alone", 3) is None and book.completed_run("g/a", "alone too", 4) is not None
