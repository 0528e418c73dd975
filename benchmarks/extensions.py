"""E1: the overhead of one observing extension layer per model call and per tool call (target ≤ 5 µs).

Each invocation makes ``TURNS`` model calls and ``TURNS - 1`` tool calls (an async ``@tool``) with a scripted
model. One agent runs these variants, switched by one installed contributor, in blocks of ``BLOCK``
invocations interleaved variant by variant (so a drift of the machine's load hits them alike), after a
warm-up:

* ``none`` — no extension installed (the zero-cost path: nothing is assembled, nothing wraps);
* ``inert`` — ``LAYERS`` contributions without hooks: the per-invocation cost of calling the contributor and
  resolving the chain, with no layer on any call (the baseline of the four below);
* one variant per placement (``MODEL_LOGICAL``, ``MODEL_PHYSICAL``, ``TOOL_VISIBLE``, ``TOOL_RAW``) —
  ``LAYERS`` observing wrap hooks stacked at that placement.

Per layer per call = (placement − inert) / (``LAYERS`` × calls of that axis per invocation), computed per
repetition; the report gives the minimum and the median over repetitions. Stacking ``LAYERS`` layers makes
the difference ``LAYERS`` times larger than one layer's, so it stands out of a loaded machine's noise.
"Layer alone" does the same without the agent loop: ``LAYERS`` wrappers stacked around a one-event async
generator vs the bare generator (the machine's yardstick). Times are the process's CPU time
(``time.process_time``), not wall time: on a loaded machine the process waits for a core for long stretches,
and that wait, not the code, dominates wall-clock differences. ``python -m benchmarks.extensions
[--invocations N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from typing import Any

from ray_harness import Agent, tool
from ray_harness.extensions import AgentMiddleware, MiddlewarePlacement, Placement, loading, use
from ray_harness.testing import ScriptedModel, text, tool_call

TURNS = 5
LAYERS = 8
BLOCK = 10
AXIS_CALLS = {Placement.MODEL_LOGICAL: TURNS, Placement.MODEL_PHYSICAL: TURNS,
              Placement.TOOL_VISIBLE: TURNS - 1, Placement.TOOL_RAW: TURNS - 1}


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


def _stacked(placement: Placement) -> tuple[MiddlewarePlacement, ...]:
    observer = ModelObserver if placement in (Placement.MODEL_LOGICAL, Placement.MODEL_PHYSICAL) else ToolObserver
    return tuple(MiddlewarePlacement(observer(), placement) for _ in range(LAYERS))


VARIANTS: dict[str, tuple[MiddlewarePlacement, ...] | None] = {
    "none": None, "inert": tuple(MiddlewarePlacement(Inert(), Placement.STANDARD) for _ in range(LAYERS))}
VARIANTS.update({placement.name: _stacked(placement) for placement in AXIS_CALLS})
_contributed: list[tuple[MiddlewarePlacement, ...]] = [()]


class _Switch:
    """The one contributor: it contributes the current variant's placements (switched between blocks)."""

    def contribute_middlewares(self, app_store: Any, ctx: Any) -> Any:
        return _contributed[0]


def install(registry: Any, config: Any) -> None:
    registry.middlewares(_Switch())


def select(variant: str) -> None:
    """Make ``variant`` the installed contribution (``none``: no extension installed at all)."""
    placements = VARIANTS[variant]
    loading.reset()
    if placements is not None:
        _contributed[0] = placements
        use(install)


def _agent() -> Agent:
    steps = [tool_call("echo", {"value": i}) for i in range(TURNS - 1)] + [text("done")]
    return Agent(ScriptedModel(steps, loop=True, record_calls=False), tools=[echo])


async def _block(agent: Agent, variant: str, invocations: int) -> float:
    """CPU seconds of ``invocations`` invocations with ``variant`` installed."""
    select(variant)
    started = time.process_time()
    for _ in range(invocations):
        agent.messages.clear()
        await agent.invoke_async("go")
    return time.process_time() - started


async def _repetition(agent: Agent, invocations: int) -> dict[str, float]:
    """Seconds per invocation of each variant, in blocks of ``BLOCK`` invocations interleaved variant by variant:
    a drift of the machine's load within the repetition hits every variant alike."""
    totals = dict.fromkeys(VARIANTS, 0.0)
    for _ in range(max(1, invocations // BLOCK)):
        for name in VARIANTS:
            totals[name] += await _block(agent, name, BLOCK)
    return {name: total / (max(1, invocations // BLOCK) * BLOCK) for name, total in totals.items()}


class _Result:
    pass


_RESULT = _Result()


async def _bare(request: Any) -> Any:
    yield _RESULT


async def _iterate(layer: Any, count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        async for _event in layer(None):
            pass
    return (time.process_time() - started) / count


async def layer_alone(count: int, repeats: int) -> dict[str, float]:
    """``LAYERS`` observing wrappers stacked around a one-event generator vs that generator alone: per layer
    (min and median over ``repeats`` paired runs), and the bare generator as the machine's yardstick."""
    from ray_harness.extensions._isolation import Layers, Wrapper
    from ray_harness.extensions.types import ExtensionData

    wrappers = [Wrapper("bench", ModelObserver(), Placement.MODEL_LOGICAL, 0, f"extension_bench_ModelObserver_{index}")
                for index in range(LAYERS)]
    layers = Layers(wrappers, "awrap_model_call", lambda request: request, _Result, lambda event: event)
    store = ExtensionData()

    def layer(request: Any) -> Any:
        return layers.run(_bare, request, store)

    bare: list[float] = []
    per_layer: list[float] = []
    for _ in range(repeats):
        alone = await _iterate(_bare, count)
        bare.append(alone)
        per_layer.append((await _iterate(layer, count) - alone) / LAYERS)
    return {"bare_generator_us": min(bare) * 1e6, "layer_us_min": min(per_layer) * 1e6,
            "layer_us_median": statistics.median(per_layer) * 1e6}


async def run(invocations: int, repeats: int) -> dict[str, Any]:
    agent = _agent()
    for name in VARIANTS:  # warm-up
        await _block(agent, name, 20)
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    per_layer: dict[str, list[float]] = {placement.name: [] for placement in AXIS_CALLS}
    loads = [os.getloadavg()[0]]
    for _ in range(repeats):
        times = await _repetition(agent, invocations)
        for name, value in times.items():
            samples[name].append(value)
        for placement, calls in AXIS_CALLS.items():
            per_layer[placement.name].append((times[placement.name] - times["inert"]) / (LAYERS * calls))
        loads.append(os.getloadavg()[0])
    loading.reset()
    alone = await layer_alone(max(1000, invocations * 20), repeats)
    assembly = [inert - none for inert, none in zip(samples["inert"], samples["none"], strict=True)]
    return {
        "layer_alone_us": {"min": alone["layer_us_min"], "median": alone["layer_us_median"]},
        "bare_generator_us": alone["bare_generator_us"],
        "invocation_us_median": {name: statistics.median(values) * 1e6 for name, values in samples.items()},
        "assembly_per_invocation_us": {"min": min(assembly) * 1e6, "median": statistics.median(assembly) * 1e6},
        "per_layer_per_call_us": {name: {"min": min(values) * 1e6, "median": statistics.median(values) * 1e6}
                                  for name, values in per_layer.items()},
        "turns": TURNS, "layers": LAYERS, "invocations": invocations, "repeats": repeats, "block": BLOCK,
        "load_average": {"min": min(loads), "max": max(loads)},
    }


def rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks`` (no Strands counterpart)."""

    def row(name: str, values: dict[str, float] | float) -> dict[str, Any]:
        low, middle = (values["min"], values["median"]) if isinstance(values, dict) else (values, values)
        return {"benchmark": name, "unit": "µs", "ray_harness_median": middle, "ray_harness_min": low,
                "ray_harness_max": None, "strands_median": None, "ratio": None}

    per_layer = results["per_layer_per_call_us"]
    return [row("E1 one observing wrap layer alone", results["layer_alone_us"]),
            row("E1 yardstick: one bare async-generator call (min)", results["bare_generator_us"]),
            row("E1 extension chain assembly, per invocation", results["assembly_per_invocation_us"]),
            row("E1 one observing MODEL_LOGICAL layer, per model call", per_layer["MODEL_LOGICAL"]),
            row("E1 one observing MODEL_PHYSICAL layer, per model call", per_layer["MODEL_PHYSICAL"]),
            row("E1 one observing TOOL_VISIBLE layer, per tool call", per_layer["TOOL_VISIBLE"]),
            row("E1 one observing TOOL_RAW layer, per tool call", per_layer["TOOL_RAW"])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--invocations", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.invocations, args.repeats)), indent=2))


if __name__ == "__main__":
    main()
