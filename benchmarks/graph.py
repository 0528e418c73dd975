"""P2: graphs, ray_harness on Ray vs the Strands SDK, side by side on identical scripted models.

Both SDKs get the *same* scripted answers: the Strands adapter (as in
:mod:`benchmarks.core_loop`) delegates to ``ray_harness.testing.ScriptedModel.stream``,
so model latency is a scripted ``asyncio.sleep`` in both. Scenarios:

* ``fanout_io``: 100 independent nodes in one batch, one model call each (200 ms latency).
* ``fanout_cpu``: 20 independent nodes; each calls a tool doing a fixed amount of
  pure-Python work until it has used 200 ms of CPU time (it holds the GIL). Strands runs all of them in one process; ray_harness spreads them over
  the host pool's processes. Target: >= 1.8x Strands on 2 cores.
* ``new_graph_once`` / ``new_graph_again``: a NEW 40-node wide graph (100 ms model per node) built
  from a warm driver (Ray and the pools up) and invoked once, then the same graph invoked again: what a
  fresh Graph object costs (on ``runtime="ray"`` no actor is started for it; its agents ship once).
* ``chain_eval``: a 3-node chain (50 ms per model call) over 1,000 inputs. ray_harness:
  ``ray_harness.evaluation.evaluate`` (rows on the host pool, each row's graph in its host);
  Strands: one graph per input, all under ``asyncio.gather``.

Agent and graph construction is excluded for the fan-outs (histories are cleared before
every run); the chain includes building one graph per input in both. Runs alternate
(ours, theirs, ours, ...) after a warm-up; the table shows the median and min–max.
``ray_harness (local)`` is the same graph with ``runtime="local"`` (one process), for context.

    python -m benchmarks.graph [--repeats 3] [--inputs 1000] [--scenarios fanout_cpu ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from ray_harness import Agent, GraphBuilder, tool
from ray_harness.testing import ScriptedModel, text, tool_call

try:
    import strands
    from strands.multiagent import GraphBuilder as StrandsGraphBuilder
except ImportError:  # pragma: no cover - strands is a benchmark-only dependency
    strands = None

from benchmarks.core_loop import make_strands_model

FANOUT_NODES = 100
FANOUT_LATENCY_S = 0.2
CPU_NODES = 20
CPU_BURN_MS = 200
CHAIN_LATENCY_S = 0.05
NEW_GRAPH_NODES = 40
NEW_GRAPH_LATENCY_S = 0.1
USAGE = {"inputTokens": 20, "outputTokens": 5, "totalTokens": 25}


def burn_cpu(milliseconds: int) -> str:
    """Pure-Python work until this thread has used ``milliseconds`` of CPU time (it holds the GIL meanwhile).

    Measured with ``time.thread_time()``, so every tool call costs the same CPU on either SDK whatever else
    runs on the machine (a spin count calibrated once drifted with the load and with hyperthread sharing).
    """
    deadline = time.thread_time() + milliseconds / 1000
    total = 0
    while time.thread_time() < deadline:
        for i in range(2_000):
            total += i * i % 7
    return f"burned {total}"


@tool
def burn(milliseconds: int) -> str:
    """Burn the given milliseconds of CPU time."""
    return burn_cpu(milliseconds)


def _strands_burn() -> Any:
    @strands.tool
    def burn(milliseconds: int) -> str:
        """Burn the given milliseconds of CPU time."""
        return burn_cpu(milliseconds)

    return burn


# -- graphs ---------------------------------------------------------------------------------------------------


def _fanout_steps() -> list[Any]:
    return [text("node answer", delay=FANOUT_LATENCY_S, usage=USAGE)]


def _new_graph_steps() -> list[Any]:
    return [text("node answer", delay=NEW_GRAPH_LATENCY_S, usage=USAGE)]


def _cpu_steps() -> list[Any]:
    return [tool_call("burn", {"milliseconds": CPU_BURN_MS}, usage=USAGE), text("burned", usage=USAGE)]


def ours_fanout(nodes: int, steps: Callable[[], list[Any]], runtime: str, tools: list[Any] | None = None) -> Any:
    builder = GraphBuilder()
    for i in range(nodes):
        model = ScriptedModel(*steps(), loop=True, record_calls=False)
        builder.add_node(Agent(model, tools=tools, name=f"n{i}", retry_strategy=None), f"n{i}")
    return builder.build(runtime=runtime)


def theirs_fanout(nodes: int, steps: Callable[[], list[Any]], tools: list[Any] | None = None) -> Any:
    builder = StrandsGraphBuilder()
    for i in range(nodes):
        model = make_strands_model(ScriptedModel(*steps(), loop=True, record_calls=False))
        builder.add_node(strands.Agent(model=model, tools=tools, name=f"n{i}", callback_handler=None), f"n{i}")
    return builder.build()


def chain_graph(runtime: str = "ray") -> Any:
    """The evaluation target: a fresh 3-node chain (built in the host that runs the row, where it runs in-process)."""
    builder = GraphBuilder()
    for name in ("draft", "review", "final"):
        builder.add_node(Agent(ScriptedModel(text(f"{name} ok", delay=CHAIN_LATENCY_S, usage=USAGE),
                                             record_calls=False), name=name, retry_strategy=None), name)
    builder.add_edge("draft", "review")
    builder.add_edge("review", "final")
    return builder.build(runtime=runtime)


def strands_chain_graph() -> Any:
    builder = StrandsGraphBuilder()
    for name in ("draft", "review", "final"):
        model = make_strands_model(ScriptedModel(text(f"{name} ok", delay=CHAIN_LATENCY_S, usage=USAGE),
                                                 record_calls=False))
        builder.add_node(strands.Agent(model=model, name=name, callback_handler=None), name)
    builder.add_edge("draft", "review")
    builder.add_edge("review", "final")
    return builder.build()


# -- runs -----------------------------------------------------------------------------------------------------


def _clear(graph: Any) -> None:
    for node in graph.nodes.values():
        node.executor.messages.clear()


async def _timed_graph(graph: Any, expect_nodes: int) -> float:
    _clear(graph)
    started = time.perf_counter()
    result = await graph.invoke_async("go")
    elapsed = time.perf_counter() - started
    completed = getattr(result, "completed_nodes", None)
    if str(getattr(result.status, "value", result.status)).lower() != "completed" or completed != expect_nodes:
        raise RuntimeError(f"benchmark graph did not complete: {result.status}, {completed}/{expect_nodes}")
    return elapsed


async def _ours_chain(inputs: int) -> float:
    from ray_harness.evaluation import evaluate_async
    from ray_harness.runtime._multiagent_pool import default_pool

    rows = [{"prompt": f"input {i}"} for i in range(inputs)]
    started = time.perf_counter()
    summary = await evaluate_async("benchmarks.graph:chain_graph", rows, concurrency=inputs, pool=default_pool(),
                                   progress=False)
    elapsed = time.perf_counter() - started
    if summary["errors"]:
        raise RuntimeError(f"evaluation had {summary['errors']} errors")
    return elapsed


async def _ours_local_chain(inputs: int) -> float:
    started = time.perf_counter()
    graphs = [chain_graph("local") for _ in range(inputs)]
    results = await asyncio.gather(*(graph.invoke_async(f"input {i}") for i, graph in enumerate(graphs)))
    elapsed = time.perf_counter() - started
    if {r.status.value for r in results} != {"completed"}:
        raise RuntimeError("local chain runs did not complete")
    return elapsed


async def _theirs_chain(inputs: int) -> float:
    started = time.perf_counter()
    graphs = [strands_chain_graph() for _ in range(inputs)]
    results = await asyncio.gather(*(graph.invoke_async(f"input {i}") for i, graph in enumerate(graphs)))
    elapsed = time.perf_counter() - started
    if {str(r.status.value).lower() for r in results} != {"completed"}:
        raise RuntimeError("strands chain runs did not complete")
    return elapsed


async def measure(runs: dict[str, Callable[[], Awaitable[float]]], repeats: int) -> dict[str, list[float]]:
    for run in runs.values():  # warm-up: host imports, first pickles, code paths
        await run()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            samples[name].append(await run())
    return samples


async def main_async(repeats: int, inputs: int, scenarios: list[str]) -> dict[str, Any]:
    from ray_harness import runtime
    from ray_harness.runtime._multiagent_pool import default_pool

    if strands is None:
        raise SystemExit("the Strands SDK is needed: pip install 'ray_harness[bench]'")
    # Strands warns about graphs without execution limits; these graphs have no cycles.
    warnings.filterwarnings("ignore", message="graph has no max_node_executions")
    runtime.init()
    pool = default_pool()
    report: dict[str, Any] = {"cpus": os.cpu_count(), "pool_size": pool.size, "scenarios": {}}

    if "fanout_io" in scenarios:
        await _fanout_io(report, repeats)
    if "fanout_cpu" in scenarios:
        await _fanout_cpu(report, repeats)
    if "new_graph_once" in scenarios or "new_graph_again" in scenarios:
        await _new_graph(report, repeats)
    if "chain_eval" in scenarios:
        report["scenarios"]["chain_eval"] = await measure({
            "ray_harness (ray)": lambda: _ours_chain(inputs),
            "strands": lambda: _theirs_chain(inputs),
            "ray_harness (local)": lambda: _ours_local_chain(inputs),
        }, repeats)
    return report


async def _fanout_io(report: dict[str, Any], repeats: int) -> None:
    io_ray, io_local = (ours_fanout(FANOUT_NODES, _fanout_steps, r) for r in ("ray", "local"))
    io_theirs = theirs_fanout(FANOUT_NODES, _fanout_steps)
    report["scenarios"]["fanout_io"] = await measure({
        "ray_harness (ray)": lambda: _timed_graph(io_ray, FANOUT_NODES),
        "strands": lambda: _timed_graph(io_theirs, FANOUT_NODES),
        "ray_harness (local)": lambda: _timed_graph(io_local, FANOUT_NODES),
    }, repeats)


async def _new_graph(report: dict[str, Any], repeats: int) -> None:
    """Per repeat and SDK: build a new graph, time its first invocation, then its second (built and torn down untimed)."""
    builders: dict[str, Callable[[], Any]] = {
        "ray_harness (ray)": lambda: ours_fanout(NEW_GRAPH_NODES, _new_graph_steps, "ray"),
        "strands": lambda: theirs_fanout(NEW_GRAPH_NODES, _new_graph_steps),
        "ray_harness (local)": lambda: ours_fanout(NEW_GRAPH_NODES, _new_graph_steps, "local"),
    }
    once: dict[str, list[float]] = {name: [] for name in builders}
    again: dict[str, list[float]] = {name: [] for name in builders}
    for repeat in range(repeats + 1):  # the first round warms up (imports, code paths)
        for name, build in builders.items():
            graph = build()
            first = await _timed_graph(graph, NEW_GRAPH_NODES)
            second = await _timed_graph(graph, NEW_GRAPH_NODES)
            if hasattr(graph, "shutdown"):
                graph.shutdown()  # its slots go; the next new graph ships its agents again
            if repeat:
                once[name].append(first)
                again[name].append(second)
    report["scenarios"]["new_graph_once"] = once
    report["scenarios"]["new_graph_again"] = again


async def _fanout_cpu(report: dict[str, Any], repeats: int) -> None:
    # The tool ships to the hosts by reference: name it through this module's import path, not ``__main__``.
    from benchmarks.graph import burn as shipped_burn

    cpu_ray, cpu_local = (ours_fanout(CPU_NODES, _cpu_steps, r, tools=[shipped_burn]) for r in ("ray", "local"))
    cpu_theirs = theirs_fanout(CPU_NODES, _cpu_steps, tools=[_strands_burn()])
    report["scenarios"]["fanout_cpu"] = await measure({
        "ray_harness (ray)": lambda: _timed_graph(cpu_ray, CPU_NODES),
        "strands": lambda: _timed_graph(cpu_theirs, CPU_NODES),
        "ray_harness (local)": lambda: _timed_graph(cpu_local, CPU_NODES),
    }, repeats)


LABELS = {
    "fanout_io": f"fan-out {FANOUT_NODES} nodes, {int(FANOUT_LATENCY_S * 1000)} ms model",
    "fanout_cpu": f"fan-out {CPU_NODES} nodes, {CPU_BURN_MS} ms CPU tool each",
    "new_graph_once": f"new {NEW_GRAPH_NODES}-node graph, {int(NEW_GRAPH_LATENCY_S * 1000)} ms model, invoked once",
    "new_graph_again": f"the same new {NEW_GRAPH_NODES}-node graph invoked again",
    "chain_eval": "3-node chain x {inputs} inputs, 50 ms model",
}


def table(report: dict[str, Any], inputs: int) -> str:
    lines = [f"Graphs: ray_harness vs Strands ({report['cpus']} CPUs, {report['pool_size']} host actors); "
             "seconds per run, median (min–max)", "",
             "| scenario | ray_harness (ray) | strands | ray_harness (local) | Strands / ray_harness (ray) |",
             "|---|---|---|---|---|"]
    for key, samples in report["scenarios"].items():
        def cell(name: str, samples: dict[str, list[float]] = samples) -> str:
            values = samples[name]
            return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"

        speedup = statistics.median(samples["strands"]) / statistics.median(samples["ray_harness (ray)"])
        label = LABELS[key].format(inputs=inputs)
        lines.append(f"| {label} | {cell('ray_harness (ray)')} | {cell('strands')} | {cell('ray_harness (local)')} "
                     f"| {speedup:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--json", help="also write the raw samples here")
    parser.add_argument("--scenarios", nargs="+", choices=list(LABELS), default=list(LABELS))
    args = parser.parse_args()
    report = asyncio.run(main_async(args.repeats, args.inputs, args.scenarios))
    report["inputs"] = args.inputs
    print(table(report, args.inputs))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()


def run_suite(*, quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks run`` (P2 evaluation throughput, P3 CPU fan-out, wide fan-out)."""
    inputs = 50 if quick else 1000
    repeats = 1 if quick else 3
    report = asyncio.run(main_async(repeats, inputs, list(LABELS)))
    names = {"chain_eval": f"P2 3-node chain × {inputs} inputs, 50 ms model (evaluate vs asyncio.gather)",
             "fanout_cpu": f"P3 CPU fan-out, {CPU_NODES} nodes × {CPU_BURN_MS} ms pure-Python tool",
             "fanout_io": f"wide fan-out, {FANOUT_NODES} nodes × {int(FANOUT_LATENCY_S * 1000)} ms model",
             "new_graph_once": f"new {NEW_GRAPH_NODES}-node graph × {int(NEW_GRAPH_LATENCY_S * 1000)} ms model, "
                               "invoked once (warm driver)",
             "new_graph_again": f"the same new {NEW_GRAPH_NODES}-node graph, invoked again"}
    rows: list[dict[str, Any]] = []
    for key, samples in report["scenarios"].items():
        ours, theirs, local = samples["ray_harness (ray)"], samples["strands"], samples["ray_harness (local)"]
        rows.append({"benchmark": names[key], "unit": "s", "ray_harness_median": statistics.median(ours),
                     "ray_harness_min": min(ours), "ray_harness_max": max(ours),
                     "strands_median": statistics.median(theirs), "strands_min": min(theirs),
                     "strands_max": max(theirs),
                     "ratio": statistics.median(ours) / statistics.median(theirs)})
        rows.append({"benchmark": f"{names[key]} — ray_harness runtime='local'", "unit": "s",
                     "ray_harness_median": statistics.median(local), "ray_harness_min": min(local),
                     "ray_harness_max": max(local), "strands_median": None, "ratio": None})
        if key == "chain_eval":
            # Every input in flight at once: the physical limit is three sequential 50 ms model calls.
            rows.append({"benchmark": "P2 physical limit (all inputs concurrent: 3 × 50 ms)", "unit": "s",
                         "ray_harness_median": 3 * CHAIN_LATENCY_S, "ray_harness_min": 3 * CHAIN_LATENCY_S,
                         "ray_harness_max": 3 * CHAIN_LATENCY_S, "strands_median": None, "ratio": None})
    return rows
