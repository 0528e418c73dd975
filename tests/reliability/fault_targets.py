"""Agents for fault-injection tests (importable by name inside Ray actors)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ray_harness import Agent, tool
from ray_harness.testing import ScriptedModel, text, tool_calls

USAGE = {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}


def slow_model_agent() -> Agent:
    """Answers ``done: <prompt>`` after a model call long enough to be killed in the middle of."""
    delay = float(os.environ.get("RAY_HARNESS_FAULT_DELAY", "0.6"))

    def answer(call: Any) -> Any:
        marker = os.environ.get("RAY_HARNESS_FAULT_DIR")
        if marker:
            Path(marker, f"model-{os.getpid()}").write_text("calling")
        return text(f"done: {call.last_text}", usage=USAGE, delay=delay)

    return Agent(ScriptedModel(answer, loop=True, record_calls=False), name="slow-model")


@tool
async def pause(seconds: float, label: str) -> str:
    """Sleep, then return the label."""
    import asyncio

    await asyncio.sleep(seconds)
    return label


def batch_agent() -> Agent:
    def finish(call: Any) -> Any:
        labels = [b["toolResult"]["content"][0]["text"] for b in call.messages[-1]["content"]]
        return text("got " + ",".join(labels), usage=USAGE)

    model = ScriptedModel(tool_calls(("pause", {"seconds": 0.05, "label": "a"}, "a"),
                                     ("pause", {"seconds": 3.0, "label": "b"}, "b")), finish, record_calls=False)
    return Agent(model, tools=[pause], name="batch")


def eval_row_agent() -> Agent:
    delay = float(os.environ.get("RAY_HARNESS_FAULT_DELAY", "0.15"))
    return Agent(ScriptedModel(lambda call: text(f"row {call.last_text}", usage=USAGE, delay=delay),
                               record_calls=False), name="row")


@tool
async def flaky_lookup(key: str) -> str:
    """Fails about one time in five."""
    import asyncio
    import random

    await asyncio.sleep(random.uniform(0, 0.02))
    if random.random() < 0.2:
        raise RuntimeError(f"lookup of {key} failed")
    return f"value-{key}"


def load_agent() -> Agent:
    """Random model latency and random tool failures; the answer always names the prompt's id."""
    import random

    def call_tool(call: Any) -> Any:
        from ray_harness.testing import tool_call

        return tool_call("flaky_lookup", {"key": call.last_text}, usage=USAGE, delay=random.uniform(0, 0.1))

    def answer(call: Any) -> Any:
        first = next(m for m in call.messages if m["role"] == "user")["content"][0]["text"]
        outcome = call.messages[-1]["content"][0]["toolResult"]["status"]
        return text(f"{first}:{outcome}", usage=USAGE, delay=random.uniform(0, 0.1))

    return Agent(ScriptedModel(call_tool, answer, record_calls=False), tools=[flaky_lookup], name="load")


def slow_node(name: str) -> Agent:
    """A graph node whose model call takes a while (so that its host can be killed in the middle)."""
    delay = float(os.environ.get("RAY_HARNESS_FAULT_DELAY", "0.6"))
    return Agent(ScriptedModel(lambda call: text(f"{name} done", usage=USAGE, delay=delay), loop=True,
                               record_calls=False), name=name)


@tool
def record(directory: str, label: str, seconds: float) -> str:
    """Leave a file naming ``label`` and this process in ``directory`` (one per start), sleep, return the label."""
    import time
    import uuid

    Path(directory, f"{label}-{uuid.uuid4().hex}").write_text(str(os.getpid()))
    time.sleep(seconds)
    return label


def tool_node(directory: str, name: str = "tools", b_seconds: float = 3.0) -> Agent:
    """A graph node running tool "a" (instant) and tool "b" (3 s) in one batch, then answering ``got a,b``."""
    def finish(call: Any) -> Any:
        labels = sorted(b["toolResult"]["content"][0]["text"] for b in call.messages[-1]["content"])
        return text("got " + ",".join(labels), usage=USAGE)

    model = ScriptedModel(tool_calls(("record", {"directory": directory, "label": "a", "seconds": 0.0}, "a"),
                                     ("record", {"directory": directory, "label": "b", "seconds": b_seconds}, "b")),
                          finish, record_calls=False)
    return Agent(model, tools=[record], name=name)


def handing_tool_node(directory: str, name: str, target: str) -> Agent:
    """A swarm member running tools "a" and "b" (both quick) in one batch, then handing off to ``target``."""
    from ray_harness.testing import tool_call

    model = ScriptedModel(tool_calls(("record", {"directory": directory, "label": "a", "seconds": 0.0}, "a"),
                                     ("record", {"directory": directory, "label": "b", "seconds": 0.05}, "b")),
                          tool_call("handoff_to_agent", {"agent_name": target, "message": "go"}),
                          text("handed", usage=USAGE), record_calls=False)
    return Agent(model, tools=[record], name=name)
