"""The demo graph: researcher → two parallel analysts → writer, with a tool, on an offline model.

``build_demo_graph()`` is the evaluation target of ``ray-harness demo``. Without a model spec each
node gets a deterministic ``ScriptedModel`` (no API key needed); with ``RAY_HARNESS_DEMO_MODEL``
(for example ``anthropic:claude-sonnet-4-5``) every node uses that provider instead.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

from ray_harness.agent.agent import Agent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools.decorator import tool
from ray_harness.types.streaming import Usage

__all__ = ("DATASET", "build_demo_graph", "dataset_path", "keyword_score")

_FACTS = {
    "default": ["adoption is growing year over year", "costs fell sharply in the last decade",
                "regulation is still catching up"],
}


@tool
def search_notes(topic: str) -> str:
    """Look up research notes about a topic.

    Args:
        topic: What to look up.
    """
    facts = _FACTS.get(topic, _FACTS["default"])
    return "; ".join(f"{topic}: {fact}" for fact in facts)


def _topic(call: Any) -> str:
    found = re.search(r"briefing on ([^.]+)\.", call.last_text) or re.search(r"on ([^.\n]+)", call.last_text)
    for message in call.messages:
        for block in message["content"]:
            match = re.search(r"briefing on ([^.]+)\.", block.get("text", ""))
            if match:
                return match.group(1)
    return found.group(1) if found else "the topic"


_USAGE: Usage = {"inputTokens": 120, "outputTokens": 60, "totalTokens": 180}


def _researcher_model() -> ScriptedModel:
    def research(call: Any) -> Any:
        return tool_call("search_notes", {"topic": _topic(call)}, usage=_USAGE)

    def summarize(call: Any) -> Any:
        notes = call.messages[-1]["content"][0]["toolResult"]["content"][0]["text"]
        return text(f"Research notes: {notes}.", usage=_USAGE)

    return ScriptedModel(research, summarize, model_id="demo-offline")


def _analyst_model(angle: str) -> ScriptedModel:
    return ScriptedModel(lambda call: text(f"{angle} analysis of {_topic(call)}: the notes point to steady growth "
                                           f"with open questions on {angle.lower()} risks.", usage=_USAGE),
                         model_id="demo-offline")


def _writer_model() -> ScriptedModel:
    return ScriptedModel(lambda call: text(f"Briefing on {_topic(call)}: adoption is growing, costs are falling, "
                                           "and regulation is the main open question.", usage=_USAGE),
                         model_id="demo-offline")


def build_demo_graph(model: str | None = None) -> Any:
    """Researcher → (market analyst ∥ risk analyst) → writer; the analysts run in parallel."""
    from ray_harness.multiagent import GraphBuilder

    spec = model or os.environ.get("RAY_HARNESS_DEMO_MODEL")

    def pick(offline: Any) -> Any:
        return spec if spec else offline

    researcher = Agent(pick(_researcher_model()), tools=[search_notes], name="researcher",
                       system_prompt="Research the topic with search_notes, then summarize the notes.")
    market = Agent(pick(_analyst_model("Market")), name="market_analyst",
                   system_prompt="Analyze the market angle of the research notes.")
    risk = Agent(pick(_analyst_model("Risk")), name="risk_analyst",
                 system_prompt="Analyze the risks in the research notes.")
    writer = Agent(pick(_writer_model()), name="writer",
                   system_prompt="Write a three-sentence briefing from the analyses.")
    builder = GraphBuilder()
    builder.add_node(researcher, "researcher")
    builder.add_node(market, "market_analyst")
    builder.add_node(risk, "risk_analyst")
    builder.add_node(writer, "writer")
    builder.add_edge("researcher", "market_analyst")
    builder.add_edge("researcher", "risk_analyst")
    builder.add_edge("market_analyst", "writer")
    builder.add_edge("risk_analyst", "writer")
    builder.set_join("all")
    # Each row's graph runs inside the pooled host actor that picked the row up.
    return builder.build(runtime="local")


def keyword_score(row: dict[str, Any], result: Any) -> float:
    """1.0 when the final briefing names the row's topic."""
    return 1.0 if str(row.get("topic", "")).lower() in str(result).lower() else 0.0


def dataset_path() -> Path:
    """The demo's dataset, shipped in the package (``demo_data/questions.jsonl``)."""
    return Path(str(resources.files("ray_harness") / "demo_data" / "questions.jsonl"))


DATASET = "ray_harness/demo_data/questions.jsonl"
