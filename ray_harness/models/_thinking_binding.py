"""Recovery, as Strands recovers, from replayed thinking blocks that an edit of the history made stale.

Claude models that keep their thinking bind each thinking block to the content before it. When that content changed
(a conversation manager trimmed it, a hook rewrote it), an account that enforces the binding refuses the request
unless it asks the API to drop the stale blocks. The provider then retries once with ``block_binding`` set to
``drop_block`` (and the beta that enables it), and keeps it on for later requests to that model: the stale blocks
stay in the history. A ``block_binding`` the caller set is left as written, and nothing changes without thinking on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ("THINKING_BINDING_BETA", "anthropic_options_with_drop_block", "bedrock_fields_with_drop_block",
           "is_thinking_binding_error")

THINKING_BINDING_BETA = "thinking-binding-controls-2026-08-01"
_THINKING_BINDING_ERROR = "bound to a different conversation"


def is_thinking_binding_error(error: BaseException) -> bool:
    """Whether the provider refused a replayed thinking block because the history before it changed."""
    return _THINKING_BINDING_ERROR in str(error)


def _thinking_with_drop_block(thinking: Any) -> dict[str, Any] | None:
    if not isinstance(thinking, dict) or "block_binding" in thinking:
        return None
    return {**thinking, "block_binding": {"prefix_mismatch_behavior": "drop_block"}}


def anthropic_options_with_drop_block(options: dict[str, Any], client_headers: Mapping[str, Any]
                                      ) -> dict[str, Any] | None:
    """``messages.create`` keyword arguments that drop stale thinking blocks, or ``None`` when they cannot change.

    The beta goes in ``extra_headers``, which replaces the client's header of that name, so the client's betas
    (``client_headers``) are carried over.
    """
    body = options.get("extra_body") or {}
    thinking = _thinking_with_drop_block(body.get("thinking"))
    if thinking is None:
        return None
    headers = dict(options.get("extra_headers") or {})
    configured = headers.get("anthropic-beta") or client_headers.get("anthropic-beta")
    betas = [beta.strip() for beta in configured.split(",")] if isinstance(configured, str) else []
    if THINKING_BINDING_BETA not in betas:
        betas.append(THINKING_BINDING_BETA)
    headers["anthropic-beta"] = ",".join(beta for beta in betas if beta)
    return {**options, "extra_body": {**body, "thinking": thinking}, "extra_headers": headers}


def bedrock_fields_with_drop_block(fields: Any) -> dict[str, Any] | None:
    """``additionalModelRequestFields`` that drop stale thinking blocks, or ``None`` when they cannot change."""
    if not isinstance(fields, dict):
        return None
    thinking = _thinking_with_drop_block(fields.get("thinking"))
    if thinking is None:
        return None
    betas = list(fields.get("anthropic_beta") or [])
    if THINKING_BINDING_BETA not in betas:
        betas.append(THINKING_BINDING_BETA)
    return {**fields, "anthropic_beta": betas, "thinking": thinking}
