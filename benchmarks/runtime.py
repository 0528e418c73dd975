"""R1-R5: cost of the Ray runtime on a local Ray.

* R1 per-call overhead: the same one-turn agent called in-process vs in a RemoteAgent.
* R2 cancel latency to 100 running agents on pooled hosts (target p50 <= 50 ms): time from
  ``pool.cancel_all`` to each run's result arriving at the driver.
* R3 cancel latency to running agents on dedicated actors (broadcast through a RunHandle).
* R4 resident agents per GB on pooled hosts (RSS growth of the host processes).
* R5 handoff latency driver -> A -> B: agent A's tool invokes agent B (both dedicated actors),
  minus nothing: the table shows the round trip and the single-hop call for comparison.

    python -m benchmarks.runtime [--calls 200] [--agents 100] [--dedicated 10] [--resident 400] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from ray_harness import Agent, ToolContext, tool
from ray_harness.testing import ScriptedModel, text, tool_call

# -- agents (importable by path, so actors build them with factories) ---------------------------------------


# R1/R5's models keep no record of their calls (nothing reads it): a recording model's state holds every request
# it saw, and a dedicated agent journals its model's state after every message, so R1/R5 would measure a cost
# that grows with the benchmark's own call count instead of the runtime's.


def one_turn() -> Agent:
    return Agent(ScriptedModel(text("ok"), loop=True, record_calls=False), name="one_turn", retry_strategy=None)


def slow_model() -> Agent:
    return Agent(ScriptedModel(text("late", delay=60), loop=True), name="slow_model", retry_strategy=None)


def chatty() -> Agent:
    """A resident agent with a short history (about 1 KB of messages after one call)."""
    return Agent(ScriptedModel(text("a short answer " * 8), loop=True), name="chatty",
                 system_prompt="You are terse.", retry_strategy=None)


@tool(context=True)
async def ask_b(question: str, tool_context: ToolContext) -> str:
    """Hand the question to agent B."""
    from ray_harness.runtime import RemoteAgent

    target = tool_context.invocation_state["b_name"]
    return str(await RemoteAgent.get(target).invoke_async(question)).strip()


def agent_a() -> Agent:
    model = ScriptedModel(tool_call("ask_b", {"question": "q"}), text("done"), loop=True, record_calls=False)
    return Agent(model, tools=[ask_b], name="agent_a", retry_strategy=None)


# -- measurements ---------------------------------------------------------------------------------------------


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": statistics.median(ordered) * 1000, "p95": ordered[int(len(ordered) * 0.95) - 1] * 1000,
            "max": ordered[-1] * 1000, "n": len(ordered)}


def per_call_overhead(calls: int) -> dict[str, Any]:
    from ray_harness.runtime import RemoteAgent

    local = one_turn()
    remote = RemoteAgent("benchmarks.runtime:one_turn", name="bench-one-turn")
    try:
        for _ in range(20):  # warm-up
            local("hi")
            remote("hi")
        local_times, remote_times = [], []
        for _ in range(calls):
            started = time.perf_counter()
            local("hi")
            local_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            remote("hi")
            remote_times.append(time.perf_counter() - started)
    finally:
        remote.shutdown()
    return {"in_process": _ms(local_times), "remote_agent": _ms(remote_times)}


async def _collect_cancel(tasks: list[asyncio.Task[Any]], cancel: Any) -> list[float]:
    arrivals: list[float] = []
    started = time.perf_counter()

    def arrived(_: Any) -> None:
        arrivals.append(time.perf_counter() - started)

    for task in tasks:
        task.add_done_callback(arrived)
    await cancel()
    results = await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert {r.stop_reason for r in results} == {"cancelled"}, {r.stop_reason for r in results}
    return arrivals


async def pooled_cancel(pool: Any, agents: int) -> dict[str, Any]:
    spec = pool.prepare("benchmarks.runtime:slow_model")
    ids = [f"bench-{i}" for i in range(agents)]
    tasks = [asyncio.create_task(pool.run(spec, "wait", run_id=run_id)) for run_id in ids]
    while sum(h["running"] for h in await pool.stats()) < agents:  # noqa: ASYNC110 - polling other processes
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # every run is parked in its model call
    arrivals = await _collect_cancel(tasks, lambda: pool.cancel_all(ids))
    return _ms(arrivals)


async def dedicated_cancel(count: int) -> dict[str, Any]:
    from ray_harness.runtime import RemoteAgent, RunHandle

    started = time.perf_counter()
    remotes = [RemoteAgent("benchmarks.runtime:slow_model", name=f"bench-slow-{i}") for i in range(count)]
    start_s = (time.perf_counter() - started) / count
    try:
        tasks = [asyncio.create_task(remote.invoke_async("wait")) for remote in remotes]
        while not all(remote.info()["busy"] for remote in remotes):  # noqa: ASYNC110 - polling other processes
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        handle = RunHandle("bench")
        for remote in remotes:
            handle.add_agent(remote)
        arrivals = await _collect_cancel(tasks, handle.cancel)
    finally:
        for remote in remotes:
            remote.shutdown()
    return {**_ms(arrivals), "actor_start_s": start_s}


async def resident_density(pool: Any, count: int) -> dict[str, Any]:
    before = sum(h["rss_bytes"] for h in await pool.stats())
    spec = pool.prepare("benchmarks.runtime:chatty")
    await asyncio.gather(*(pool.run(spec, "hello", agent_key=f"resident-{i}") for i in range(count)))
    stats = await pool.stats()
    after = sum(h["rss_bytes"] for h in stats)
    resident = sum(h["resident"] for h in stats)
    for i in range(count):
        await pool.release(f"resident-{i}")
    if after <= before:  # too few agents to move the hosts' RSS (--quick): no density to report
        return {"agents": resident, "rss_growth_mb": (after - before) / 2**20, "kb_per_agent": None,
                "agents_per_gb": None}
    per_agent = (after - before) / resident
    return {"agents": resident, "rss_growth_mb": (after - before) / 2**20, "kb_per_agent": per_agent / 1024,
            "agents_per_gb": int(2**30 / per_agent)}


async def handoff(calls: int) -> dict[str, Any]:
    from ray_harness.runtime import RemoteAgent

    a = RemoteAgent("benchmarks.runtime:agent_a", name="bench-a")
    b = RemoteAgent("benchmarks.runtime:one_turn", name="bench-b")
    try:
        state = {"b_name": "bench-b"}
        for _ in range(5):
            await a.invoke_async("go", invocation_state=state)
        chain, single = [], []
        for _ in range(calls):
            started = time.perf_counter()
            await a.invoke_async("go", invocation_state=state)
            chain.append(time.perf_counter() - started)
            started = time.perf_counter()
            await b.invoke_async("go")
            single.append(time.perf_counter() - started)
    finally:
        a.shutdown()
        b.shutdown()
    return {"driver_a_b": _ms(chain), "driver_b": _ms(single)}


def _row(label: str, stats: dict[str, float], unit: str = "ms") -> str:
    return f"| {label} | {stats['p50']:.2f} {unit} | {stats['p95']:.2f} {unit} | {stats['max']:.2f} {unit} | {stats['n']} |"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from ray_harness import runtime
    from ray_harness.runtime import AgentPool

    started = time.perf_counter()
    runtime.init(num_cpus=2, namespace="ray_harness_bench")
    init_s = time.perf_counter() - started
    results: dict[str, Any] = {"ray_init_s": init_s}
    results["per_call"] = await asyncio.to_thread(per_call_overhead, args.calls)
    started = time.perf_counter()
    pool = AgentPool(size=args.hosts)
    results["pool_start_s"] = time.perf_counter() - started
    try:
        results["pooled_cancel"] = await pooled_cancel(pool, args.agents)
        results["resident"] = await resident_density(pool, args.resident)
    finally:
        pool.shutdown()
    results["dedicated_cancel"] = await dedicated_cancel(args.dedicated)
    results["handoff"] = await handoff(args.handoffs)
    return results


def print_table(results: dict[str, Any], args: argparse.Namespace) -> None:
    per_call, handoffs = results["per_call"], results["handoff"]
    print(f"ray.init: {results['ray_init_s']:.1f} s; pool of {args.hosts} hosts ready in {results['pool_start_s']:.2f} s")
    print("| measurement | p50 | p95 | max | n |")
    print("|---|---|---|---|---|")
    print(_row("R1 one-turn call, in-process Agent", per_call["in_process"]))
    print(_row("R1 one-turn call, RemoteAgent (sync)", per_call["remote_agent"]))
    print(_row(f"R2 cancel -> result, {args.agents} agents on {args.hosts} pooled hosts", results["pooled_cancel"]))
    dedicated = results["dedicated_cancel"]
    print(_row(f"R3 cancel -> result, {args.dedicated} dedicated actors", dedicated))
    print(_row("R5 driver -> A -> B -> driver (A's tool calls B)", handoffs["driver_a_b"]))
    print(_row("R5 driver -> B -> driver (single hop)", handoffs["driver_b"]))
    resident = results["resident"]
    print(f"R3 dedicated actor start: {dedicated['actor_start_s']:.2f} s each (sequential)")
    density = ("no measurable RSS growth" if resident["agents_per_gb"] is None else
               f"{resident['kb_per_agent']:.1f} KB/agent, ~{resident['agents_per_gb']:,} agents/GB")
    print(f"R4 resident agents: {resident['agents']} on {args.hosts} hosts, RSS +{resident['rss_growth_mb']:.1f} MB, "
          f"{density}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--dedicated", type=int, default=10)
    parser.add_argument("--resident", type=int, default=400)
    parser.add_argument("--handoffs", type=int, default=50)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    print_table(results, args)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
