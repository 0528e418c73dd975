"""Human in the loop: a human approves tool calls before they run (Strands' ``vended_interventions.hitl``).

By default the agent pauses with ``stop_reason="interrupt"`` and the caller resumes it with the answer;
``ask="stdio"`` asks on the terminal and a custom ``ask`` callable asks anywhere else (Slack, a web UI).

Example::

    from ray_harness import Agent
    from ray_harness.vended_interventions.hitl import HumanInTheLoop

    agent = Agent(tools=[delete_file, read_file], interventions=[HumanInTheLoop(allowed_tools=["read_file"])])
    result = agent("Delete the file")       # result.stop_reason == "interrupt"
    agent([{"interruptResponse": {"interruptId": result.interrupts[0].id, "response": "y"}}])
"""

from ray_harness.vended_interventions.hitl.classifier import (
    ClassifierResult,
    HumanInTheLoopClassifier,
    LLMClassifierConfig,
)
from ray_harness.vended_interventions.hitl.hitl import HumanInTheLoop

__all__ = ["ClassifierResult", "HumanInTheLoop", "HumanInTheLoopClassifier", "LLMClassifierConfig"]
