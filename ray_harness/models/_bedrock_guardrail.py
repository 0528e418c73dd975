"""Guardrail redaction for ``BedrockModel``: ``redactContent`` events when a Bedrock guardrail blocked content.

As Strands' ``BedrockModel`` does: when the guardrail intervened, the model stream carries
``{"redactContent": {"redactUserContentMessage": ...}}`` (``guardrail_redact_input``, on by default) and/or
``{"redactContent": {"redactAssistantContentMessage": ...}}`` (``guardrail_redact_output``). The agent then
replaces the prompt it sent in its history (and session), and the assistant's answer, with those texts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ("GuardrailRedactor", "blocked")


def blocked(assessment: Any) -> bool:
    """Whether a guardrail assessment (any nesting of dicts and lists) holds a policy both detected and BLOCKED.

    ANONYMIZED (masked) content is already replaced by Bedrock itself, so it is no reason to redact.
    """
    if isinstance(assessment, dict):
        if assessment.get("action") == "BLOCKED" and assessment.get("detected") is True:
            return True
        return blocked(list(assessment.values()))
    if isinstance(assessment, list):
        return any(blocked(item) for item in assessment)
    return False


class GuardrailRedactor:
    """Watches one model stream and says which redaction events to insert, and where.

    The guardrail trace, when there is one, arrives in the ``metadata`` event and decides (BLOCKED redacts,
    ANONYMIZED does not); without a trace (``guardrail_trace="disabled"``) the ``guardrail_intervened`` stop reason
    decides, at the end of the stream.
    """

    def __init__(self, config: Any) -> None:
        self._config = config
        self._stop_reason: str | None = None
        self._saw_trace = False
        self._emitted = False

    def before(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        """The redaction events to yield before ``event`` (which is then yielded as it is)."""
        if "messageStop" in event:
            self._stop_reason = event["messageStop"].get("stopReason")
        if self._emitted or "metadata" not in event:
            return []
        guardrail = (event["metadata"].get("trace") or {}).get("guardrail")
        if guardrail is None:
            return []
        self._saw_trace = True
        assessments: Iterable[Any] = [*(guardrail.get("inputAssessment") or {}).values(),
                                      *(guardrail.get("outputAssessments") or {}).values()]
        return self._events() if any(blocked(assessment) for assessment in assessments) else []

    def finish(self) -> list[dict[str, Any]]:
        """The redaction events to yield after the stream: a guardrail that intervened without a trace."""
        if self._emitted or self._saw_trace or self._stop_reason != "guardrail_intervened":
            return []
        return self._events()

    def _events(self) -> list[dict[str, Any]]:
        self._emitted = True
        events: list[dict[str, Any]] = []
        if self._config.guardrail_redact_input:
            events.append({"redactContent": {"redactUserContentMessage": self._config.guardrail_redact_input_message}})
        if self._config.guardrail_redact_output:
            events.append({"redactContent": {
                "redactAssistantContentMessage": self._config.guardrail_redact_output_message}})
        return events
