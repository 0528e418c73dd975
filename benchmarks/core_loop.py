"""P1 / P1b: in-process agent loop cost, ray_harness vs the Strands SDK, side by side.

Both agents get the *same* scripted model: the Strands adapter below delegates
to ``ray_harness.testing.ScriptedModel.stream``, so both loops consume
identical Converse events at zero latency. Runs are interleaved (A B A B …)
after a warm-up; the table shows the median and min–max per call and the
ratio ray_harness / Strands. Agent construction is excluded; history is
cleared before every call so both loops see the same input.

    python -m benchmarks.core_loop [--calls 300] [--repeats 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ray_harness import Agent, tool
from ray_harness.hooks import BeforeModelCallEvent
from ray_harness.middleware import InvokeModelStage
from ray_harness.testing import ScriptedModel, text, tool_call

try:
    import strands
    from strands.hooks import BeforeModelCallEvent as StrandsBeforeModelCall
    from strands.middleware import InvokeModelStage as StrandsInvokeModelStage
    from strands.models import Model as StrandsModelBase
except ImportError:  # pragma: no cover - strands is a benchmark-only dependency
    strands = None


def make_strands_model(script: ScriptedModel) -> Any:
    class StrandsScripted(StrandsModelBase):  # type: ignore[misc,valid-type]
        def update_config(self, **config: Any) -> None:
            script.update_config(**config)

        def get_config(self) -> Any:
            return script.get_config()

        def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None,
                         **kwargs: Any) -> Any:
            async for event in script.stream(messages, tool_specs, system_prompt,
                                             tool_choice=kwargs.get("tool_choice")):
                yield event

    return StrandsScripted()


def add_impl(a: int, b: int) -> int:
    return a + b


def _tools(decorator: Any) -> list[Any]:
    """The same two tools for both SDKs: a sync one (runs in a worker thread) and an async one."""

    @decorator
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return add_impl(a, b)

    @decorator
    async def add_async(a: int, b: int) -> int:
        """Add two numbers without leaving the event loop."""
        return add_impl(a, b)

    return [add, add_async]


USAGE = {"inputTokens": 20, "outputTokens": 5, "totalTokens": 25}
SCENARIOS: dict[str, Callable[[], list[Any]]] = {
    "one_turn": lambda: [text("hello there", usage=USAGE)],
    "tool_round_trip": lambda: [tool_call("add", {"a": 1, "b": 2}, tool_use_id="t1", usage=USAGE),
                                text("3", usage=USAGE)],
    "async_tool_round_trip": lambda: [tool_call("add_async", {"a": 1, "b": 2}, tool_use_id="t1", usage=USAGE),
                                      text("3", usage=USAGE)],
}


def build_pair(scenario: str, *, hooks: int = 0, middleware: int = 0) -> tuple[Any, Any]:
    steps = SCENARIOS[scenario]()
    ours = Agent(ScriptedModel(*steps, loop=True, record_calls=False), tools=_tools(tool))
    theirs = strands.Agent(model=make_strands_model(ScriptedModel(*steps, loop=True, record_calls=False)),
                           tools=_tools(strands.tool),
                           callback_handler=None)
    for _ in range(hooks):
        ours.add_hook(lambda event: None, BeforeModelCallEvent)
        theirs.hooks.add_callback(StrandsBeforeModelCall, lambda event: None)
    for _ in range(middleware):
        ours.add_middleware(InvokeModelStage, _passthrough)
        theirs.add_middleware(StrandsInvokeModelStage, _passthrough)
    return ours, theirs


async def _passthrough(ctx: Any, next_fn: Any) -> Any:
    async for event in next_fn(ctx):
        yield event


async def time_calls(agent: Any, calls: int) -> float:
    """Seconds per call for ``calls`` invocations (history cleared before each)."""
    total = 0.0
    for _ in range(calls):
        agent.messages.clear()
        started = time.perf_counter()
        await agent.invoke_async("hi")
        total += time.perf_counter() - started
    return total / calls


async def interleaved(factory: Callable[[], tuple[Any, Any]], calls: int, repeats: int) -> dict[str, list[float]]:
    ours, theirs = factory()
    await time_calls(ours, max(10, calls // 10))  # warm-up both
    await time_calls(theirs, max(10, calls // 10))
    samples: dict[str, list[float]] = {"ray_harness": [], "strands": []}
    for _ in range(repeats):
        samples["ray_harness"].append(await time_calls(ours, calls))
        samples["strands"].append(await time_calls(theirs, calls))
    return samples


async def hook_dispatch(calls: int, repeats: int) -> dict[str, list[float]]:
    """Seconds per dispatched event with 10 registered callbacks (registry call only)."""
    from ray_harness.hooks import BeforeModelCallEvent as Ours

    ours, theirs = build_pair("one_turn", hooks=10)
    our_event = Ours(agent=ours)
    their_event = StrandsBeforeModelCall(agent=theirs, invocation_state={})

    async def run(registry: Any, event: Any) -> float:
        started = time.perf_counter()
        for _ in range(calls):
            await registry.invoke_callbacks_async(event)
        return (time.perf_counter() - started) / calls

    samples: dict[str, list[float]] = {"ray_harness": [], "strands": []}
    await run(ours.hooks, our_event)
    await run(theirs.hooks, their_event)
    for _ in range(repeats):
        samples["ray_harness"].append(await run(ours.hooks, our_event))
        samples["strands"].append(await run(theirs.hooks, their_event))
    return samples


async def middleware_overhead(calls: int, repeats: int) -> dict[str, list[float]]:
    """Seconds added per pass-through Wrap layer per call: a 10-layer chain vs the bare terminal."""
    ours, theirs = build_pair("one_turn", middleware=10)
    bare_ours, bare_theirs = build_pair("one_turn")

    async def terminal(ctx: Any) -> Any:
        yield ctx

    async def drive(registry: Any, stage: Any) -> float:
        chain = registry.compose(stage, terminal)
        started = time.perf_counter()
        for _ in range(calls):
            async for _event in chain(None):
                pass
        return (time.perf_counter() - started) / calls

    pairs = {"ray_harness": (ours._middleware, bare_ours._middleware, InvokeModelStage),
             "strands": (theirs._middleware_registry, bare_theirs._middleware_registry, StrandsInvokeModelStage)}
    samples: dict[str, list[float]] = {"ray_harness": [], "strands": []}
    for _ in range(repeats + 1):
        for name, (layered, bare, stage) in pairs.items():
            cost = (await drive(layered, stage) - await drive(bare, stage)) / 10
            samples[name].append(cost)
    return {name: values[1:] for name, values in samples.items()}  # the first round is the warm-up


def summarize(name: str, samples: dict[str, list[float]], unit: float, label: str) -> dict[str, Any]:
    ours, theirs = samples["ray_harness"], samples["strands"]
    row = {
        "benchmark": name,
        "unit": label,
        "ray_harness_median": statistics.median(ours) * unit,
        "ray_harness_min": min(ours) * unit,
        "ray_harness_max": max(ours) * unit,
        "strands_median": statistics.median(theirs) * unit,
        "strands_min": min(theirs) * unit,
        "strands_max": max(theirs) * unit,
    }
    row["ratio"] = row["ray_harness_median"] / row["strands_median"] if row["strands_median"] else float("nan")
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| benchmark | ray_harness median (min–max) | Strands median (min–max) | ratio |", "|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['benchmark']} | {r['ray_harness_median']:.3g} {r['unit']} ({r['ray_harness_min']:.3g}–"
            f"{r['ray_harness_max']:.3g}) | {r['strands_median']:.3g} {r['unit']} ({r['strands_min']:.3g}–"
            f"{r['strands_max']:.3g}) | {r['ratio']:.2f} |"
        )
    return "\n".join(lines)


async def run_all(calls: int, repeats: int) -> list[dict[str, Any]]:
    rows = []
    runs: list[tuple[str, Callable[[], Awaitable[dict[str, list[float]]]], float, str]] = [
        ("P1 one-turn invoke_async", lambda: interleaved(lambda: build_pair("one_turn"), calls, repeats), 1e3, "ms"),
        ("P1 tool round trip (sync tool)", lambda: interleaved(lambda: build_pair("tool_round_trip"), calls, repeats),
         1e3, "ms"),
        ("P1 tool round trip (async tool)",
         lambda: interleaved(lambda: build_pair("async_tool_round_trip"), calls, repeats), 1e3, "ms"),
        ("P1b hook dispatch (10 callbacks), per event", lambda: hook_dispatch(calls * 10, repeats), 1e6, "µs"),
        ("P1b middleware, per Wrap layer per call", lambda: middleware_overhead(calls * 10, repeats), 1e6, "µs"),
    ]
    for name, run, unit, label in runs:
        rows.append(summarize(name, await run(), unit, label))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if strands is None:
        raise SystemExit("strands-agents is not installed: pip install -e '.[bench]'")
    import logging

    logging.disable(logging.WARNING)
    rows = asyncio.run(run_all(args.calls, args.repeats))
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"rows": rows, "strands_version": strands.__version__ if hasattr(strands, "__version__")
                       else "unknown"}, handle, indent=2)


if __name__ == "__main__":
    main()
