"""Assemble Converse stream events into an assistant message, yielding typed agent events.

Events the caller of ``stream_async`` sees are dicts with a ``"type"`` key
(plus the Strands-compatible keys): ``model_event`` (``event``: the raw
chunk), ``text_delta`` (``data``, ``delta``), ``tool_use_delta``
(``current_tool_use``, ``delta``), ``reasoning_delta`` (``reasoningText``,
``reasoning``), ``message`` (``message``), ``tool_start`` (``tool_use``),
``tool_stream`` (``tool_stream_event``), ``tool_result`` (``tool_result``),
``interrupt`` (``interrupts``), ``result`` (``result``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from ray_harness.middleware.types import ModelStopReason
from ray_harness.types.content import ContentBlock, Message
from ray_harness.types.exceptions import EventLoopException

__all__ = ("process_stream",)

_STOP_REASONS = {
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "content_filtered", "guardrail_intervened",
}


async def process_stream(chunks: AsyncIterator[dict[str, Any]], *, raw_events: bool = True
                         ) -> AsyncGenerator[Any, None]:
    """Yield agent events for ``chunks``; the last event is a ``ModelStopReason``."""
    started = time.perf_counter()
    first_byte: float | None = None
    content: list[ContentBlock] = []
    text_parts: list[str] = []
    tool: dict[str, Any] | None = None
    tool_input: list[str] = []
    reasoning: list[str] = []
    signature: str | None = None
    stop_reason = "end_turn"
    usage: dict[str, int] = {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
    metrics: dict[str, int] = {"latencyMs": 0}
    role = "assistant"
    saw_stop = False

    def close_block() -> None:
        nonlocal tool, signature
        if tool is not None:
            raw = "".join(tool_input)
            try:
                parsed = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                parsed = raw  # kept verbatim: the tool's schema validation reports it to the model
            content.append({"toolUse": {"toolUseId": tool["toolUseId"], "name": tool["name"], "input": parsed}})
            tool = None
            tool_input.clear()
        elif reasoning or signature is not None:
            text_block: dict[str, Any] = {"text": "".join(reasoning)}
            if signature is not None:
                text_block["signature"] = signature
            content.append({"reasoningContent": {"reasoningText": text_block}})  # type: ignore[typeddict-item]
            reasoning.clear()
            signature = None
        elif text_parts:
            content.append({"text": "".join(text_parts)})
            text_parts.clear()

    async for chunk in chunks:
        if not isinstance(chunk, dict):
            raise EventLoopException(TypeError(f"model stream event must be a dict, got {type(chunk).__name__}"))
        if raw_events:
            yield {"type": "model_event", "event": chunk}
        if "contentBlockDelta" in chunk:
            if first_byte is None:
                first_byte = time.perf_counter()
            delta = chunk["contentBlockDelta"].get("delta", {})
            if "text" in delta:
                text_parts.append(delta["text"])
                yield {"type": "text_delta", "data": delta["text"], "delta": delta}
            elif "toolUse" in delta:
                if tool is None:
                    raise EventLoopException(ValueError("model stream: toolUse delta without contentBlockStart"))
                tool_input.append(delta["toolUse"].get("input", ""))
                yield {"type": "tool_use_delta", "current_tool_use": {**tool, "input": "".join(tool_input)},
                       "delta": delta}
            elif "reasoningContent" in delta:
                part = delta["reasoningContent"]
                if "text" in part:
                    reasoning.append(part["text"])
                    yield {"type": "reasoning_delta", "reasoningText": part["text"], "reasoning": True, "delta": delta}
                if "signature" in part:
                    signature = (signature or "") + part["signature"]
        elif "contentBlockStart" in chunk:
            if first_byte is None:
                first_byte = time.perf_counter()
            start = chunk["contentBlockStart"].get("start", {})
            if "toolUse" in start:
                close_block()
                tool = {"toolUseId": start["toolUse"]["toolUseId"], "name": start["toolUse"]["name"]}
        elif "contentBlockStop" in chunk:
            close_block()
        elif "messageStart" in chunk:
            role = chunk["messageStart"].get("role", "assistant")
        elif "messageStop" in chunk:
            close_block()
            saw_stop = True
            stop_reason = chunk["messageStop"].get("stopReason", "end_turn")
            if stop_reason not in _STOP_REASONS:
                stop_reason = "end_turn"
        elif "metadata" in chunk:
            meta = chunk["metadata"]
            if "usage" in meta:
                usage = {k: int(v) for k, v in meta["usage"].items() if isinstance(v, int | float)}
                usage.setdefault("totalTokens", usage.get("inputTokens", 0) + usage.get("outputTokens", 0))
            if "metrics" in meta:
                metrics = {k: int(v) for k, v in meta["metrics"].items() if isinstance(v, int | float)}
    close_block()
    if not saw_stop and any("toolUse" in block for block in content):
        stop_reason = "tool_use"
    if "latencyMs" not in metrics or not metrics["latencyMs"]:
        metrics["latencyMs"] = int((time.perf_counter() - started) * 1000)
    if first_byte is not None:
        metrics.setdefault("timeToFirstByteMs", int((first_byte - started) * 1000))
    message: Message = {"role": role if role in ("user", "assistant") else "assistant", "content": content}  # type: ignore[typeddict-item]
    yield ModelStopReason(stop_reason=stop_reason, message=message, usage=usage, metrics=metrics)
