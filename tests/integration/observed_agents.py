"""Targets whose runs produce every harness metric: tokens with a price, a tool that fails, a rate-limit wait."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ray_harness import Agent, GraphBuilder, Swarm, tool
from ray_harness.models.base import ModelPrices
from ray_harness.telemetry import metrics
from ray_harness.testing import ScriptedModel, text, tool_calls

USAGE = {"inputTokens": 40, "outputTokens": 10, "totalTokens": 50}
PRICES = ModelPrices(input_per_million=3.0, output_per_million=15.0)


@tool
def lookup(query: str) -> str:
    """Look something up (behind a rate limiter)."""
    metrics.rate_limit_wait("test-limiter", 0.02)  # what the model rate limiter reports for each wait
    return f"found {query}"


@tool
def broken() -> str:
    """A tool that always fails."""
    raise ValueError("this tool is broken")


@tool
def wait_for_release(path: str) -> str:
    """Block until ``path`` exists (the test creates it once it has looked at the run)."""
    while not os.path.exists(path):
        time.sleep(0.05)
    return "released"


def _answer(call: Any) -> Any:
    if any("toolResult" in block for message in call.messages for block in message["content"]):
        return text("done", usage=USAGE)
    return tool_calls(("lookup", {"query": call.last_text[:20]}), ("broken", {}), usage=USAGE)


def metered(name: str = "metered") -> Agent:
    return Agent(ScriptedModel(_answer, loop=True, record_calls=False, prices=PRICES), tools=[lookup, broken], name=name,
                 retry_strategy=None)


def observed_graph() -> Any:
    builder = GraphBuilder()
    builder.add_node(metered("researcher"), "research")
    builder.add_node(metered("writer"), "write")
    builder.add_edge("research", "write")
    builder.set_graph_id("observed")
    return builder.build(runtime="ray")


def observed_swarm() -> Swarm:
    return Swarm([metered("solo")], id="observed_swarm", runtime="ray")


def _held(release: str) -> Agent:
    def answer(call: Any) -> Any:
        if any("toolResult" in block for message in call.messages for block in message["content"]):
            return text("released", usage=USAGE)
        return tool_calls(("wait_for_release", {"path": release}), usage=USAGE)

    return Agent(ScriptedModel(answer, loop=True, record_calls=False), tools=[wait_for_release], name="held",
                 retry_strategy=None)


def held_graph(release: str | Path, graph_id: str = "held_graph") -> Any:
    """first → held (waits for ``release``) → last: while held, one node is done, one running, one pending."""
    builder = GraphBuilder()
    builder.add_node(metered("first"), "first")
    builder.add_node(_held(str(release)), "held")
    builder.add_node(metered("last"), "last")
    builder.add_edge("first", "held")
    builder.add_edge("held", "last")
    builder.set_graph_id(graph_id)
    return builder.build(runtime="ray")


def _gate(call: Any) -> Any:
    if any("toolResult" in block for message in call.messages for block in message["content"]):
        return text("released", usage=USAGE)
    if call.last_text.startswith("hold:"):
        return tool_calls(("wait_for_release", {"path": call.last_text.removeprefix("hold:")}), usage=USAGE)
    return text("passed", usage=USAGE)


def gated_row_graph() -> Any:
    """An evaluation target, one graph per row: gate → after; a row whose prompt is ``hold:<path>`` waits for it."""
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(_gate, loop=True, record_calls=False), tools=[wait_for_release], name="gate",
                           retry_strategy=None), "gate")
    builder.add_node(Agent(ScriptedModel(text("after", usage=USAGE), loop=True, record_calls=False), name="after",
                           retry_strategy=None), "after")
    builder.add_edge("gate", "after")
    builder.set_graph_id("gated_rows")
    return builder.build(runtime="ray")
