"""E1: the overhead of one observing extension per model call and per tool call (target ≤ 5 µs per layer).

Each invocation makes ``TURNS`` model calls and ``TURNS - 1`` tool calls (an async tool) with a scripted
model. Four variants run interleaved in one process, after warm-ups:

* ``none`` — no extension installed (the zero-cost path: nothing is assembled, nothing wraps);
* ``assembly`` — one extension whose only contribution has no hooks: the per-invocation cost of calling
  the contributor and resolving the chain, with no layer on any call;
* ``model`` — one observing ``awrap_model_call`` at ``MODEL_LOGICAL``;
* ``tool`` — one observing ``awrap_tool_call`` at ``TOOL_VISIBLE``.

Per call = (variant − assembly) / calls of that axis per invocation; assembly = assembly − none, per
invocation. ``python -m benchmarks.extensions [--invocations N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from ray_harness import Agent, tool
from ray_harness.extensions import AgentMiddleware, MiddlewarePlacement, Placement, loading, use
from ray_harness.testing import ScriptedModel, text, tool_call

TURNS = 5


@tool
async def echo(value: int) -> int:
    """Return the value."""
    return value


class ModelObserver(AgentMiddleware):
    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


class ToolObserver(AgentMiddleware):
    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


class Inert(AgentMiddleware):
    pass


def _install(middleware: AgentMiddleware, placement: Placement) -> Any:
    placements = (MiddlewarePlacement(middleware, placement),)

    class Contributor:
        def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
            return placements

    def install(registry: Any, config: Any) -> None:
        registry.middlewares(Contributor())

    return install


VARIANTS = {"none": None, "assembly": _install(Inert(), Placement.STANDARD),
            "model": _install(ModelObserver(), Placement.MODEL_LOGICAL),
            "tool": _install(ToolObserver(), Placement.TOOL_VISIBLE)}


def _agent() -> Agent:
    steps = [tool_call("echo", {"value": i}) for i in range(TURNS - 1)] + [text("done")]
    return Agent(ScriptedModel(steps, loop=True, record_calls=False), tools=[echo])


async def _time(variant: str, invocations: int) -> float:
    """Seconds per invocation with ``variant`` installed."""
    loading.reset()
    install = VARIANTS[variant]
    if install is not None:
        use(install)
    agent = _agent()
    for _ in range(20):  # warm-up
        agent.messages.clear()
        await agent.invoke_async("go")
    started = time.perf_counter()
    for _ in range(invocations):
        agent.messages.clear()
        await agent.invoke_async("go")
    return (time.perf_counter() - started) / invocations


async def _bare(request: Any) -> Any:
    yield _RESULT


_RESULT = object()


async def _iterate(layer: Any, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        async for _event in layer(None):
            pass
    return (time.perf_counter() - started) / count


async def layer_alone(count: int, repeats: int) -> dict[str, float]:
    """One observing wrapper around a one-event generator vs that generator alone (min of ``repeats``):
    the layer's own cost, and the bare generator as the machine's yardstick (≈0.5 µs on a quiet VM)."""
    from ray_harness.extensions._isolation import Wrapper, wrap_layer
    from ray_harness.extensions.types import ExtensionData

    wrapper = Wrapper("bench", ModelObserver(), Placement.MODEL_LOGICAL, 0, "extension_bench_ModelObserver_0")
    layer = wrap_layer(wrapper, "awrap_model_call", lambda request: request, _bare, lambda event: event is _RESULT,
                       lambda event: event, ExtensionData())
    bare = min([await _iterate(_bare, count) for _ in range(repeats)])
    wrapped = min([await _iterate(layer, count) for _ in range(repeats)])
    return {"bare_generator_us": bare * 1e6, "layer_us": (wrapped - bare) * 1e6}


async def run(invocations: int, repeats: int) -> dict[str, Any]:

    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(repeats):
        for name in VARIANTS:  # interleaved: load drifts hit every variant alike
            samples[name].append(await _time(name, invocations))
    loading.reset()
    median = {name: statistics.median(values) for name, values in samples.items()}
    alone = await layer_alone(max(1000, invocations * 20), repeats)
    return {
        "layer_alone_us": alone["layer_us"], "bare_generator_us": alone["bare_generator_us"],
        "invocation_us": {name: value * 1e6 for name, value in median.items()},
        "assembly_per_invocation_us": (median["assembly"] - median["none"]) * 1e6,
        "model_layer_per_call_us": (median["model"] - median["assembly"]) / TURNS * 1e6,
        "tool_layer_per_call_us": (median["tool"] - median["assembly"]) / (TURNS - 1) * 1e6,
        "turns": TURNS, "invocations": invocations, "repeats": repeats,
    }


def rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks`` (no Strands counterpart)."""

    def row(name: str, value: float) -> dict[str, Any]:
        return {"benchmark": name, "unit": "µs", "ray_harness_median": value, "ray_harness_min": value,
                "ray_harness_max": value, "strands_median": None, "ratio": None}

    return [row("E1 one observing wrap layer alone (min)", results["layer_alone_us"]),
            row("E1 yardstick: one bare async-generator call (min)", results["bare_generator_us"]),
            row("E1 extension chain assembly, per invocation", results["assembly_per_invocation_us"]),
            row("E1 one observing MODEL_LOGICAL layer, per model call", results["model_layer_per_call_us"]),
            row("E1 one observing TOOL_VISIBLE layer, per tool call", results["tool_layer_per_call_us"])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--invocations", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.invocations, args.repeats)), indent=2))


if __name__ == "__main__":
    main()
