"""The dashboard name of a host call from the rows or nodes its requests carry (runtime._telemetry.task_name)."""

from __future__ import annotations

from ray_harness.runtime._telemetry import task_name  # imports Ray's metric classes (they need no Ray running)
from ray_harness.telemetry.propagation import TASK_KEY


def _row(label: str) -> dict[str, dict[str, str]]:
    return {"trace_context": {TASK_KEY: label}}


def test_a_batch_names_each_row_once_in_order() -> None:
    rows = [_row(f"ray_harness.row:nightly/{i}") for i in (3, 4, 3, 9, 4)]
    assert task_name(*rows, None, {"trace_context": None}) == "ray_harness.row:nightly/3,4,9"


def test_a_long_batch_is_cut_with_the_count_left_out() -> None:
    name = task_name(*(_row(f"ray_harness.row:nightly/{i}") for i in range(500)))
    assert name.startswith("ray_harness.row:nightly/0,1,2,") and name.endswith(f",+{500 - name.count(',')}")
    assert len(name) <= 120


def test_one_label_or_none() -> None:
    assert task_name(_row("ray_harness.node:review/writer")) == "ray_harness.node:review/writer"
    assert task_name(None, {}) == ""
    assert task_name(_row("ray_harness.row:a/1"), _row("ray_harness.node:g/n")) == "ray_harness.row:a/1 (+1)"
