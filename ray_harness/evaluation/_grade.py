"""``grade()``: score recorded results again, without calling the target.

Changing a scorer then costs a pass over the records, not a model call per row. Scorers are called as
``f(row, record)``: ``row`` is the record's ``input``; ``record`` is the output record (a dict whose
``str()`` is its output text, so scorers written for inline scoring give the same scores). Rows that failed
in their target are not scored (as inline); a scorer failure is recorded as the record's error
(kind ``"scorer"``) and keeps the output.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ray_harness.evaluation._records import check_jsonl_output, not_results_error
from ray_harness.evaluation._scoring import GradedRecord, Scorer, checked_scorers, score_names, score_row
from ray_harness.evaluation._summary import summarize

__all__ = ("grade", "grade_record")


def grade_record(scorers: list[Scorer], record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with fresh ``scores`` (and error, when a scorer fails); target failures stay unscored."""
    graded = dict(record)
    error = graded.get("error")
    if error and error.get("kind", "target") != "scorer":
        graded["scores"] = {}
        return graded
    scores, failure = score_row(scorers, dict(graded.get("input") or {}), GradedRecord(graded))
    graded["scores"], graded["error"] = scores, failure
    return graded


def grade(results: Any, scorers: Iterable[Scorer], output: str | None = None, *,
          filesystem: Any = None) -> dict[str, Any]:
    """Score the records of an evaluation again and return the summary; write them, scored, to ``output``.

    Args:
        results: A JSONL results file, a directory (or ``s3://`` prefix) of Parquet records, a
            ``ray.data.Dataset`` of records, or a list of record dicts.
        scorers: ``f(row, record) -> float | bool | dict`` (sync or async).
        output: Where the scored records go (same format as ``results``); None: only the summary.
        filesystem: A ``pyarrow.fs`` filesystem for Parquet paths (e.g. S3 with an endpoint).

    Raises:
        ValueError: ``results`` is not a results file, or ``output`` already exists.
    """
    scorers = checked_scorers(scorers)
    started = time.perf_counter()
    if isinstance(results, list | tuple):
        records = [dict(r) for r in results]
    elif isinstance(results, str | Path) and _is_jsonl(results):
        records = _read_jsonl(Path(results))
    else:
        from ray_harness.runtime._evaluation_data import grade_dataset

        return grade_dataset(results, scorers, output, filesystem=filesystem)
    graded = [grade_record(scorers, record) for record in records]
    if output is not None:
        _write_jsonl(Path(output), graded)
    summary = summarize(graded, elapsed_s=time.perf_counter() - started, new_rows=len(graded), cancelled=False,
                        output=output)
    summary["score_names"] = score_names(scorers)
    return summary


def _is_jsonl(results: str | Path) -> bool:
    """A results file: ``evaluate()`` writes JSONL to any ``output`` but a ``.parquet`` one, which is a directory."""
    return str(results).lower().endswith((".jsonl", ".ndjson")) or Path(results).is_file()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"results file {path} does not exist")
    check_jsonl_output(path)
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                if not line.endswith("\n"):
                    break  # the partial last line of a crashed run: that row was never finished
                raise ValueError(f"{path}:{number}: corrupt result record ({error.msg})") from None
            if not isinstance(record, dict) or "index" not in record:
                raise not_results_error(path, f"line {number} is not a result record")
            records.append(record)
    return records


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    if path.exists():
        raise ValueError(f"output {path} already exists; grade() writes a new results file (choose another path)")
    path.parent.mkdir(parents=True, exist_ok=True)
    # A name of its own: a fixed one ("<output>.tmp") could be a file of the user's, which would be overwritten.
    # Opened with "x" (never over an existing file), not mkstemp: the results file keeps the umask's permissions.
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    handle = temporary.open("x", encoding="utf-8")
    try:
        with handle:
            for record in records:
                handle.write(json.dumps({"index": record.get("index"), **record}, default=str) + "\n")
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)  # ours: created above
        raise
