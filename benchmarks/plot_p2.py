"""P2 throughput vs concurrency: a 3-node chain (50 ms per model call) over many inputs, as a plot.

For each concurrency (rows in flight: 1, 4, 16, 64, 256) it measures rows per second of

* ray_harness ``evaluate(..., runtime="ray")`` — rows on the default host pool (an embedded local Ray,
  or the cluster in ``RAY_ADDRESS``), each row's graph in its host;
* ray_harness ``evaluate(..., runtime="local")`` — rows in this process;
* Strands: one ``GraphBuilder`` graph per row under ``asyncio.gather``, limited by a semaphore to the
  same concurrency;

and draws them with the physical limit ``concurrency / (3 × 50 ms)`` (every row is three sequential
model calls). Each point runs ``max(16, 4 × concurrency)`` rows; the three runners alternate after a
warm-up, and the plot shows the median with min–max bars.

    python -m benchmarks.plot_p2                 # measure, write benchmarks/results/p2_throughput.{json,png}
    python -m benchmarks.plot_p2 --replot        # redraw the PNG from the JSON
    python -m benchmarks.plot_p2 --quick         # concurrency 1 and 16, one repeat (a smoke test)

Needs the bench extra (strands-agents, matplotlib): ``pip install -e ".[bench]"``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.graph import CHAIN_LATENCY_S, chain_graph, strands_chain_graph

RESULTS = Path(__file__).resolve().parent / "results"
JSON_PATH = RESULTS / "p2_throughput.json"
PNG_PATH = RESULTS / "p2_throughput.png"
CONCURRENCY = (1, 4, 16, 64, 256)
SYSTEMS = ("ray_harness (ray)", "ray_harness (local)", "strands")


def rows_for(concurrency: int) -> int:
    return max(16, 4 * concurrency)


def physical_limit(concurrency: int) -> float:
    return concurrency / (3 * CHAIN_LATENCY_S)


def local_chain_graph() -> Any:
    """The evaluation target for ``runtime="local"``: the same chain, its nodes in this process."""
    return chain_graph("local")


async def _ours(runtime: str, rows: int, concurrency: int) -> float:
    from ray_harness.evaluation import evaluate_async

    dataset = [{"prompt": f"input {i}"} for i in range(rows)]
    kwargs: dict[str, Any] = {}
    if runtime == "ray":
        from ray_harness.runtime._multiagent_pool import default_pool

        kwargs["pool"] = default_pool()
    target = "benchmarks.graph:chain_graph" if runtime == "ray" else "benchmarks.plot_p2:local_chain_graph"
    started = time.perf_counter()
    summary = await evaluate_async(target, dataset, concurrency=concurrency, runtime=runtime, progress=False,
                                   **kwargs)
    elapsed = time.perf_counter() - started
    if summary["errors"]:
        raise RuntimeError(f"evaluation ({runtime}) had {summary['errors']} errors")
    return rows / elapsed


async def _theirs(rows: int, concurrency: int) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> str:
        async with gate:  # build inside the gate, as evaluate builds each row's graph when it starts
            result = await strands_chain_graph().invoke_async(f"input {i}")
            return str(result.status.value).lower()

    started = time.perf_counter()
    statuses = await asyncio.gather(*(one(i) for i in range(rows)))
    elapsed = time.perf_counter() - started
    if set(statuses) != {"completed"}:
        raise RuntimeError(f"strands chain runs did not complete: {set(statuses)}")
    return rows / elapsed


async def measure(concurrencies: list[int], repeats: int) -> dict[str, Any]:
    from ray_harness import runtime

    warnings.filterwarnings("ignore", message="graph has no max_node_executions")
    runtime.init()
    runners: dict[str, Callable[[int, int], Awaitable[float]]] = {
        "ray_harness (ray)": lambda rows, c: _ours("ray", rows, c),
        "ray_harness (local)": lambda rows, c: _ours("local", rows, c),
        "strands": _theirs,
    }
    for runner in runners.values():  # warm-up: host imports, first pickles, code paths
        await runner(16, 16)
    load_start = os.getloadavg()
    points = []
    for concurrency in concurrencies:
        rows = rows_for(concurrency)
        samples: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(repeats):
            for name, runner in runners.items():
                samples[name].append(await runner(rows, concurrency))
        points.append({"concurrency": concurrency, "rows": rows, "physical_limit": physical_limit(concurrency),
                       "rows_per_s": samples})
        medians = ", ".join(f"{name} {statistics.median(values):.1f}" for name, values in samples.items())
        print(f"concurrency {concurrency:>4} ({rows} rows): {medians} rows/s "
              f"(limit {physical_limit(concurrency):.1f})", file=sys.stderr, flush=True)
    from benchmarks.__main__ import _machine
    from benchmarks.scaling import _source

    return {"machine": _machine(), "source": _source(), "load_average_start": list(load_start), "load_average_end": list(os.getloadavg()),
            "repeats": repeats, "model_latency_s": CHAIN_LATENCY_S, "points": points}


def plot(report: dict[str, Any], target: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("plotting needs matplotlib: pip install -e '.[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = report["points"]
    xs = [point["concurrency"] for point in points]
    figure, axes = plt.subplots(figsize=(8, 5.2), dpi=120)
    axes.plot(xs, [point["physical_limit"] for point in points], "k--", label="physical limit: c / (3 × 50 ms)")
    styles = {"ray_harness (ray)": ("tab:blue", "o"), "ray_harness (local)": ("tab:green", "s"),
              "strands": ("tab:orange", "^")}
    labels = {"ray_harness (ray)": 'ray_harness evaluate, runtime="ray"',
              "ray_harness (local)": 'ray_harness evaluate, runtime="local"',
              "strands": "Strands GraphBuilder, asyncio.gather + semaphore"}
    for name in SYSTEMS:
        values = [point["rows_per_s"][name] for point in points]
        medians = [statistics.median(v) for v in values]
        below = [m - min(v) for m, v in zip(medians, values, strict=True)]
        above = [max(v) - m for m, v in zip(medians, values, strict=True)]
        color, marker = styles[name]
        axes.errorbar(xs, medians, yerr=[below, above], color=color, marker=marker, capsize=3, label=labels[name])
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    from matplotlib.ticker import FuncFormatter, LogLocator

    axes.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
    axes.set_xticks(xs, [str(x) for x in xs])
    axes.set_xlabel("concurrency (rows in flight)")
    axes.set_ylabel("throughput (rows/s, log scale)")
    machine = report["machine"]
    load = report["load_average_start"][0], report["load_average_end"][0]
    axes.set_title(f"P2: 3-node chain, 50 ms per model call — {machine['cpus']} vCPU, {machine['memory_gb']:.0f} GiB, "
                   f"{machine['date']}\nmedian of {report['repeats']} (bars: min–max); load avg "
                   f"{load[0]:.1f}→{load[1]:.1f} (shared machine)", fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=9, loc="upper left")
    figure.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCY))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="concurrency 1 and 16, one repeat")
    parser.add_argument("--replot", action="store_true", help="only redraw the PNG from the JSON")
    parser.add_argument("--json", type=Path, default=JSON_PATH)
    parser.add_argument("--png", type=Path, default=PNG_PATH)
    args = parser.parse_args(argv)
    if args.replot:
        report = json.loads(args.json.read_text(encoding="utf-8"))
    else:
        import logging

        logging.disable(logging.WARNING)
        concurrencies, repeats = ([1, 16], 1) if args.quick else (args.concurrency, args.repeats)
        report = asyncio.run(measure(concurrencies, repeats))
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
        print(f"data: {args.json}", file=sys.stderr)
    plot(report, args.png)
    print(f"plot: {args.png}", file=sys.stderr)


if __name__ == "__main__":
    main()
