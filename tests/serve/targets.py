"""Targets the serving tests serve: a support agent with a human-approved refund tool and a slow tool.

The model is a responder (``ScriptedModel(fn, loop=True)``), so a fresh agent built in another replica
answers from the conversation it restored, not from a script position.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from ray_harness import Agent, tool
from ray_harness.interventions import Confirm, InterventionHandler, Proceed
from ray_harness.multiagent import GraphBuilder
from ray_harness.testing import ScriptedModel, text, tool_call

REFUND_LOG_ENV = "RAY_HARNESS_TEST_REFUND_LOG"


def _last_text(call: Any) -> str:
    for block in call.messages[-1]["content"]:
        if "text" in block:
            return str(block["text"])
    return ""


def _support(call: Any) -> Any:
    results = [block["toolResult"] for block in call.messages[-1]["content"] if "toolResult" in block]
    if results:
        return text(f"Done: {results[0]['content'][0]['text']}.")
    prompt = _last_text(call)
    words = prompt.split()
    if words[:1] == ["refund"]:
        return tool_call("refund", {"order": words[-1]})
    if words[:1] == ["slow"]:
        return tool_call("wait_for", {"seconds": float(words[-1])})
    return text(f"echo: {prompt}")


@tool
def refund(order: str) -> str:
    """Refund an order (a human approves every refund).

    Args:
        order: The order id.
    """
    log = os.environ.get(REFUND_LOG_ENV)
    if log:
        with Path(log).open("a") as stream:
            stream.write(order + "\n")
    return f"refunded {order}"


@tool
async def wait_for(seconds: float) -> str:
    """Wait, standing in for a long-running tool.

    Args:
        seconds: How long.
    """
    await asyncio.sleep(seconds)
    return f"waited {seconds}"


class ApproveRefunds(InterventionHandler):
    name = "approve_refund"

    def before_tool_call(self, event: Any) -> Any:
        if event.tool_use["name"] == "refund":
            return Confirm(f"Refund order {event.tool_use['input']['order']}?")
        return Proceed()


def build_support_agent() -> Agent:
    return Agent(ScriptedModel(_support, loop=True, chunk_size=4), tools=[refund, wait_for],
                 interventions=[ApproveRefunds()], name="support",
                 system_prompt="Customer support for the test shop.\nAnswer briefly.")


def build_plain_agent() -> Agent:
    return Agent(ScriptedModel(_support, loop=True), name="plain")


def build_graph() -> Any:
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(lambda call: text("drafted"), loop=True), name="drafter"), "draft")
    builder.add_node(Agent(ScriptedModel(lambda call: text("reviewed: ok"), loop=True), name="reviewer"), "review")
    builder.add_edge("draft", "review")
    return builder.build(runtime="local")


def build_failing_agent() -> Agent:
    return Agent(ScriptedModel(RuntimeError("model exploded"), loop=True), name="failing", retry_strategy=None)


def _chat(call: Any) -> Any:
    # Says how many user turns the conversation holds: what a follow-up in one context must see.
    turns = sum(1 for message in call.messages if message["role"] == "user"
                and any("text" in block for block in message["content"]))
    answered = _support(call)
    said = answered.content[0].get("text")
    if said is None:
        return answered  # the refund tool call
    return text(f"turn {turns}: {said if said.startswith('Done') else _last_text(call)}")


def build_chat_agent() -> Agent:
    return Agent(ScriptedModel(_chat, loop=True), tools=[refund], interventions=[ApproveRefunds()], name="chat")
