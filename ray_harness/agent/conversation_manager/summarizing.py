"""``SummarizingConversationManager``: replace the oldest messages with a model-written summary.

On a context-window overflow (or, with ``proactive_compression``, once the context is that full)
the oldest ``summary_ratio`` of the unpinned messages is summarized, never touching the last
``preserve_recent_messages`` nor splitting a ``toolUse``/``toolResult`` pair. The summary comes
from a separate call — ``summarization_agent``, else the agent's ``aux_model`` (its model unless it has
one) — that sees a plain-text transcript of the messages and leaves no trace in the agent's history (the
summarization agent's own history is restored afterwards). The summary is a user message placed right after the pinned
prefix; summarizing again folds the previous summary into the new one.

Usage of the summarization call counts towards the agent's metrics (and so its token limits).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from ray_harness.agent.conversation_manager.base import (
    ConversationManager,
    parse_proactive_compression,
    threshold_tokens,
)
from ray_harness.agent.conversation_manager.sliding_window import (
    ContextUsage,
    has_block,
    pinned_count,
    validate_pin_first,
)
from ray_harness.types.content import Message
from ray_harness.types.exceptions import ContextWindowOverflowException
from ray_harness.types.validation import MESSAGE, validate

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("DEFAULT_SUMMARIZATION_PROMPT", "SummarizingConversationManager")

logger = logging.getLogger(__name__)

DEFAULT_SUMMARIZATION_PROMPT = (
    "You compress conversations between a user, an AI assistant and its tools. Write a concise summary "
    "of the transcript you are given, as bullet points in the third person. Keep every fact, decision, "
    "file name, identifier, number and open task the assistant needs to continue the work; keep what "
    "each tool call did and what it returned, briefly. Do not answer or continue the conversation; "
    "output only the summary."
)
_REQUEST = "Summarize this conversation transcript:\n\n"
_MAX_BLOCK_CHARS = 4000


class SummarizingConversationManager(ConversationManager):
    """Summarizes the oldest messages when the context overflows.

    Args:
        summary_ratio: Fraction (0 < r <= 1) of the unpinned messages summarized per reduction.
        preserve_recent_messages: The most recent messages that are never summarized.
        summarization_agent: An Agent that writes the summary (default: a call to ``agent.aux_model``: the agent's
            ``aux_model``, else its model, as in Strands).
        summarization_system_prompt: System prompt of the summary call (not with ``summarization_agent``).
        pin_first: Number of leading messages that are never summarized.
        proactive_compression: ``True`` (threshold 0.7) or ``{"compression_threshold": x}``.
    """

    def __init__(self, summary_ratio: float = 0.3, preserve_recent_messages: int = 10,
                 summarization_agent: Agent | None = None, summarization_system_prompt: str | None = None, *,
                 pin_first: int | None = None, proactive_compression: bool | dict[str, Any] | None = None) -> None:
        super().__init__()
        if isinstance(summary_ratio, bool) or not isinstance(summary_ratio, int | float) or not 0 < summary_ratio <= 1:
            raise ValueError(f"summary_ratio must be a number in (0, 1], got {summary_ratio!r}")
        if (isinstance(preserve_recent_messages, bool) or not isinstance(preserve_recent_messages, int)
                or preserve_recent_messages < 0):
            raise ValueError(f"preserve_recent_messages must be a non-negative int, got {preserve_recent_messages!r}")
        if summarization_agent is not None and summarization_system_prompt is not None:
            raise ValueError("pass summarization_agent or summarization_system_prompt, not both: "
                             "the summarization agent uses its own system prompt")
        self.summary_ratio = float(summary_ratio)
        self.preserve_recent_messages = preserve_recent_messages
        self.summarization_agent = summarization_agent
        self.summarization_system_prompt = summarization_system_prompt
        self.pin_first = validate_pin_first(pin_first)
        self.compression_threshold = parse_proactive_compression(proactive_compression)
        self.pinned_message_count = 0
        self._summary_message: Message | None = None
        self._usage = ContextUsage()

    @property
    def synthetic_message_count(self) -> int:
        """Messages in the live history that are not stored ones (the summary)."""
        return 0 if self._summary_message is None else 1

    # -- ConversationManager --------------------------------------------------------------------------

    def apply_management(self, agent: Agent, **kwargs: Any) -> None:
        """Nothing: summarizing happens on overflow or, proactively, before a model call."""

    def reduce_context(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """Summarize the older messages after an overflow (runs :meth:`reduce_context_async` to completion)."""
        from ray_harness.agent.agent import run_sync

        run_sync(self.reduce_context_async(agent, e, **kwargs))

    async def reduce_context_async(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """Replace the older messages by a summary written by the summarization model.

        Without ``e`` (a manual or proactive call) this is best effort, as in Strands: a summary that cannot be
        made is logged and the history stays as it is.

        Raises:
            ContextWindowOverflowException: With ``e``: nothing is left to summarize outside the pinned and
                recent messages (``e`` itself is re-raised); the summarization call's error is raised as is.
        """
        if e is not None:
            await self._summarize_oldest(agent, e)
            return
        try:
            await self._summarize_oldest(agent, None)
        except Exception as error:
            logger.warning("summarization failed, the history stays as it is: %r", error)

    async def _summarize_oldest(self, agent: Agent, e: Exception | None) -> None:
        messages = agent.messages
        plan = self._plan(messages)
        if plan is None:
            if e is not None:
                raise e
            raise ContextWindowOverflowException(
                f"cannot summarize: {len(messages)} messages leave nothing to summarize outside the "
                f"{self.preserve_recent_messages} preserved recent and {self.pin_first or 0} pinned messages")
        pinned, split = plan
        summary = await self._summarize(agent, messages[pinned:split])
        folded = 1 if self._summary_message is not None and pinned < len(messages) and \
            messages[pinned] == self._summary_message else 0
        messages[pinned:split] = [summary]
        self.removed_message_count += split - pinned - folded
        self.pinned_message_count = pinned
        self._summary_message = summary
        self._usage.forget()

    def before_model_call(self, agent: Agent, **kwargs: Any) -> None:
        """Proactive compression, synchronously (runs :meth:`before_model_call_async` to completion)."""
        from ray_harness.agent.agent import run_sync

        run_sync(self.before_model_call_async(agent, **kwargs))

    async def before_model_call_async(self, agent: Agent, **kwargs: Any) -> None:
        """With proactive compression on, summarize before a model call once the context is above the threshold."""
        limit = threshold_tokens(agent, self.compression_threshold)
        if limit is None:
            return
        tokens, _ = self._usage.measure(agent, self.removed_message_count)
        if tokens >= limit and self._plan(agent.messages) is not None:
            logger.debug("proactive compression: %d tokens >= %d, summarizing", tokens, limit)
            try:
                await self.reduce_context_async(agent)
            except Exception as error:  # best effort (as Strands): the model call may still fit, or overflow and retry
                logger.warning("proactive summarization failed, calling the model anyway: %r", error)
        self._usage.record(agent, self.removed_message_count)

    def get_state(self) -> dict[str, Any]:
        """The state to persist: the base manager's, the pinned count and the current summary message."""
        state = super().get_state()
        state["pinned_message_count"] = self.pinned_message_count
        state["summary_message"] = self._summary_message
        return state

    def restore_from_session(self, state: dict[str, Any]) -> list[Any] | None:
        """Restore the state written by :meth:`get_state`.

        Returns:
            ``[summary_message]`` for the session to put back in front of the messages, or ``None``.
        """
        super().restore_from_session(state)
        self.pinned_message_count = int(state.get("pinned_message_count", 0))
        summary = state.get("summary_message")
        self._summary_message = validate(MESSAGE, summary, "summary_message") if summary is not None else None
        self._usage.forget()
        return [self._summary_message] if self._summary_message is not None else None

    # -- internals --------------------------------------------------------------------------------------

    def _plan(self, messages: list[Message]) -> tuple[int, int] | None:
        """``(pinned, split)``: summarize ``messages[pinned:split]``, or None when nothing can be."""
        pinned = pinned_count(messages, self.pin_first)
        body = len(messages) - pinned
        count = min(max(1, int(body * self.summary_ratio)), body - self.preserve_recent_messages)
        if count <= 0:
            return None
        split = _adjust_split(messages, pinned, pinned + count)
        if split is None:
            return None
        only_old_summary = split - pinned == 1 and self._summary_message is not None \
            and messages[pinned] == self._summary_message
        return None if only_old_summary else (pinned, split)

    async def _summarize(self, agent: Agent, messages: list[Message]) -> Message:
        request = _REQUEST + render_transcript(messages)
        if self.summarization_agent is not None:
            text = await self._ask_agent(agent, request)
        else:
            text = await self._ask_model(agent, request)
        if not text.strip():
            raise ContextWindowOverflowException("the summarization call returned no text; cannot reduce the context")
        return {"role": "user", "content": [{"text": text.strip()}]}

    async def _ask_agent(self, agent: Agent, request: str) -> str:
        helper = self.summarization_agent
        assert helper is not None
        if helper is agent:
            raise ValueError("summarization_agent must be a different Agent than the one being summarized")
        saved, output_model = list(helper.messages), helper.structured_output_model
        helper.structured_output_model = None  # a summary is plain text (Strands turns it off too)
        try:
            result = await helper.invoke_async(request)
        finally:
            helper.messages[:] = saved  # the helper keeps no memory of what it summarized
            helper.structured_output_model = output_model
        return result.text

    async def _ask_model(self, agent: Agent, request: str) -> str:
        from ray_harness.agent.streaming import process_stream
        from ray_harness.middleware.types import ModelStopReason

        system_prompt = self.summarization_system_prompt or DEFAULT_SUMMARIZATION_PROMPT
        model = agent.aux_model
        chunks = model.stream([{"role": "user", "content": [{"text": request}]}], None, system_prompt)
        stop: ModelStopReason | None = None
        async for event in process_stream(chunks):  # type: ignore[arg-type]
            if isinstance(event, ModelStopReason):
                stop = event
        if stop is None:
            raise ContextWindowOverflowException("the summarization call produced no message")
        prices = getattr(model, "prices", None)
        cost = prices.cost(stop.usage) if prices is not None else 0.0
        agent.event_loop_metrics.add_usage(stop.usage, int(stop.metrics.get("latencyMs", 0)), cost)
        return "".join(block["text"] for block in stop.message["content"] if "text" in block)


def _adjust_split(messages: list[Message], pinned: int, split: int) -> int | None:
    """Move ``split`` so the kept part does not start on a toolResult (its toolUse would be summarized away).

    Back first (keeping the recent messages intact), else forward.
    """
    candidate: int
    for candidate in [*range(split, pinned, -1), *range(split + 1, len(messages))]:
        if not has_block(messages[candidate], "toolResult"):
            return candidate
    return None


def render_transcript(messages: list[Message]) -> str:
    """A plain-text transcript (no tool blocks reach the summary call, so no tool specs are needed)."""
    lines: list[str] = []
    for message in messages:
        for block in message["content"]:
            line = _render_block(message["role"], block)
            if line:
                lines.append(line)
    return "\n\n".join(lines)


def _render_block(role: str, block: Any) -> str:
    if "text" in block:
        return f"[{role}] {_clip(block['text'])}"
    if "toolUse" in block:
        use = block["toolUse"]
        return f"[assistant called tool {use.get('name')}] {_clip(json.dumps(use.get('input'), default=str))}"
    if "toolResult" in block:
        result = block["toolResult"]
        parts = []
        for item in result.get("content", []):
            if "text" in item:
                parts.append(item["text"])
            elif "json" in item:
                parts.append(json.dumps(item["json"], default=str))
            else:
                parts.append(f"<{next(iter(item), 'content')}>")
        return f"[tool result, {result.get('status', 'success')}] {_clip(' '.join(parts))}"
    if "image" in block or "document" in block:
        return f"[{role} attached {'an image' if 'image' in block else 'a document'}]"
    return ""  # reasoning and other blocks are not part of what the summary needs


def _clip(text: str) -> str:
    if len(text) <= _MAX_BLOCK_CHARS:
        return text
    half = _MAX_BLOCK_CHARS // 2
    return f"{text[:half]} ... [{len(text) - _MAX_BLOCK_CHARS} chars omitted] ... {text[-half:]}"
