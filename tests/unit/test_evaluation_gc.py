"""Local evaluations raise the young GC threshold while they run and put it back (``evaluation._gc``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ray_harness import Agent
from ray_harness.evaluation import evaluate
from ray_harness.evaluation._gc import YOUNG, GcTuning
from ray_harness.testing import ScriptedModel, text

seen: list[tuple[int, int, int]] = []


def threshold_recording_agent() -> Agent:
    seen.append(gc.get_threshold())  # built in the row, while the evaluation runs
    return Agent(ScriptedModel(text("ok")), callback_handler=None)


@pytest.fixture(autouse=True)
def default_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("RAY_HARNESS_LOCAL_GC_TUNING", raising=False)
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    seen.clear()
    yield
    gc.set_threshold(*before)


def test_a_local_evaluation_raises_the_threshold_while_it_runs_and_puts_it_back() -> None:
    summary = evaluate(threshold_recording_agent, [{"prompt": f"q{i}"} for i in range(3)], runtime="local")
    assert summary["errors"] == 0
    assert seen and all(value == (YOUNG, 20, 10) for value in seen)
    assert gc.get_threshold() == (700, 10, 10)


def test_nested_entries_share_one_raise_and_the_last_leave_restores() -> None:
    first, second = GcTuning(), GcTuning()
    first.enter()
    second.enter()
    first.leave()
    assert gc.get_threshold() == (YOUNG, 20, 10)  # another evaluation still runs
    second.leave()
    assert gc.get_threshold() == (700, 10, 10)
    second.leave()  # leaving twice changes nothing
    assert gc.get_threshold() == (700, 10, 10)


def test_a_threshold_changed_meanwhile_is_kept() -> None:
    tuning = GcTuning()
    tuning.enter()
    gc.set_threshold(5000, 10, 10)  # the program's own choice, made during the run
    tuning.leave()
    assert gc.get_threshold() == (5000, 10, 10)


@pytest.mark.parametrize("threshold", [(0, 10, 10), (500_000, 10, 10)])
def test_collection_off_or_already_higher_is_left_alone(threshold: tuple[int, int, int]) -> None:
    gc.set_threshold(*threshold)
    tuning = GcTuning()
    tuning.enter()
    assert gc.get_threshold() == threshold
    tuning.leave()
    assert gc.get_threshold() == threshold


def test_the_environment_variable_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_HARNESS_LOCAL_GC_TUNING", "0")
    evaluate(threshold_recording_agent, [{"prompt": "q"}], runtime="local")
    assert seen == [(700, 10, 10)]
