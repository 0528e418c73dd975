"""Per-node orchestration overhead: a chain of 200 sequential nodes whose models answer at once.

With no model latency and one node ready at a time, a graph invocation's wall time divided by its
node count is what the runtime costs per node hop: on Ray, the orchestrator actor submitting the node
to a pooled host, the host running one model turn and the node's result and state coming back. The
graph is built once and invoked ``repeats`` times after a warm-up (histories cleared before each run);
the figure is the median over the runs, in ms per node.

    python -m benchmarks.node_overhead [--nodes 200] [--repeats 3] [--runtime ray|local|both] [--json out.json]
    python -m benchmarks.node_overhead --size [--source DIR]   # modules and lines of ray_harness/runtime/
    python -m benchmarks.node_overhead --path                  # functions one node's invocation runs (Ray)

``--path`` counts the ray_harness functions that one invocation of a one-node graph on Ray runs, in each
process of its path: the driver (a profile hook on the driver's loop, after a warm-up invocation), the
orchestration host and the node's host. The hosts are reached through the graph's own hooks (a
:class:`PathProbe` on the graph and one on the agent, whose callbacks run on the host's event-loop thread,
where a hook installed from a ``__ray_call__`` would not reach): the end of the first invocation installs a
profile hook on that thread and the start of the third writes what it saw to a file and removes it, so the
second invocation is seen whole (with the first one's end and the third one's start, the same functions;
and whatever else that loop ran meanwhile). Reported per process and for the whole path: distinct functions
and modules, all and those of ``runtime/`` and ``multiagent/``.

``--size`` counts what the node's path is made of: the modules of ``ray_harness/runtime/`` and their lines
(all lines, and without docstrings and comments: code), for before/after comparisons of one checkout with
another (``--source`` points at the other checkout's package root).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import io
import json
import statistics
import time
import tokenize
from pathlib import Path
from typing import Any

from ray_harness import Agent, GraphBuilder
from ray_harness.testing import ScriptedModel

NODES = 200


def chain(nodes: int, runtime: str) -> Any:
    builder = GraphBuilder()
    for i in range(nodes):
        builder.add_node(Agent(ScriptedModel("ok", loop=True, record_calls=False), name=f"n{i}",
                               retry_strategy=None), f"n{i}")
        if i:
            builder.add_edge(f"n{i - 1}", f"n{i}")
    return builder.build(runtime=runtime)


async def per_node_ms(nodes: int, runtime: str, repeats: int) -> list[float]:
    graph = chain(nodes, runtime)
    samples: list[float] = []
    try:
        for run in range(repeats + 1):  # the first run is the warm-up (actor start, pool, imports)
            for node in graph.nodes.values():
                node.executor.messages.clear()
            started = time.perf_counter()
            result = await graph.invoke_async("go")
            elapsed = time.perf_counter() - started
            if result.completed_nodes != nodes:
                raise RuntimeError(f"chain did not complete: {result.status}, {result.completed_nodes}/{nodes}")
            if run:
                samples.append(elapsed * 1000 / nodes)
    finally:
        graph.shutdown()
    return samples


def runtime_size(source: Path | None = None) -> dict[str, int]:
    """Modules of ``ray_harness/runtime/`` and their lines: all, and code only (no docstrings, comments, blanks)."""
    root = (source or Path(__file__).resolve().parents[1]) / "ray_harness" / "runtime"
    files = sorted(root.glob("*.py"))
    total = code = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        total += len(text.splitlines())
        code += len(_code_lines(text))
    return {"modules": len(files), "lines": total, "code_lines": code}


def _code_lines(text: str) -> set[int]:
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                          tokenize.ENDMARKER):
            continue
        lines.update(line for line in range(token.start[0], token.end[0] + 1) if line not in docstrings)
    return lines


_SEEN: set[tuple[str, str]] = set()


def _profile(frame: Any, event: str, arg: Any) -> None:
    if event == "call":
        code = frame.f_code
        name = code.co_filename
        if "/ray_harness/" in name:
            _SEEN.add((name.rsplit("/ray_harness/", 1)[1], code.co_qualname))


def _start_profile() -> None:
    import sys

    _SEEN.clear()
    sys.setprofile(_profile)  # this thread: the driver's event loop


def _stop_profile() -> list[tuple[str, str]]:
    import sys

    sys.setprofile(None)
    return sorted(_SEEN)


class PathProbe:
    """Profiles the thread its hook callbacks run on (a host's event loop) over the second of three invocations.

    Args:
        path: Where the third invocation's start writes the functions seen (JSON list of [module, name]).
        before: The event that starts an invocation (``BeforeMultiAgentInvocationEvent`` / ``BeforeInvocationEvent``).
        after: The event that ends one.

    """

    def __init__(self, path: str, before: type, after: type) -> None:
        self.path, self.before, self.after = path, before, after
        self.invocations = 0

    def register_hooks(self, registry: Any, **_: Any) -> None:
        registry.add_callback(self.before, self._before)
        registry.add_callback(self.after, self._after)

    def _before(self, _event: Any) -> None:
        self.invocations += 1
        if self.invocations == 3:
            Path(self.path).write_text(json.dumps(_stop_profile()), encoding="utf-8")

    def _after(self, _event: Any) -> None:
        if self.invocations == 1:
            _start_profile()


def _listing(file: str) -> set[tuple[str, str]]:
    """What a :class:`PathProbe` wrote."""
    return {(module, name) for module, name in json.loads(Path(file).read_text(encoding="utf-8"))}


def _counts(seen: set[tuple[str, str]]) -> dict[str, Any]:
    ours = {item for item in seen if item[0].startswith(("runtime/", "multiagent/"))}
    return {"functions": len(seen), "modules": len({module for module, _ in seen}),
            "runtime_and_multiagent_functions": len(ours),
            "runtime_and_multiagent_modules": len({module for module, _ in ours}),
            "listing": sorted(f"{module}:{name}" for module, name in ours)}


async def node_path() -> dict[str, Any]:
    """Distinct ray_harness functions and modules one invocation of a one-node graph on Ray runs, per process."""
    import tempfile

    from ray_harness.hooks import (
        AfterInvocationEvent,
        AfterMultiAgentInvocationEvent,
        BeforeInvocationEvent,
        BeforeMultiAgentInvocationEvent,
    )

    with tempfile.TemporaryDirectory() as directory:
        host_file, node_file = f"{directory}/orchestration_host.json", f"{directory}/node_host.json"
        builder = GraphBuilder()
        agent = Agent(ScriptedModel("ok", loop=True, record_calls=False), name="n0", retry_strategy=None,
                      hooks=[PathProbe(node_file, BeforeInvocationEvent, AfterInvocationEvent)])
        builder.add_node(agent, "n0")
        builder.set_hook_providers([PathProbe(host_file, BeforeMultiAgentInvocationEvent,
                                              AfterMultiAgentInvocationEvent)])
        graph = builder.build(runtime="ray")
        try:
            await graph.invoke_async("warm-up")
            _start_profile()
            await graph.invoke_async("go")
            driver = set(_stop_profile())
            await graph.invoke_async("write")
        finally:
            graph.shutdown()
        halves = {"driver": driver}
        for name, file in (("orchestration_host", host_file), ("node_host", node_file)):
            halves[name] = _listing(file)
    report = {name: _counts(seen) for name, seen in halves.items()}
    whole = _counts(set().union(*halves.values()))
    whole.pop("listing")
    report["whole_path"] = whole
    return report


def run_suite(*, quick: bool = False) -> list[dict[str, Any]]:
    nodes, repeats = (20, 1) if quick else (NODES, 3)
    rows = []
    for runtime in ("ray", "local"):
        samples = asyncio.run(per_node_ms(nodes, runtime, repeats))
        rows.append({"suite": "node_overhead", "name": f"{nodes} sequential 0-latency nodes ({runtime})",
                     "unit": "ms per node", "median": statistics.median(samples), "min": min(samples),
                     "max": max(samples)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runtime", choices=("ray", "local", "both"), default="both")
    parser.add_argument("--json", default=None)
    parser.add_argument("--size", action="store_true", help="count modules and lines of ray_harness/runtime/")
    parser.add_argument("--source", type=Path, default=None, help="package root to count (default: this one)")
    parser.add_argument("--path", action="store_true", help="count the functions one node's invocation runs")
    args = parser.parse_args()
    if args.path:
        print(json.dumps(asyncio.run(node_path()), indent=1))
        return
    if args.size:
        print(json.dumps(runtime_size(args.source)))
        return
    report: dict[str, Any] = {}
    for runtime in (("ray", "local") if args.runtime == "both" else (args.runtime,)):
        samples = asyncio.run(per_node_ms(args.nodes, runtime, args.repeats))
        report[runtime] = samples
        print(f"{runtime}: {statistics.median(samples):.2f} ms per node "
              f"({min(samples):.2f}-{max(samples):.2f}) over {args.nodes} sequential nodes")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
