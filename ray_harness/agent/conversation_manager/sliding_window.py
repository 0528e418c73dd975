"""``SlidingWindowConversationManager``: keep the most recent messages, never split a tool pair.

Rules every trim follows (shared with the summarizing manager):

* the history never starts on a ``toolResult`` whose ``toolUse`` was removed, and a kept ``toolUse``
  always keeps the ``toolResult`` that answers it;
* the first ``pin_first`` messages are never removed (when the last pinned message is a ``toolUse``,
  its ``toolResult`` is pinned with it);
* a trim prefers to start the kept tail on a plain user message (what most providers expect) and
  falls back to a complete ``toolUse``/``toolResult`` boundary, so tool-heavy runs stay trimmable.

Removal happens right after the pinned prefix, so the live history is always
``stored[:pinned] + stored[pinned + removed_message_count:]`` — the layout a session manager
uses to map live messages to stored ones (``pinned_message_count``, ``synthetic_message_count``).

Proactive compression (``proactive_compression=True`` or ``{"compression_threshold": 0.85}``)
runs before a model call once the context is at least that fraction (default 0.7) of
``agent.model.context_window_limit`` (Strands' 200,000 tokens, with a ``UserWarning``, for a model without
one). The size is the input tokens the provider reported for the
previous call plus an estimate of what was added since, or
:func:`ray_harness.models.base.estimate_tokens` when no report applies.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ray_harness.agent.conversation_manager.base import (
    DEFAULT_COMPRESSION_THRESHOLD,
    ConversationManager,
    parse_proactive_compression,
    threshold_tokens,
)
from ray_harness.models.base import estimate_tokens
from ray_harness.types.content import Message

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = (
    "DEFAULT_COMPRESSION_THRESHOLD",
    "ContextUsage",
    "SlidingWindowConversationManager",
    "find_trim_point",
    "has_block",
    "parse_proactive_compression",
    "pinned_count",
)

logger = logging.getLogger(__name__)

TRUNCATION_MARKER = "... [truncated:"
_PRESERVE_CHARS = 200


def has_block(message: Message, key: str) -> bool:
    """Whether some content block of ``message`` has ``key`` (e.g. ``"toolUse"``, ``"toolResult"``)."""
    return any(key in block for block in message["content"])


def _answers_previous(messages: list[Message], index: int) -> bool:
    """``messages[index]`` holds the toolResults of a toolUse at ``index - 1``."""
    return index > 0 and has_block(messages[index], "toolResult") and has_block(messages[index - 1], "toolUse")


def pinned_count(messages: list[Message], pin_first: int | None) -> int:
    """How many leading messages are protected: ``pin_first``, plus the result of a pinned toolUse."""
    if not pin_first:
        return 0
    count = min(pin_first, len(messages))
    if 0 < count < len(messages) and _answers_previous(messages, count):
        count += 1
    return count


def _keeps_pairs(messages: list[Message], index: int) -> bool:
    """A tail starting at ``index`` orphans no toolResult and leaves no toolUse unanswered."""
    message = messages[index]
    if has_block(message, "toolResult"):
        return False  # its toolUse would be gone: an orphan result
    return not has_block(message, "toolUse") or (index + 1 < len(messages)
                                                 and has_block(messages[index + 1], "toolResult"))


def find_trim_point(messages: list[Message], start: int, *, prefer_user: bool = True) -> int:
    """First index ``>= start`` where the kept tail may begin, or ``len(messages)`` if there is none.

    With ``prefer_user`` (nothing is pinned, so the tail starts the history) it starts on a plain user
    message, else on a complete toolUse/toolResult pair — never on an assistant text, which providers
    reject as a conversation's first message. Without it (a pinned prefix already starts the history)
    the earliest point that keeps tool pairs intact wins.
    """
    for kind in (("user", "toolUse") if prefer_user else ("any",)):
        for index in range(start, len(messages)):
            if _keeps_pairs(messages, index) and _starts_as(messages[index], kind):
                return index
    return len(messages)


def _starts_as(message: Message, kind: str) -> bool:
    if kind == "user":
        return message["role"] == "user"
    if kind == "toolUse":
        return has_block(message, "toolUse")
    return True


def validate_pin_first(pin_first: Any) -> int | None:
    if pin_first is None:
        return None
    if isinstance(pin_first, bool) or not isinstance(pin_first, int) or pin_first < 0:
        raise ValueError(f"pin_first must be a non-negative int or None, got {pin_first!r}")
    return pin_first or None


@dataclass
class _Mark:
    model_calls: int
    input_tokens: int
    length: int
    removed: int


class ContextUsage:
    """Estimates how many tokens the next model call will send (see the module docstring)."""

    _mark: _Mark | None = None  # a class default: no __init__ frame for the manager every agent makes

    def measure(self, agent: Agent, removed: int) -> tuple[int, float]:
        """``(tokens, scale)``: the size now, and reported/estimated for later re-estimates."""
        metrics = agent.event_loop_metrics
        messages = agent.messages
        specs = list(agent.tool_registry.get_all_specs())
        estimate = estimate_tokens(messages, agent.system_prompt, specs) if messages else 1
        mark = self._mark
        if (mark is not None and metrics.model_calls == mark.model_calls + 1 and removed == mark.removed
                and len(messages) >= mark.length):
            reported = metrics.accumulated_usage.get("inputTokens", 0) - mark.input_tokens
            if reported > 0:
                added = estimate_tokens(messages[mark.length:]) if len(messages) > mark.length else 0
                tokens = reported + added
                return tokens, tokens / estimate
        return estimate, 1.0

    def record(self, agent: Agent, removed: int) -> None:
        """Remember the state the next model call will be sent with."""
        metrics = agent.event_loop_metrics
        self._mark = _Mark(metrics.model_calls, metrics.accumulated_usage.get("inputTokens", 0),
                           len(agent.messages), removed)

    def forget(self) -> None:
        """Drop the remembered call, so the next measure is a fresh estimate (e.g. after a session restore)."""
        self._mark = None

    def estimate(self, agent: Agent, scale: float) -> int:
        """The estimated size of ``agent``'s context in tokens, times ``scale`` (from :meth:`measure`)."""
        specs = list(agent.tool_registry.get_all_specs())
        return int(estimate_tokens(agent.messages, agent.system_prompt, specs) * scale)


class SlidingWindowConversationManager(ConversationManager):
    """Keeps at most ``window_size`` messages, trimming the oldest unpinned ones.

    Args:
        window_size: Maximum number of messages kept after each invocation.
        should_truncate_results: On overflow, shorten the largest tool results (keeping their
            first and last characters; images become a short placeholder text) before removing messages.
        per_turn: ``True``: also trim before every model call; an int ``n``: before every n-th model call
            (as Strands); ``False`` (default): only after each invocation.
        pin_first: Number of leading messages that are never removed.
        proactive_compression: ``True`` (threshold 0.7) or ``{"compression_threshold": x}``:
            reduce before a model call once the context is that full.
    """

    def __init__(self, window_size: int = 40, should_truncate_results: bool = True, *, per_turn: bool | int = False,
                 pin_first: int | None = None, proactive_compression: bool | dict[str, Any] | None = None) -> None:
        super().__init__()
        if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 0:
            raise ValueError(f"window_size must be a non-negative int, got {window_size!r}")
        self.window_size = window_size
        self.should_truncate_results = bool(should_truncate_results)
        # The defaults (None) are taken as they are: every agent makes one of these managers.
        self.pin_first = None if pin_first is None else validate_pin_first(pin_first)
        if self.pin_first is not None and window_size and self.pin_first >= window_size:
            raise ValueError(f"pin_first ({self.pin_first}) must be smaller than window_size ({window_size})")
        if proactive_compression is not None:
            self.compression_threshold = parse_proactive_compression(proactive_compression)
        if not isinstance(per_turn, bool) and (not isinstance(per_turn, int) or per_turn <= 0):
            raise ValueError(f"per_turn must be a positive int, True or False, got {per_turn!r}")
        self.per_turn = per_turn
        self.pinned_message_count = 0
        self._model_call_count = 0
        self._usage = ContextUsage()

    @property
    def synthetic_message_count(self) -> int:
        """Always 0: trimming adds no message of its own (a summarizing manager adds its summary)."""
        return 0

    # -- ConversationManager --------------------------------------------------------------------------

    def apply_management(self, agent: Agent, **kwargs: Any) -> None:
        """After an invocation, trim the oldest unpinned messages once there are more than ``window_size``."""
        if len(agent.messages) > self.window_size:
            self._trim(agent, overflow=False)

    def reduce_context(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """Shorten the conversation after a context-window overflow, keeping tool use/result pairs intact.

        With ``e`` (the overflow) the largest tool result is truncated first, if ``should_truncate_results``;
        without it (a manual call) only whole messages are trimmed, and a conversation that cannot be trimmed is
        left as it is, with a warning, as in Strands.

        Raises:
            Exception: ``e``, the overflow, when nothing is left to trim.
        """
        reduced = self._reduce_once(agent, overflow=True) if e is not None else self._trim(agent, overflow=True)
        if reduced:
            return
        if e is None:
            # As Strands: a call without the overflow (manual or routine) is best effort.
            logger.warning("window_size=<%s>, message_count=<%s> | unable to trim the conversation: no valid trim "
                           "point keeps tool pairs intact", self.window_size, len(agent.messages))
            return
        raise e

    def before_model_call(self, agent: Agent, **kwargs: Any) -> None:
        """Trim before a model call: to the window when ``per_turn`` says so, below the proactive threshold."""
        if self.per_turn is not False and self._per_turn_due():  # tested here first: this runs before every call
            self.apply_management(agent)
        if self.compression_threshold is None:
            return
        limit = threshold_tokens(agent, self.compression_threshold)
        if limit is None:
            return
        tokens, scale = self._usage.measure(agent, self.removed_message_count)
        steps = 0
        while tokens >= limit and steps <= len(agent.messages):
            if not self._reduce_once(agent, overflow=True):
                logger.debug("proactive compression: %d tokens >= %d but nothing left to reduce", tokens, limit)
                break
            steps += 1
            tokens = self._usage.estimate(agent, scale)
        self._usage.record(agent, self.removed_message_count)

    def get_state(self) -> dict[str, Any]:
        """The state to persist: the base manager's, plus how many messages are pinned."""
        state = super().get_state()
        state["pinned_message_count"] = self.pinned_message_count
        state["model_call_count"] = self._model_call_count
        return state

    def restore_from_session(self, state: dict[str, Any]) -> list[Any] | None:
        """Restore the state written by :meth:`get_state`; adds no messages (returns ``None``)."""
        super().restore_from_session(state)
        self.pinned_message_count = int(state.get("pinned_message_count", 0))
        self._model_call_count = int(state.get("model_call_count", 0))
        self._usage.forget()
        return None

    def _per_turn_due(self) -> bool:
        """Count a model call; whether ``per_turn`` asks for a trim before it."""
        if self.per_turn is False:
            return False
        self._model_call_count += 1
        return self.per_turn is True or self._model_call_count % self.per_turn == 0

    # -- internals --------------------------------------------------------------------------------------

    def _reduce_once(self, agent: Agent, *, overflow: bool) -> bool:
        if overflow and self.should_truncate_results and self._truncate_largest_tool_result(agent.messages):
            return True
        return self._trim(agent, overflow=overflow)

    def _trim(self, agent: Agent, *, overflow: bool) -> bool:
        messages = agent.messages
        pinned = pinned_count(messages, self.pin_first)
        if self.window_size == 0:
            return self._clear_unpinned(agent, pinned)
        if len(messages) > self.window_size:
            start = len(messages) - (self.window_size - pinned)
        elif overflow:
            start = pinned + 2  # already within the window: drop the oldest exchange
        else:
            return False
        trim = find_trim_point(messages, max(start, pinned + 1), prefer_user=pinned == 0)
        if trim >= len(messages):
            return False
        del messages[pinned:trim]
        self.removed_message_count += trim - pinned
        self.pinned_message_count = pinned
        self._usage.forget()
        return True

    def _clear_unpinned(self, agent: Agent, pinned: int) -> bool:
        """``window_size=0`` (as Strands): keep only the pinned messages."""
        messages = agent.messages
        if len(messages) <= pinned:
            return False
        self.removed_message_count += len(messages) - pinned
        del messages[pinned:]
        self.pinned_message_count = pinned
        self._usage.forget()
        return True

    def _truncate_largest_tool_result(self, messages: list[Message]) -> bool:
        """Shorten the tool results of the unpinned message with the most to gain.

        Long texts keep their first and last characters; images become a placeholder text (as in Strands).
        """
        first = pinned_count(messages, self.pin_first)
        best, best_size = -1, 0
        for index in range(first, len(messages)):
            size = sum(_reducible_size(item) for item in _tool_result_items(messages[index]))
            if size > best_size:
                best, best_size = index, size
        if best < 0:
            return False
        messages[best] = _with_truncated_results(messages[best])  # a new dict: never mutate a shared message
        return True


def _tool_result_items(message: Message) -> list[Any]:
    return [item for block in message["content"] if "toolResult" in block
            for item in block["toolResult"].get("content", [])]


def _reducible_size(item: Any) -> int:
    if "text" in item:
        return len(item["text"]) if _truncatable(item["text"]) else 0
    if "image" in item:
        return max(1, len(_image_bytes(item["image"])))
    return 0


def _image_bytes(image: Any) -> Any:
    return (image.get("source") or {}).get("bytes") or b""


def _truncatable(text: str) -> bool:
    return TRUNCATION_MARKER not in text and len(text) > 2 * _PRESERVE_CHARS + 100


def _truncate_text(text: str) -> str:
    removed = len(text) - 2 * _PRESERVE_CHARS
    return (f"{text[:_PRESERVE_CHARS]}...\n\n{TRUNCATION_MARKER} {removed} chars removed] ...\n\n"
            f"...{text[-_PRESERVE_CHARS:]}")


def _shortened(item: Any) -> Any:
    if "text" in item and _truncatable(item["text"]):
        return {"text": _truncate_text(item["text"])}
    if "image" in item:
        image = item["image"]
        return {"text": f"[image: {image.get('format', 'unknown')}, {len(_image_bytes(image))} bytes]"}
    return item


def _with_truncated_results(message: Message) -> Message:
    content: list[Any] = []
    for block in message["content"]:
        if "toolResult" not in block:
            content.append(block)
            continue
        result: dict[str, Any] = dict(block["toolResult"])
        result["content"] = [_shortened(item) for item in result.get("content", [])]
        content.append({"toolResult": result})
    return {**message, "content": content}
