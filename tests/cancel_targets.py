"""Targets for ``ray-harness cancel`` tests: runs that wait (an hour) until cancelled (importable inside Ray actors)."""

from __future__ import annotations

from typing import Any

from ray_harness import Agent, GraphBuilder, Swarm
from ray_harness.testing import ScriptedModel, text

USAGE = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
HOUR = 3600.0  # "until cancelled": a cancel interrupts the model call at once


def held_on_hold() -> Agent:
    """An evaluation target: a row whose prompt is ``hold`` waits until cancelled; other rows answer at once."""

    def answer(call: Any) -> Any:
        return text("held", delay=HOUR, usage=USAGE) if call.last_text == "hold" else text("done", usage=USAGE)

    return Agent(ScriptedModel(answer, loop=True, record_calls=False), name="held_on_hold")


def wide_graph(graph_id: str = "wide_graph", width: int = 4, runtime: str = "ray") -> Any:
    """entry → ``width`` parallel nodes that wait until cancelled → join."""
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(text("go", usage=USAGE)), name="entry"), "entry")
    builder.add_node(Agent(ScriptedModel(text("never", usage=USAGE)), name="join"), "join")
    for index in range(width):
        node = f"slow{index}"
        builder.add_node(Agent(ScriptedModel(text("too late", delay=HOUR, usage=USAGE)), name=node), node)
        builder.add_edge("entry", node)
        builder.add_edge(node, "join")
    builder.set_graph_id(graph_id)
    return builder.build(runtime=runtime)


def slow_swarm(swarm_id: str = "slow_swarm", runtime: str = "ray") -> Any:
    """One member whose model call waits until cancelled."""
    member = Agent(ScriptedModel(text("too late", delay=HOUR, usage=USAGE)), name="solo")
    return Swarm([member], id=swarm_id, runtime=runtime)
