"""Two refusals a resent Converse request gets past, recovered from as Strands recovers.

- Stale replayed thinking (see :mod:`ray_harness.models._thinking_binding`): resent once with ``drop_block``.
- "Conversation blocks and tool result blocks cannot be provided in the same turn": some models refuse a turn that
  holds tool results and other blocks. A user message of tool results only, followed by a user message without any
  (a repaired session's result, then the next prompt), is then sent as two turns with a neutral assistant turn
  between them, and that model gets them so from then on.

What was learned is kept on the model per model id (``model_id`` changed: back to the plain request).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ray_harness.models._thinking_binding import bedrock_fields_with_drop_block, is_thinking_binding_error

__all__ = ("SEPARATOR_TURN", "converse", "separates_turns")

logger = logging.getLogger(__name__)

_TOOL_RESULT_TURN_MESSAGE = "Conversation blocks and tool result blocks cannot be provided in the same turn."
SEPARATOR_TURN: dict[str, Any] = {"role": "assistant", "content": [{"text": "Tool result received."}]}


def separates_turns(previous: list[dict[str, Any]], current: list[dict[str, Any]]) -> bool:
    """Whether a user message of tool results only (``previous``) and one without any go as separate turns."""
    return (bool(previous) and all("toolResult" in block for block in previous)
            and bool(current) and all("toolResult" not in block for block in current))


def converse(model: Any, call: Callable[..., Any], request: dict[str, Any],
             separated: Callable[[], dict[str, Any]]) -> Any:
    """``call(**request)``, resent when Bedrock refuses it for one of the two reasons above.

    ``separated`` builds the request with tool-result turns kept apart. What a retry needed is remembered on
    ``model`` (``_stale_thinking_model_id``, ``_separate_turns_model_id``) so later requests are built with it.
    """
    try:
        return _converse(model, call, request)
    except Exception as error:
        if not _is_validation_error(error, _TOOL_RESULT_TURN_MESSAGE):
            raise
        retry = separated()
        if retry["messages"] == request["messages"]:
            raise
    logger.debug("model_id=<%s> | separating tool result and conversation turns", request["modelId"])
    response = _converse(model, call, retry)
    model._separate_turns_model_id = request["modelId"]
    return response


def _converse(model: Any, call: Callable[..., Any], request: dict[str, Any]) -> Any:
    try:
        return call(**request)
    except Exception as error:
        fields = bedrock_fields_with_drop_block(request.get("additionalModelRequestFields")) \
            if _is_validation_error(error) and is_thinking_binding_error(error) else None
        if fields is None:
            raise
    logger.warning("model_id=<%s> | history edit invalidated replayed thinking blocks, retrying with drop_block",
                   request["modelId"])
    model._stale_thinking_model_id = request["modelId"]  # the stale blocks stay in the history
    return call(**{**request, "additionalModelRequestFields": fields})


def _is_validation_error(error: BaseException, message: str = "") -> bool:
    details = (getattr(error, "response", None) or {}).get("Error", {})
    return bool(details.get("Code") == "ValidationException" and message in str(details.get("Message", "")))
