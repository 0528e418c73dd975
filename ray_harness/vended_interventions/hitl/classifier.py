"""Deciding whether a tool call needs a human: the classifier contract and the built-in LLM risk classifier.

A classifier is asked only about tools ``allowed_tools`` does not already settle. The built-in one runs a
fresh agent (no tools, no history) whose answer is a ``_RiskDecision`` filled through structured output; the
name is Strands', so a scripted or recorded model answers it the same way (``tool_call("_RiskDecision",
{"requires_approval": ..., "reason": ...})``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from ray_harness.models.base import Model

if TYPE_CHECKING:
    from ray_harness.hooks.events import BeforeToolCallEvent

__all__ = ("DEFAULT_CLASSIFIER_PROMPT", "ClassifierResult", "HumanInTheLoopClassifier", "LLMClassifierConfig")


@dataclass
class ClassifierResult:
    """A classifier's verdict on one tool call.

    Attributes:
        requires_human_in_the_loop: ``True``: a human must approve the call first.
        reason: Short text shown in the approval prompt (``Approve "tool" — <reason>?``).
    """

    requires_human_in_the_loop: bool
    reason: str | None = None


@runtime_checkable
class HumanInTheLoopClassifier(Protocol):
    """A callable, sync or async, that decides whether a tool call needs a human's approval."""

    def __call__(self, event: BeforeToolCallEvent, **kwargs: Any) -> ClassifierResult | Awaitable[ClassifierResult]:
        """Classify the call ``event.tool_use``; anything but a :class:`ClassifierResult` counts as "ask"."""
        ...


@dataclass
class LLMClassifierConfig:
    """Settings of the built-in LLM risk classifier (``HumanInTheLoop(classifier=LLMClassifierConfig(...))``).

    Attributes:
        system_prompt: The risk criteria; :data:`DEFAULT_CLASSIFIER_PROMPT` when ``None`` or empty.
        model: The classifier's model (a ``Model`` or a model id); when ``None``, the guarded agent's
            ``aux_model``, else its model (Strands' order).
    """

    system_prompt: str | None = None
    model: Model | str | None = None

    def __post_init__(self) -> None:
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise TypeError(f"LLMClassifierConfig.system_prompt must be a str or None, "
                            f"got {type(self.system_prompt).__name__}")
        if self.model is not None and not isinstance(self.model, Model | str):
            raise TypeError(f"LLMClassifierConfig.model must be a Model, a model id or None, "
                            f"got {type(self.model).__name__}")


DEFAULT_CLASSIFIER_PROMPT = """\
You decide, for one tool call an AI agent is about to make, whether a human must approve it first.

Ask for approval when the call, with these exact arguments:
- deletes, overwrites or revokes something, or cannot be undone;
- changes production, shared or otherwise important state;
- reads, copies or sends sensitive data (secrets, credentials, personal or financial records);
- reaches outside the system: email, chat messages, payments, publishing;
- touches many records, users or systems at once.

No approval is needed when the call only reads data that is not sensitive, works on local or temporary
resources, is easy to reverse, or is limited to one unimportant resource. Reading secrets, credentials,
personal or financial data still needs approval.

Think about what could go wrong if this call runs as written. If you are unsure, ask for approval.
The reason is shown to a person in a short prompt: keep it under 10 words."""
"""The built-in classifier's default system prompt (``LLMClassifierConfig.system_prompt``)."""


class _RiskDecision(BaseModel):
    """The classifier agent's answer (its structured output; Strands' tool name)."""

    requires_approval: bool = Field(description="True if a human must approve this tool call before it runs")
    reason: str = Field(description="Why, in under 10 words")


class LLMRiskClassifier:
    """The built-in classifier: a fresh agent with the risk prompt judges each call (picklable, unlike a closure).

    Args:
        config: Its settings; the defaults when ``None``.
    """

    def __init__(self, config: LLMClassifierConfig | None = None) -> None:
        config = config or LLMClassifierConfig()
        self.system_prompt = config.system_prompt or DEFAULT_CLASSIFIER_PROMPT
        self.model = config.model

    async def __call__(self, event: BeforeToolCallEvent, **kwargs: Any) -> ClassifierResult:
        """Ask the classifier agent about ``event.tool_use``.

        Raises:
            ValueError: No model to ask, or the answer held no ``_RiskDecision``.
        """
        from ray_harness.agent.agent import Agent  # the agent package imports the interventions: import late

        model = self.model if self.model is not None else event.agent.aux_model
        if model is None:
            raise ValueError("the LLM risk classifier has no model: pass LLMClassifierConfig(model=...) "
                             "or give the agent a model")
        judge = Agent(model=model, system_prompt=self.system_prompt, callback_handler=None)
        use = event.tool_use
        prompt = ("Does this tool call need a human's approval?\n\n"
                  f"Tool: {use['name']}\nInput: {json.dumps(use['input'], indent=2, default=str)}")
        result = await judge.invoke_async(prompt, structured_output_model=_RiskDecision)
        decision = result.structured_output
        if not isinstance(decision, _RiskDecision):
            raise ValueError(f"the LLM risk classifier gave no decision (stop_reason={result.stop_reason!r})")
        return ClassifierResult(requires_human_in_the_loop=decision.requires_approval, reason=decision.reason)
