"""Swarm handoff latency against the members' history length (issue 20: within 20 % at 10 and 400 messages).

A two-member swarm whose models answer at once: ``a`` hands off to ``b`` (one handoff tool call), ``b``
answers. Both members start with ``history`` messages (``NullConversationManager``: nothing is trimmed).
One invocation is two member runs and one handoff; the figure is the median wall time of an invocation
after a warm-up, at each history length. With agents shipped per node execution the history travels at
every handoff; with resident slots only the handoff message and shared context do.

    python -m benchmarks.handoff [--histories 10,400] [--repeats 20] [--runtime ray|local] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from ray_harness import Agent, Swarm
from ray_harness.agent.conversation_manager.null import NullConversationManager
from ray_harness.testing import ScriptedModel, text, tool_call


def filler(count: int) -> list[dict[str, Any]]:
    """``count`` messages alternating user/assistant, ~300 characters each (a plausible chat turn)."""
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit " * 5
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": f"{i}: {words}"}]}
            for i in range(count)]


def team(history: int, runtime: str) -> Swarm:
    handoff = tool_call("handoff_to_agent", {"agent_name": "b", "message": "your turn", "context": {"step": 1}})
    a = Agent(ScriptedModel([handoff, text("handed")], loop=True, record_calls=False), name="a",
              retry_strategy=None, conversation_manager=NullConversationManager())
    b = Agent(ScriptedModel("done", loop=True, record_calls=False), name="b", retry_strategy=None,
              conversation_manager=NullConversationManager())
    # Even counts end on an assistant message, so the next prompt continues the conversation.
    a.messages = filler(history)
    b.messages = filler(history)
    return Swarm([a, b], runtime=runtime)


async def invocation_ms(history: int, runtime: str, repeats: int) -> list[float]:
    swarm = team(history, runtime)
    samples: list[float] = []
    try:
        for run in range(repeats + 1):  # the first run is the warm-up (actor start, slots opened)
            started = time.perf_counter()
            result = await swarm.invoke_async("go")
            elapsed = time.perf_counter() - started
            if [n.node_id for n in result.node_history] != ["a", "b"]:
                raise RuntimeError(f"unexpected run: {result.status}, {result.node_history}")
            if run:
                samples.append(elapsed * 1000)
    finally:
        swarm.shutdown()
    return samples


async def main(histories: list[int], runtime: str, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {"runtime": runtime, "repeats": repeats, "p50_ms": {}}
    for history in histories:
        samples = await invocation_ms(history, runtime, repeats)
        out["p50_ms"][str(history)] = round(statistics.median(samples), 2)
    first, last = (out["p50_ms"][str(h)] for h in (histories[0], histories[-1]))
    out["ratio_last_to_first"] = round(last / first, 3)
    return out


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", default="10,400")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--runtime", choices=("ray", "local"), default="ray")
    parser.add_argument("--json")
    args = parser.parse_args()
    histories = [int(part) for part in args.histories.split(",") if part]
    result = asyncio.run(main(histories, args.runtime, args.repeats))
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    cli()
