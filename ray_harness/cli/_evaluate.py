"""``ray-harness demo`` and ``ray-harness eval``: an evaluation over a dataset, and the summary printed."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ray_harness.cli._options import Commands, init_ray as _init_ray, positive_int as _positive_int

__all__ = ("add_demo", "add_eval")

_ADDRESS_HELP = ("Ray cluster to join: its GCS address host:port, or auto (default RAY_ADDRESS, else a cluster "
                 "`ray start`ed on this machine, else an embedded local Ray)")


def add_demo(commands: Commands) -> None:
    demo = commands.add_parser("demo", help="run the demo evaluation (offline unless --model) on an embedded local Ray",
                               description="Evaluate researcher → 2 parallel analysts → writer over a bundled "
                                           "dataset on a pool of Ray host actors. No API key needed.")
    demo.add_argument("--model", help="use a real provider for every node, e.g. anthropic:claude-sonnet-4-5")
    demo.add_argument("--max-tokens", type=_positive_int, default=512,
                      help="output cap of each model call when the --model spec sets no ?max_tokens= (default 512)")
    demo.add_argument("--output-dir", default="ray_harness_demo",
                      help="where results.jsonl and summary.json go (default ./ray_harness_demo)")
    demo.add_argument("--rows", type=_positive_int, default=None, metavar="N",
                      help="evaluate only the first N rows (default every row)")
    demo.add_argument("--concurrency", type=_positive_int, default=16, help="rows in flight (default 16)")
    demo.add_argument("--pool-size", type=_positive_int, default=2, help="Ray host actors (default 2)")
    demo.add_argument("--address", help=_ADDRESS_HELP)
    demo.add_argument("--dashboard", action="store_true", help="start the Ray dashboard with the embedded Ray")
    demo.add_argument("--local", action="store_true", help="run in this process instead of on Ray")
    demo.set_defaults(handler=_demo)


def add_eval(commands: Commands) -> None:
    ev = commands.add_parser("eval", help="evaluate a target over a dataset",
                             description="Runs the target on every row of the dataset, on a pool of Ray host "
                                         "actors (--local: in this process), writes one record per row and prints a "
                                         "summary (rows, errors, tokens, cost, latency, scores). Exits 1 when a row "
                                         "failed. Example: ray-harness eval my_pkg.targets:build_graph data.jsonl "
                                         "--scorer my_pkg.scores:exact")
    ev.add_argument("target", help="module:function building an Agent, Graph or Swarm per row")
    ev.add_argument("dataset", help="JSONL, JSON (one array) or CSV file, a prompt per row (see --prompt-key)")
    ev.add_argument("--output", default="results.jsonl",
                    help="record file, .jsonl or a .parquet directory (default results.jsonl); rows it already "
                         "holds are skipped unless --no-resume")
    ev.add_argument("--concurrency", type=_positive_int, default=32, help="rows in flight (default 32)")
    ev.add_argument("--pool-size", type=_positive_int, default=2, help="Ray host actors (default 2)")
    ev.add_argument("--prompt-key", default="prompt", help="the row key holding the prompt (default prompt)")
    ev.add_argument("--scorer", action="append", default=[], metavar="SCORER",
                    help="module:function called as f(row, result) and returning a score (repeatable)")
    ev.add_argument("--no-resume", action="store_true", help="start over instead of skipping recorded rows")
    ev.add_argument("--address", help=_ADDRESS_HELP)
    ev.add_argument("--local", action="store_true", help="run in this process instead of on Ray")
    ev.set_defaults(handler=_eval)


def _demo(args: argparse.Namespace) -> int:
    from ray_harness.demo import dataset_path, keyword_score
    from ray_harness.evaluation import evaluate

    if args.model:
        from ray_harness.models import from_string
        from ray_harness.models.selection import spec_with_defaults

        # A chatty model (a small local one) would otherwise run to its server's own cap on every call.
        args.model = spec_with_defaults(args.model, max_tokens=args.max_tokens)
        from_string(args.model)  # fail fast on a malformed spec, before starting Ray
        os.environ["RAY_HARNESS_DEMO_MODEL"] = args.model
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in dataset_path().read_text().splitlines() if line.strip()]
    if args.rows is not None:
        rows = rows[: max(0, args.rows)]
    output = out_dir / "results.jsonl"
    _check_summary_file(out_dir / "summary.json")
    dashboard = None
    if not args.local:
        _init_ray(args.address, dashboard=args.dashboard)
        if args.dashboard and not args.address:
            dashboard = "http://127.0.0.1:8265"
    print(f"ray-harness demo: {len(rows)} rows, graph researcher → (market_analyst ∥ risk_analyst) → writer, "
          f"model {args.model or 'offline (scripted)'}, runtime {'local' if args.local else 'ray'}")
    summary = evaluate("ray_harness.demo:build_demo_graph", rows, scorers=[keyword_score],
                       concurrency=args.concurrency, output=str(output), resume=False,
                       runtime="local" if args.local else "ray", pool_size=args.pool_size)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    _print_summary(summary)
    print(f"results: {output.resolve()}")
    print(f"summary: {(out_dir / 'summary.json').resolve()}")
    if dashboard:
        print(f"dashboard: {dashboard}")
    return _exit_code(summary)


def _check_summary_file(path: Path) -> None:
    """Refuse (before anything runs) an ``--output-dir`` whose ``summary.json`` is a file of the user's."""
    if not path.exists():
        return
    try:
        summary = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (ValueError, UnicodeDecodeError):
        summary = None
    if not (isinstance(summary, dict) and summary.keys() >= {"rows", "errors", "tokens", "scores"}):
        raise ValueError(f"{path} is not the summary of an evaluation; it was left untouched: "
                         "choose another --output-dir")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"  # None: no row completed


def _print_summary(summary: dict[str, Any]) -> None:
    tokens = summary["tokens"]
    print(f"rows {summary['rows']}  errors {summary['errors']}  tokens {tokens['total']} "
          f"(in {tokens['input']}, out {tokens['output']})  cost ${summary['cost_usd']:.4f}  "
          f"{summary['rows_per_s']:.1f} rows/s  p50 latency {_seconds(summary['latency_s']['p50'])}")
    resumed = summary["rows"] - summary.get("rows_this_run", summary["rows"])
    if resumed:  # else a second run of the same command reads as a run of every row at "0.0 rows/s"
        print(f"resumed: {resumed} of the {summary['rows']} rows were already in the output and did not run again "
              "(rows/s counts this run's; --no-resume runs every row)")
    if summary.get("interrupted"):  # not errors, but not answers either: they wait for a human
        print(f"interrupted {summary['interrupted']} (stopped for a human; each record's \"output\" lists its "
              "pending interrupts)")
    if summary.get("scorer_errors"):  # the rows completed, but their scores are missing: say so
        print(f"scorer errors {summary['scorer_errors']} (the records' \"error\" says which scorer failed and why)")
    for name, stats in summary["scores"].items():
        print(f"score {name}: mean {stats['mean']:.3f} (p50 {stats['p50']:.3f}, n={stats['count']})")



def _eval(args: argparse.Namespace) -> int:
    from ray_harness.evaluation import evaluate
    from ray_harness.evaluation._backends import import_named

    scorers: list[Any] = [import_named(spec, "scorer") for spec in args.scorer]
    if not args.local:
        _init_ray(args.address)
    try:
        summary = evaluate(args.target, args.dataset, scorers=scorers, concurrency=args.concurrency,
                           output=args.output, resume=not args.no_resume, prompt_key=args.prompt_key,
                           runtime="local" if args.local else "ray", pool_size=args.pool_size)
    except KeyboardInterrupt:  # evaluate() cancelled the rows in flight and wrote the finished ones: say where
        print(f"interrupted: the finished rows are in {Path(args.output).resolve()}; the same command (without "
              "--no-resume) runs the rest", file=sys.stderr)
        return 130
    _print_summary(summary)
    print(f"results: {Path(args.output).resolve()}")
    if summary.get("cancelled"):  # by `ray-harness cancel`: not a completed evaluation (a job ends FAILED)
        print(f"cancelled: the finished rows are in {Path(args.output).resolve()}; the same command (without "
              "--no-resume) runs the rest", file=sys.stderr)
        return 1
    return _exit_code(summary)


def _exit_code(summary: dict[str, Any]) -> int:
    """1 when a row failed, in its target or in a scorer (its scores are missing), else 0."""
    return 0 if summary["errors"] == 0 and not summary.get("scorer_errors") else 1
