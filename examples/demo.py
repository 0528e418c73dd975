"""Offline demo: an agent with a tool, a policy that asks a human, and streaming — no API key needed.

    python examples/demo.py
    python examples/demo.py --model openai:gpt-4o     # or anthropic:<id>, bedrock:<id>,
                                                      # "openai-compatible:<url>#<model>"

Offline, the model is a ScriptedModel (deterministic answers).
"""

from __future__ import annotations

import argparse
import asyncio

from ray_harness import Agent, tool
from ray_harness.interventions import Confirm, InterventionHandler, Proceed
from ray_harness.testing import ScriptedModel, text, tool_call


@tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text to count.
    """
    return len(text.split())


class ConfirmLongTexts(InterventionHandler):
    """Ask before counting texts longer than 5 words (answered up front here: 'yes')."""

    name = "confirm-long-texts"

    def before_tool_call(self, event):  # type: ignore[no-untyped-def]
        if len(event.tool_use["input"].get("text", "").split()) > 5:
            return Confirm("Count a long text?", response="yes")
        return Proceed()


async def main(model_spec: str | None) -> None:
    model = model_spec or ScriptedModel(
        tool_call("word_count", {"text": "ray harness keeps agents under control at scale"}),
        text("The sentence has 8 words."),
        chunk_size=4,
    )
    agent = Agent(model, tools=[word_count], interventions=[ConfirmLongTexts()], name="demo")
    async for event in agent.stream_async("How many words are in 'ray harness keeps agents under control at scale'?"):
        if event["type"] == "tool_start":
            print(f"[tool] {event['tool_use']['name']}({event['tool_use']['input']})")
        elif event["type"] == "tool_result":
            print(f"[tool result] {event['tool_result']['content']}")
        elif event["type"] == "text_delta":
            print(event["data"], end="", flush=True)
        elif event["type"] == "result":
            result = event["result"]
            print(f"\n[stop_reason={result.stop_reason} usage={result.metrics.accumulated_usage}]")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a provider model, e.g. openai:gpt-4o (default: offline ScriptedModel)")
    asyncio.run(main(parser.parse_args().model))
