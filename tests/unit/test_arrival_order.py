"""A handle's calls are admitted in the order it made them, whatever order they arrive in (no Ray here)."""

from __future__ import annotations

import asyncio
import pickle

from ray_harness.runtime._order import ArrivalGate, Ticket, Tickets


def _issue(tickets: Tickets, count: int) -> list[Ticket]:
    issued = []
    for _ in range(count):
        with tickets.submitting() as ticket:
            issued.append(ticket)
    return issued


async def _admit_all(gate: ArrivalGate, arriving: list[Ticket]) -> list[int]:
    admitted: list[int] = []
    lock = asyncio.Lock()

    async def call(ticket: Ticket) -> None:
        await gate.admit(ticket)
        async with lock:  # what the runner does next: the FIFO lock keeps the gate's order
            admitted.append(ticket.number)
            await asyncio.sleep(0)

    tasks = []
    for ticket in arriving:
        tasks.append(asyncio.create_task(call(ticket)))
        await asyncio.sleep(0)  # each arrives (and, if early, parks) before the next
    await asyncio.gather(*tasks)
    return admitted


async def test_calls_that_arrive_out_of_order_are_admitted_in_order() -> None:
    first, second, third = _issue(Tickets(), 3)
    assert await _admit_all(ArrivalGate(), [second, third, first]) == [0, 1, 2]


async def test_the_floor_tells_a_new_gate_where_a_callers_sequence_starts() -> None:
    tickets = Tickets()
    for ticket in _issue(tickets, 3):
        tickets.answered(ticket)  # answered through another actor (say, before this name was re-created)
    later = _issue(tickets, 3)
    assert [ticket.floor for ticket in later] == [3, 3, 3]
    assert await _admit_all(ArrivalGate(), [later[2], later[1], later[0]]) == [3, 4, 5]


async def test_a_lost_predecessor_holds_later_calls_only_for_the_patience() -> None:
    lost, kept = _issue(Tickets(), 2)
    gate = ArrivalGate(patience=0.01)
    await gate.admit(kept)  # returns although ticket 0 never arrives
    await gate.admit(lost)  # and the late one is not held either


async def test_a_failed_submission_gives_its_number_back() -> None:
    tickets = Tickets()
    try:
        with tickets.submitting():
            raise OSError("could not send")
    except OSError:
        pass
    (ticket,) = _issue(tickets, 1)
    assert (ticket.number, ticket.floor) == (0, 0)


async def test_untracked_calls_and_other_callers_do_not_wait() -> None:
    gate = ArrivalGate()
    await gate.admit(None)
    ours, theirs = _issue(Tickets(), 2), _issue(Tickets(), 2)
    assert await _admit_all(gate, [theirs[0], ours[1], ours[0], theirs[1]]) == [0, 0, 1, 1]


def test_a_copy_in_another_process_is_another_caller() -> None:
    tickets = Tickets()
    _issue(tickets, 3)
    copy = pickle.loads(pickle.dumps(tickets))
    (original,), (copied,) = _issue(tickets, 1), _issue(copy, 1)
    assert original.caller != copied.caller
    assert (original.number, copied.number) == (3, 0)


async def test_a_restarted_actor_keeps_the_order_from_its_journal() -> None:
    tickets = Tickets()
    issued = _issue(tickets, 3)  # all three issued while none was answered: every floor is 0
    before = ArrivalGate()
    await before.admit(issued[0])
    tickets.answered(issued[0])  # answered, then the actor died with 1 and 2 pending
    after = ArrivalGate()
    after.restore(before.positions())
    assert await _admit_all(after, [issued[2], issued[1]]) == [1, 2]


async def test_a_restarted_actor_without_a_journal_does_not_wait_for_answered_calls() -> None:
    issued = _issue(Tickets(), 3)
    gate = ArrivalGate(patience=3600)  # waiting for ticket 0 (answered before the restart) would hang the test
    gate.lost()
    await gate.admit(issued[1])
    await gate.admit(issued[2])
