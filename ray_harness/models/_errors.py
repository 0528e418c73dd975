"""Shared pieces of provider error mapping.

Each provider maps its own exceptions onto the harness's: throttling becomes
``ModelThrottledException`` (the agent's retry strategy retries it), a prompt
that no longer fits becomes ``ContextWindowOverflowException`` (the
conversation manager reduces the history), and rejected credentials become
``ModelConfigurationError`` naming what to set. Providers word overflow
errors differently, so overflow is recognised by phrase.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping

__all__ = ("OVERFLOW_PHRASES", "is_overflow_message", "retry_after_seconds")

# Lower-cased phrases seen in context-length errors of Anthropic, OpenAI, Bedrock and OpenAI-compatible servers
# (vLLM, llama.cpp server, Ollama, LM Studio); a superset of the phrases Strands recognises.
OVERFLOW_PHRASES = (
    "prompt is too long",
    "input is too long",
    "input length exceeds context window",
    "input and output tokens exceed your context limit",
    "input length and `max_tokens` exceed context limit",
    "maximum context length",
    "context_length_exceeded",
    "context length",  # "... exceeds the context length" (Ollama), "... greater than the context length" (LM Studio)
    "too many tokens",
    "too many total text bytes",  # Bedrock
    "exceeds the max_model_len",
    "longer than the maximum model length",  # vLLM
    "exceeds the context window",
    "exceed context window",
    "request exceeds the available context size",
)
# OpenAI: "... which exceed customer model maximum of N"; Bedrock Mantle drops "customer".
_OVERFLOW_PATTERN = re.compile(r"exceed(?:s|ed)?(?: customer)? model maximum")


def is_overflow_message(message: str) -> bool:
    """Whether a provider's error message says the prompt does not fit the model's context window."""
    lowered = message.lower()
    return any(phrase in lowered for phrase in OVERFLOW_PHRASES) or _OVERFLOW_PATTERN.search(lowered) is not None


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The server's back-off hint: ``retry-after-ms``, else ``retry-after`` in seconds or as an HTTP date."""
    if not headers:
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
