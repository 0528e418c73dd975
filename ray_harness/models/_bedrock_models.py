"""What some Bedrock models refuse in a replayed history, and what they misread, by model id (as Strands knows it).

- Reasoning blocks: Anthropic models take ``reasoningText`` only with its signature, other models only without
  one; a list of model lines refuses ``reasoningText`` outright, and DeepSeek refuses every reasoning block. A
  history from another model (a switched ``model_id``, a restored session) would otherwise fail with a
  ``ValidationException``. Only blocks certain to fail are dropped: an ARN or bare profile id names no vendor.
- JSON tool results: Amazon Nova hallucinates on ``json`` blocks in tool results, so it gets them as JSON text.
"""

from __future__ import annotations

from typing import Any

__all__ = ("json_results_as_text", "refuses_reasoning")

_REFUSE_REASONING_TEXT = ("amazon.nova-lite", "amazon.nova-pro", "google.gemma", "meta.llama", "mistral.devstral",
                          "mistral.ministral", "mistral.mistral-large", "nvidia.nemotron-nano-9b",
                          "nvidia.nemotron-super", "openai.gpt-5", "openai.gpt-6", "qwen.qwen3-235b",
                          "qwen.qwen3-coder", "writer.palmyra", "xai.grok")
_JSON_AS_TEXT = ("amazon.nova",)


def refuses_reasoning(model_id: str, reasoning: dict[str, Any]) -> bool:
    """Whether ``model_id`` would refuse this ``reasoningContent`` block in its history."""
    model = model_id.lower()
    if "deepseek" in model:
        return True
    text = reasoning.get("reasoningText")
    if text is None:
        return False  # redactedContent: opaque, kept
    signed = bool(text.get("signature"))
    if "anthropic" in model or "claude" in model:
        return not signed
    if model.startswith("arn:") or "." not in model:
        return False
    return signed or any(line in model for line in _REFUSE_REASONING_TEXT)


def json_results_as_text(model_id: str) -> bool:
    """Whether ``model_id`` gets the ``json`` blocks of tool results as JSON text."""
    return any(line in model_id for line in _JSON_AS_TEXT)
