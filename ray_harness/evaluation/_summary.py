"""Aggregates per-row records into an evaluation summary."""

from __future__ import annotations

import math
from typing import Any

__all__ = ("summarize", "summarize_columns")


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None  # not NaN: the summary is written as JSON, and printed
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(records: list[dict[str, Any]], *, elapsed_s: float, new_rows: int, cancelled: bool,
              output: str | None) -> dict[str, Any]:
    # A scorer's failure keeps the row's output: the row completed, it is counted apart.
    errors = [r for r in records if r.get("error") and r["error"].get("kind") != "scorer"]
    scorer_errors = sum(1 for r in records if r.get("error") and r["error"].get("kind") == "scorer")
    tokens = {"input": 0, "output": 0, "total": 0}
    cost = 0.0
    latencies: list[float] = []
    scores: dict[str, list[float]] = {}
    for record in records:
        usage = record.get("usage") or {}
        tokens["input"] += int(usage.get("inputTokens", 0))
        tokens["output"] += int(usage.get("outputTokens", 0))
        tokens["total"] += int(usage.get("totalTokens", 0))
        cost += float(record.get("cost_usd") or 0.0)
        if record.get("latency_s") is not None and (not record.get("error") or record["error"].get("kind") == "scorer"):
            latencies.append(float(record["latency_s"]))
        for name, value in (record.get("scores") or {}).items():
            if value is None:
                continue
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                scores.setdefault(name, []).append(float(value))
            elif isinstance(value, bool):
                scores.setdefault(name, []).append(1.0 if value else 0.0)
    summary: dict[str, Any] = {
        "rows": len(records),
        "completed": len(records) - len(errors),
        "errors": len(errors),
        "error_rate": len(errors) / len(records) if records else 0.0,
        "scorer_errors": scorer_errors,
        # Not errors: these rows stopped for a human (agents: stop_reason "interrupt"; graphs/swarms: status
        # "interrupted"); their output lists the pending interrupts.
        "interrupted": sum(1 for r in records if r.get("stop_reason") == "interrupt"
                           or (r.get("status") == "interrupted" and not r.get("error"))),
        "tokens": tokens,
        "cost_usd": cost,
        "elapsed_s": elapsed_s,
        "rows_this_run": new_rows,
        "rows_per_s": new_rows / elapsed_s if elapsed_s > 0 else 0.0,
        "latency_s": {"p50": _percentile(latencies, 0.5), "p90": _percentile(latencies, 0.9),
                      "p99": _percentile(latencies, 0.99)},
        "scores": {},
        "cancelled": cancelled,
        "output": output,
    }
    for name, values in scores.items():
        mean = sum(values) / len(values)
        summary["scores"][name] = {"mean": mean, "p50": _percentile(values, 0.5), "p90": _percentile(values, 0.9),
                                   "min": min(values), "max": max(values), "count": len(values)}
        summary[name] = mean  # per-scorer mean keyed by the scorer's name (API contract)
    return summary


def summarize_columns(table: Any) -> dict[str, Any]:
    """:func:`summarize` over an Arrow table of records (run in a task on the cluster, not in the driver)."""
    if table is None:
        return summarize([], elapsed_s=0.0, new_rows=0, cancelled=False, output=None)
    wanted = [name for name in ("error", "usage", "cost_usd", "latency_s", "scores", "status", "stop_reason")
              if name in table.column_names]
    records = table.select(wanted).to_pylist()
    return summarize(records, elapsed_s=0.0, new_rows=0, cancelled=False, output=None)
