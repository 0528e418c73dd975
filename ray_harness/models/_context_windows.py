"""The context windows of well-known model ids, so ``context_window_limit`` is known without being set.

Strands resolves a model's ``context_window_limit`` from such a table (same ids, same numbers) when the user sets
none; ours does too, so a switched program sees the same ``get_config()``, ``estimate_utilization()`` and
proactive compression. An id not listed here has no known window (``None``): set ``context_window_limit``.
"""

from __future__ import annotations

__all__ = ("known_context_window",)

# Tokens → the model ids (space-separated) with that window. Bedrock ids are listed without their cross-region
# prefix (``us.``, ``global.``, ...): the lookup strips it.
_WINDOWS: dict[int, str] = {
    1_050_000: (
        "gpt-5.4 gpt-5.4-pro gpt-5.5 gpt-5.5-pro gpt-5.6 gpt-5.6-luna gpt-5.6-sol gpt-5.6-terra gpt-6-astra "
        "gpt-6-luna gpt-6-sol gpt-6.1-sol "
    ),
    1_048_576: (
        "gemini-2.0-flash gemini-2.0-flash-lite gemini-2.5-flash gemini-2.5-flash-lite gemini-2.5-pro "
        "gemini-3-flash-preview gemini-3-pro-preview gemini-3.1-flash-lite gemini-3.1-flash-lite-preview "
        "gemini-3.1-pro-preview gemini-3.5-flash gemini-3.5-flash-lite gemini-3.6-flash "
    ),
    1_047_576: (
        "gpt-4.1 gpt-4.1-mini gpt-4.1-nano "
    ),
    1_000_000: (
        "amazon.nova-2-lite-v1:0 amazon.nova-2-pro-preview-20251202-v1:0 amazon.nova-premier-v1:0 "
        "anthropic.claude-fable-5 anthropic.claude-fable-5-1 anthropic.claude-haiku-5-5 "
        "anthropic.claude-mythos-preview anthropic.claude-opus-4-6-v1 anthropic.claude-opus-4-7 "
        "anthropic.claude-opus-4-8 anthropic.claude-opus-5 anthropic.claude-opus-5-5 "
        "anthropic.claude-sonnet-4-20250514-v1:0 anthropic.claude-sonnet-4-6 anthropic.claude-sonnet-5 "
        "anthropic.claude-sonnet-5-5 claude-fable-5 claude-fable-5-1 claude-haiku-5-5 claude-opus-4-6 "
        "claude-opus-4-6-20260205 claude-opus-4-7 claude-opus-4-7-20260416 claude-opus-4-8 claude-opus-5 "
        "claude-opus-5-5 claude-sonnet-4-20250514 claude-sonnet-4-6 claude-sonnet-5 claude-sonnet-5-5 zai.glm-5.3 "
    ),
    300_000: (
        "amazon.nova-lite-v1:0 amazon.nova-pro-v1:0 "
    ),
    272_000: (
        "gpt-5 gpt-5-mini gpt-5-nano gpt-5.1 gpt-5.2 gpt-5.2-pro gpt-5.4-mini gpt-5.4-nano "
    ),
    262_144: (
        "mistral-large-2512 mistral-large-3 mistral-large-latest "
    ),
    203_000: (
        "zai.glm-4.7 zai.glm-4.7-flash "
    ),
    200_000: (
        "anthropic.claude-3-5-haiku-20241022-v1:0 anthropic.claude-3-5-sonnet-20240620-v1:0 "
        "anthropic.claude-3-5-sonnet-20241022-v2:0 anthropic.claude-3-7-sonnet-20240620-v1:0 "
        "anthropic.claude-3-7-sonnet-20250219-v1:0 anthropic.claude-3-haiku-20240307-v1:0 "
        "anthropic.claude-3-opus-20240229-v1:0 anthropic.claude-3-sonnet-20240229-v1:0 "
        "anthropic.claude-haiku-4-5-20251001-v1:0 anthropic.claude-haiku-4-5@20251001 "
        "anthropic.claude-opus-4-1-20250805-v1:0 anthropic.claude-opus-4-20250514-v1:0 "
        "anthropic.claude-opus-4-5-20251101-v1:0 anthropic.claude-sonnet-4-5-20250929-v1:0 "
        "claude-3-5-haiku-20241022 claude-3-5-sonnet-20240620 claude-3-5-sonnet-20241022 "
        "claude-3-7-sonnet-20250219 claude-3-haiku-20240307 claude-3-opus-20240229 claude-haiku-4-5 "
        "claude-haiku-4-5-20251001 claude-opus-4-1 claude-opus-4-1-20250805 claude-opus-4-20250514 "
        "claude-opus-4-5 claude-opus-4-5-20251101 claude-sonnet-4-5 claude-sonnet-4-5-20250929 o1 o3 o3-mini "
        "o3-pro o4-mini zai.glm-5 "
    ),
    131_072: (
        "mistral-medium-2505 mistral-medium-latest mistral-small-3-2-2506 mistral-small-latest "
    ),
    128_000: (
        "amazon.nova-micro-v1:0 gpt-4-turbo gpt-4o gpt-4o-mini gpt-5-pro "
    ),
}
_BY_ID = {model_id: window for window, ids in _WINDOWS.items() for model_id in ids.split()}


def known_context_window(model_id: str) -> int | None:
    """The window of ``model_id``, or of what follows one of its dots (a region prefix, an ARN); else ``None``."""
    candidate = model_id
    while True:
        window = _BY_ID.get(candidate)
        if window is not None:
            return window
        _, dot, candidate = candidate.partition(".")
        if not dot:
            return None
