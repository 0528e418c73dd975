"""Why each name of Strands' steering package that ray_harness leaves out is left out, and what to use instead."""

from __future__ import annotations

__all__ = ("REASONS",)

_CONTEXT = ("ray_harness's SteeringHandler takes no context providers: keep what the handler needs in "
            "self.steering_context.data, written from its steer_* methods or from hooks it registers itself")

REASONS = {
    "SteeringContextCallback": f"ray_harness does not provide Strands' SteeringContextCallback; {_CONTEXT}",
    "SteeringContextProvider": f"ray_harness does not provide Strands' SteeringContextProvider; {_CONTEXT}",
    "LedgerBeforeToolCall": f"ray_harness does not provide Strands' LedgerBeforeToolCall (the tool-call ledger); "
                            f"{_CONTEXT}",
    "LedgerAfterToolCall": f"ray_harness does not provide Strands' LedgerAfterToolCall (the tool-call ledger); "
                           f"{_CONTEXT}",
    "LedgerProvider": f"ray_harness does not provide Strands' LedgerProvider (the tool-call ledger); {_CONTEXT}",
    "LLMSteeringHandler": "ray_harness does not provide Strands' LLMSteeringHandler (a model judging each tool "
                          "call): subclass SteeringHandler and ask a model in steer_before_tool, or use "
                          "ray_harness.vended_interventions.hitl.HumanInTheLoopClassifier",
    "LLMPromptMapper": "ray_harness does not provide Strands' LLMPromptMapper, as it does not provide "
                       "LLMSteeringHandler",
    "llm": "ray_harness does not provide Strands' steering.handlers.llm (LLMSteeringHandler, LLMPromptMapper, "
           "DefaultPromptMapper): subclass SteeringHandler and ask a model in steer_before_tool",
}
