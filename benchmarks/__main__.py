"""One entry point for every benchmark: ``python -m benchmarks run [--quick] [--only NAME ...]``.

Each suite runs ray_harness and, where a counterpart exists, the Strands SDK in the same process,
interleaved (A B A B …), after warm-ups, and reports medians with min–max and the ratio per pair.
Output: a Markdown table on stdout and JSON (``--json``, default ``benchmarks/results/latest.json``).

Suites: ``core`` (P1, P1b), ``graph`` (P2 evaluation throughput, P3 CPU-bound fan-out, wide fan-out),
``runtime`` (P4 cancel latency, P5 agents per GB, P6 handoff latency, per-call overhead),
``scaling`` (P7: P2 and P3 on 1, 2 and 3 Ray nodes of one machine — overhead, not speedup),
``extensions`` (E1: one observing extension layer per model / tool call; ``--only extensions``).
``serve`` (S1–S3: A2A on Ray Serve next to a bare Serve endpoint; store cost; cancel; not in the default set).
``--quick`` shrinks every suite to a smoke test (CI runs it; numbers from it mean nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

SUITES = ("core", "graph", "runtime", "scaling", "extensions", "serve")
DEFAULT_SUITES = ("core", "graph", "runtime")


def _machine() -> dict[str, Any]:
    try:
        memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        memory_gb = float("nan")
    versions = {}
    for package in ("ray", "strands-agents", "pydantic"):
        try:
            from importlib.metadata import version

            versions[package] = version(package)
        except Exception:
            versions[package] = "not installed"
    return {"date": datetime.datetime.now(tz=datetime.UTC).date().isoformat(), "cpus": os.cpu_count(), "memory_gb": round(memory_gb, 1),
            "python": platform.python_version(), "platform": platform.platform(), "versions": versions}


def run_core(quick: bool) -> list[dict[str, Any]]:
    from benchmarks import core_loop

    if core_loop.strands is None:
        raise SystemExit("the core suite compares with strands-agents: pip install -e '.[bench]'")
    calls, repeats = (20, 2) if quick else (300, 7)
    return asyncio.run(core_loop.run_all(calls, repeats))


def run_runtime(quick: bool) -> list[dict[str, Any]]:
    from benchmarks import runtime as runtime_bench

    args = argparse.Namespace(calls=10 if quick else 200, agents=10 if quick else 100, hosts=2 if quick else 4,
                              dedicated=2 if quick else 10, resident=20 if quick else 400,
                              handoffs=5 if quick else 50, json=None)
    results = asyncio.run(runtime_bench.main_async(args))
    rows = []

    def stat_row(name: str, stats: dict[str, Any], unit: str = "ms") -> dict[str, Any]:
        return {"benchmark": name, "unit": unit, "ray_harness_median": stats["p50"],
                "ray_harness_min": stats.get("min", stats["p50"]), "ray_harness_max": stats.get("max", stats["p50"]),
                "strands_median": None, "ratio": None}

    rows.append(stat_row("R1 one-turn call, in-process Agent", results["per_call"]["in_process"]))
    rows.append(stat_row("R1 one-turn call, RemoteAgent", results["per_call"]["remote_agent"]))
    rows.append(stat_row(f"P4 cancel latency, {args.agents} agents on {args.hosts} pooled hosts",
                         results["pooled_cancel"]))
    rows.append(stat_row(f"P4 cancel latency, {args.dedicated} dedicated actors", results["dedicated_cancel"]))
    rows.append(stat_row("P6 handoff driver → A → B", results["handoff"]["driver_a_b"]))
    resident = results["resident"]
    rows.append({"benchmark": "P5 resident agents per GB (pooled hosts)", "unit": "agents/GB",
                 "ray_harness_median": resident["agents_per_gb"], "ray_harness_min": resident["agents_per_gb"],
                 "ray_harness_max": resident["agents_per_gb"], "strands_median": None, "ratio": None})
    return rows


def run_graph(quick: bool) -> list[dict[str, Any]]:
    try:
        graph_bench = importlib.import_module("benchmarks.graph")
    except ImportError as error:
        raise SystemExit(f"graph suite unavailable: {error}") from None
    rows: list[dict[str, Any]] = graph_bench.run_suite(quick=quick)
    return rows


def run_scaling(quick: bool) -> list[dict[str, Any]]:
    try:
        scaling = importlib.import_module("benchmarks.scaling")
    except ImportError as error:
        raise SystemExit(f"scaling suite unavailable: {error}") from None
    rows: list[dict[str, Any]] = scaling.run_suite(quick=quick)
    return rows


def run_extensions(quick: bool) -> list[dict[str, Any]]:
    from benchmarks import extensions

    results = asyncio.run(extensions.run(20 if quick else 500, 2 if quick else 7))
    return extensions.rows(results)


def run_serve(quick: bool) -> list[dict[str, Any]]:
    from benchmarks import serve as serve_bench

    sizes = (64, 16, 10, 2) if quick else (512, 64, 100, 10)
    results = serve_bench.run(*sizes)
    rows = []
    for name, stats in results.items():
        if isinstance(stats, dict):
            rows.append({"benchmark": f"{name} (p50; {stats['rps']:.1f} req/s, p99 {stats['p99_ms']:.1f} ms)",
                         "unit": "ms", "ray_harness_median": stats["p50_ms"], "ray_harness_min": stats["p50_ms"],
                         "ray_harness_max": stats["max_ms"], "strands_median": None, "ratio": None})
    return rows


RUNNERS = {"core": run_core, "graph": run_graph, "runtime": run_runtime, "scaling": run_scaling,
           "extensions": run_extensions, "serve": run_serve}


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| benchmark | ray_harness median (min–max) | Strands median (min–max) | ratio ray_harness/Strands |",
             "|---|---|---|---|"]
    for row in rows:
        ours = f"{_fmt(row['ray_harness_median'])} {row['unit']} ({_fmt(row.get('ray_harness_min'))}–" \
               f"{_fmt(row.get('ray_harness_max'))})"
        theirs = "n/a" if row.get("strands_median") is None else \
            f"{_fmt(row['strands_median'])} {row['unit']} ({_fmt(row.get('strands_min'))}–{_fmt(row.get('strands_max'))})"
        lines.append(f"| {row['benchmark']} | {ours} | {theirs} | {_fmt(row.get('ratio'))} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run benchmark suites")
    run.add_argument("--quick", action="store_true", help="smoke-test sizes (CI)")
    run.add_argument("--only", action="append", choices=SUITES, help="run only this suite (repeatable)")
    run.add_argument("--json", default=None, help="where to write the JSON results")
    args = parser.parse_args(argv)
    import logging

    logging.disable(logging.WARNING)
    suites = args.only or list(DEFAULT_SUITES)
    report: dict[str, Any] = {"machine": _machine(), "quick": args.quick, "suites": {}}
    all_rows: list[dict[str, Any]] = []
    for name in suites:
        print(f"== {name}", file=sys.stderr, flush=True)
        rows = RUNNERS[name](args.quick)
        report["suites"][name] = rows
        all_rows.extend(rows)
    table = markdown(all_rows)
    print(table)
    target = Path(args.json) if args.json else Path(__file__).parent / "results" / (
        "quick.json" if args.quick else "latest.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=2, default=str))
    print(f"\nresults: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
