"""A cancel that overtakes its run is remembered, once, and the memory stays bounded."""

from __future__ import annotations

from ray_harness.runtime._early import EarlyCancels


def test_a_remembered_cancel_is_taken_once() -> None:
    early = EarlyCancels()
    early.remember("run-1")
    assert early.take("run-1")
    assert not early.take("run-1")  # a re-run under the same id starts afresh
    assert not early.take("never-cancelled")


def test_the_oldest_cancels_are_forgotten_first() -> None:
    early = EarlyCancels(size=3)
    for run_id in ("a", "b", "c"):
        early.remember(run_id)
    early.remember("a")  # cancelled again: now the newest
    early.remember("d")
    assert len(early) == 3
    assert not early.take("b")
    assert [early.take(run_id) for run_id in ("a", "c", "d")] == [True, True, True]
