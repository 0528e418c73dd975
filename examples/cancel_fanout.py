"""Cancel a 100-node fan-out: one ``graph.cancel()`` stops every running node, and the latency is printed.

    python examples/cancel_fanout.py                      # on Ray: an embedded local Ray, or RAY_ADDRESS
    python examples/cancel_fanout.py --runtime local      # the same graph in this process
    python examples/cancel_fanout.py --nodes 20 --model openai:gpt-4o

What it shows:

* a Graph ``dispatch → worker_0 … worker_99`` whose workers all run at once (one ready batch);
  on ``runtime="ray"`` the orchestrator is an actor and the workers live on pooled host actors;
* ``graph.cancel()`` from the driver while all workers are mid-model-call: one message to the
  orchestrator, which broadcasts the cancel to every host at once;
* the result: ``Status.CANCELLED`` for the graph and every worker, no exception, and the time from
  ``cancel()`` to the final result (tens of milliseconds on a laptop; see benchmarks P4).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections import Counter

from ray_harness import Agent, Graph, GraphBuilder, Status
from ray_harness.testing import ScriptedModel, text


def build_graph(nodes: int, model: str | None, runtime: str) -> Graph:
    """``dispatch`` fans out to ``nodes`` workers whose offline model takes 10 minutes to answer."""
    builder = GraphBuilder()
    builder.add_node(Agent(model or ScriptedModel(text("Split into parts.")), name="dispatch"), "dispatch")
    for index in range(nodes):
        worker = Agent(model or ScriptedModel(text("never finished", delay=600)), name=f"worker_{index}",
                       system_prompt="Write a 5,000-word essay on your part of the task.")
        builder.add_node(worker, f"worker_{index}")
        builder.add_edge("dispatch", f"worker_{index}")
    return builder.build(runtime=runtime)


async def run(nodes: int, model: str | None, runtime: str) -> int:
    graph = build_graph(nodes, model, runtime)
    started: set[str] = set()
    cancelled_at = None
    result = None
    try:
        async for event in graph.stream_async("Write the encyclopedia."):
            if event["type"] == "multiagent_node_start" and event["node_id"].startswith("worker_"):
                started.add(event["node_id"])
                if len(started) == nodes:
                    print(f"all {nodes} workers are running; cancelling")
                    cancelled_at = time.perf_counter()
                    graph.cancel()
            elif event["type"] == "multiagent_result":
                result = event["result"]
        latency = time.perf_counter() - cancelled_at if cancelled_at is not None else float("nan")
    finally:
        graph.shutdown()
    assert result is not None
    statuses = Counter(node.status.value for node in result.results.values())
    print(f"graph status={result.status.value}; node statuses: {dict(sorted(statuses.items()))}")
    print(f"cancel -> result latency: {latency * 1000:.0f} ms for {nodes} running nodes ({runtime} runtime)")
    return 0 if result.status == Status.CANCELLED else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a provider model, e.g. openai:gpt-4o (default: offline ScriptedModel)")
    parser.add_argument("--runtime", choices=["local", "ray"], default="ray")
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args()
    if args.runtime == "ray":
        from ray_harness import runtime

        runtime.init(os.environ.get("RAY_ADDRESS") or "local")  # our own Ray unless told to join one
    raise SystemExit(asyncio.run(run(args.nodes, args.model, args.runtime)))


if __name__ == "__main__":
    main()
