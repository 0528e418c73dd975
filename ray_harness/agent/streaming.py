"""Assemble Converse stream events into an assistant message, yielding typed agent events.

Events the caller of ``stream_async`` sees are dicts with a ``"type"`` key
(plus the Strands-compatible keys): ``model_event`` (``event``: the raw
chunk), ``text_delta`` (``data``, ``delta``), ``tool_use_stream``
(``current_tool_use``, ``delta``), ``citation`` (``citation``, ``delta``), ``reasoning_delta`` (``reasoningText``,
``reasoning``), ``message`` (``message``), ``tool_start`` (``tool_use``),
``tool_stream`` (``tool_stream_event``), ``tool_result`` (``tool_result``),
``interrupt`` (``interrupts``), ``result`` (``result``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

from ray_harness.middleware.types import ModelStopReason
from ray_harness.types.content import ContentBlock, Message
from ray_harness.types.exceptions import EventLoopException

__all__ = ("StreamState", "process_stream", "read_stream")

_NO_EVENTS: tuple[dict[str, Any], ...] = ()  # what a chunk without delta events gives
_NUMBERS = (int, float)  # a tuple: ``int | float`` in an isinstance builds a union object at every test
_STOP_REASONS = {"end_turn", "tool_use", "max_tokens", "stop_sequence", "content_filtered", "guardrail_intervened"}


class StreamState:
    """Accumulates blocks; each ``on_*`` handles one Converse event kind and returns events to yield."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_byte: float | None = None
        self.content: list[ContentBlock] = []
        self.text: list[str] = []
        self.citations: list[dict[str, Any]] = []  # of the text block; kept until a text block takes them (Strands)
        self.tool: dict[str, Any] | None = None
        self.tool_input: list[str] = []
        self.reasoning: list[str] = []
        self.signature: str | None = None
        self.redacted: bytes | None = None
        self.stop_reason = "end_turn"
        self.saw_stop = False
        self.role = "assistant"
        self.usage: dict[str, int] = {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
        self.metrics: dict[str, int] = {"latencyMs": 0}
        # ``redactContent`` texts (a provider's guardrail blocked content): they replace the prompt in the history
        # and the assistant's answer, as in Strands.
        self.redact_user: str | None = None
        self.redact_assistant: str | None = None

    def close_block(self) -> None:
        """Finish the current content block (text, reasoning or a tool use whose JSON input is now parsed)."""
        if self.tool is not None:
            raw = "".join(self.tool_input)
            try:
                parsed = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                parsed = raw  # kept verbatim: the tool's schema validation reports it to the model
            self.content.append({"toolUse": {"toolUseId": self.tool["toolUseId"], "name": self.tool["name"],
                                             "input": parsed}})
            self.tool = None
            self.tool_input.clear()
        elif self.redacted is not None:
            self.content.append({"reasoningContent": {"redactedContent": self.redacted}})
            self.redacted = None
        elif self.reasoning or self.signature is not None:
            block: dict[str, Any] = {"text": "".join(self.reasoning)}
            if self.signature is not None:
                block["signature"] = self.signature
            self.content.append({"reasoningContent": {"reasoningText": block}})  # type: ignore[typeddict-item]
            self.reasoning.clear()
            self.signature = None
        elif self.text:
            if self.citations:
                self.content.append({"citationsContent": {"citations": list(self.citations),
                                                          "content": [{"text": "".join(self.text)}]}})
                self.citations.clear()
            else:
                self.content.append({"text": "".join(self.text)})
            self.text.clear()

    def on_delta(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        """Handle a ``contentBlockDelta``: append text, reasoning or tool input and return the delta events.

        Raises:
            EventLoopException: A tool-use delta arrived with no ``contentBlockStart`` before it.
        """
        self._mark_first_byte()
        delta = payload.get("delta", {})
        if "text" in delta:
            self.text.append(delta["text"])
            return [{"type": "text_delta", "data": delta["text"], "delta": delta}]
        if "toolUse" in delta:
            if self.tool is None:
                raise EventLoopException(ValueError("model stream: toolUse delta without contentBlockStart"))
            self.tool_input.append(delta["toolUse"].get("input", ""))
            return [{"type": "tool_use_stream", "current_tool_use": {**self.tool, "input": "".join(self.tool_input)},
                     "delta": delta}]
        if "citation" in delta:
            self.citations.append(delta["citation"])
            return [{"type": "citation", "citation": delta["citation"], "delta": delta}]
        if "reasoningContent" in delta:
            part = delta["reasoningContent"]
            if "redactedContent" in part:
                self.redacted = (self.redacted or b"") + part["redactedContent"]
            if "signature" in part:
                self.signature = (self.signature or "") + part["signature"]
            if "text" in part:
                self.reasoning.append(part["text"])
                return [{"type": "reasoning_delta", "reasoningText": part["text"], "reasoning": True, "delta": delta}]
        return []

    def on_start(self, payload: dict[str, Any]) -> None:
        """Handle a ``contentBlockStart``: a tool use opens a new block."""
        self._mark_first_byte()
        start = payload.get("start", {})
        if "toolUse" in start:
            self.close_block()
            self.tool = {"toolUseId": start["toolUse"]["toolUseId"], "name": start["toolUse"]["name"]}

    def on_stop(self, payload: dict[str, Any]) -> None:
        """Handle a ``messageStop``: close the block and keep the stop reason (unknown ones become ``end_turn``)."""
        self.close_block()
        self.saw_stop = True
        reason = payload.get("stopReason", "end_turn")
        self.stop_reason = reason if reason in _STOP_REASONS else "end_turn"

    def on_metadata(self, payload: dict[str, Any]) -> None:
        """Handle a ``metadata`` event: keep its usage (total filled in) and metrics."""
        if "usage" in payload:
            self.usage = {k: int(v) for k, v in payload["usage"].items() if isinstance(v, _NUMBERS)}
            self.usage.setdefault("totalTokens", self.usage.get("inputTokens", 0) + self.usage.get("outputTokens", 0))
        if "metrics" in payload:
            self.metrics = {k: int(v) for k, v in payload["metrics"].items() if isinstance(v, _NUMBERS)}

    def on_trailer(self, chunk: dict[str, Any]) -> None:
        """Handle what follows a message's stop: ``metadata``, and ``redactContent`` (a guardrail blocked content)."""
        if "metadata" in chunk:
            self.on_metadata(chunk["metadata"])
        elif "redactContent" in chunk:
            redact = chunk["redactContent"]
            self.redact_user = redact.get("redactUserContentMessage", self.redact_user)
            self.redact_assistant = redact.get("redactAssistantContentMessage", self.redact_assistant)

    def feed(self, chunk: Any) -> Sequence[dict[str, Any]]:
        """Handle one Converse chunk; returns its delta events (empty for the other kinds).

        Raises:
            EventLoopException: ``chunk`` is not a dict, or is a tool-use delta with no block started.
        """
        if not isinstance(chunk, dict):
            raise EventLoopException(TypeError(f"model stream event must be a dict, got {type(chunk).__name__}"))
        if "contentBlockDelta" in chunk:
            return self.on_delta(chunk["contentBlockDelta"])
        if "contentBlockStart" in chunk:
            self.on_start(chunk["contentBlockStart"])
        elif "contentBlockStop" in chunk:
            self.close_block()
        elif "messageStart" in chunk:
            self.role = chunk["messageStart"].get("role", "assistant")
        elif "messageStop" in chunk:
            self.on_stop(chunk["messageStop"])
        else:
            self.on_trailer(chunk)
        return _NO_EVENTS

    def _mark_first_byte(self) -> None:
        if self.first_byte is None:
            self.first_byte = time.perf_counter()

    def cut_usage(self, input_estimate: int) -> dict[str, int]:
        """What a stream cut before its end (a cancel) spent: the provider's report if one arrived, else an estimate.

        The estimate is ``input_estimate`` for the request plus one token per four characters that streamed;
        ``estimatedTokens`` says how many of ``totalTokens`` are estimated, so limits and cost stay honest
        and readers can tell a guess from a report.
        """
        if self.usage.get("totalTokens"):
            return dict(self.usage)
        streamed = sum(len(part) for part in (*self.text, *self.tool_input, *self.reasoning))
        streamed += sum(len(block["text"]) if "text" in block else len(json.dumps(block, default=str))
                        for block in self.content)
        output = -(-streamed // 4)
        total = input_estimate + output
        return {"inputTokens": input_estimate, "outputTokens": output, "totalTokens": total, "estimatedTokens": total}

    def finish(self) -> ModelStopReason:
        """Close the stream and return the assembled assistant message with its stop reason, usage and metrics.

        The stop reason is ``tool_use`` when the stream named none but asked for tools; latency and time to first
        byte are measured here when the provider did not report them.
        """
        self.close_block()
        if not self.saw_stop and any("toolUse" in block for block in self.content):
            self.stop_reason = "tool_use"
        if not self.metrics.get("latencyMs"):
            self.metrics["latencyMs"] = int((time.perf_counter() - self.started) * 1000)
        if self.first_byte is not None:
            self.metrics.setdefault("timeToFirstByteMs", int((self.first_byte - self.started) * 1000))
        if self.redact_assistant is not None:
            self.content = [{"text": self.redact_assistant}]
        role = self.role if self.role in ("user", "assistant") else "assistant"
        message: Message = {"role": role, "content": self.content}  # type: ignore[typeddict-item]
        return ModelStopReason(stop_reason=self.stop_reason, message=message, usage=self.usage, metrics=self.metrics)


async def process_stream(chunks: AsyncIterator[dict[str, Any]], *, raw_events: bool = True, deltas: bool = True,
                         state: StreamState | None = None) -> AsyncGenerator[Any, None]:
    """Yield agent events for ``chunks``; the last event is a ``ModelStopReason``.

    ``raw_events=False`` leaves out the ``model_event`` wrappers, ``deltas=False`` the ``*_delta`` events.
    ``state``: the accumulator to use, so a caller that cuts the stream can read what arrived.
    """
    state = state if state is not None else StreamState()
    async for chunk in chunks:
        if raw_events and isinstance(chunk, dict):
            yield {"type": "model_event", "event": chunk}
        events = state.feed(chunk)
        if deltas:
            for event in events:
                yield event
    yield state.finish()


async def read_stream(chunks: AsyncIterator[Any], state: StreamState) -> ModelStopReason:
    """:func:`process_stream` for a caller that wants only the stop: a plain coroutine, no generator layer.

    Raises:
        EventLoopException: As :func:`process_stream`.
    """
    feed = state.feed
    async for chunk in chunks:
        feed(chunk)
    return state.finish()
