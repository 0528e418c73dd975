"""Converse ⇄ OpenAI Chat Completions: request messages out, streamed chunks back."""

from __future__ import annotations

import base64
import json
import mimetypes
from typing import Any

from ray_harness.models.base import system_prompt_text
from ray_harness.types.content import ContentBlock, Message, Messages, SystemPrompt
from ray_harness.types.streaming import StreamEvent
from ray_harness.types.tools import ToolChoice, ToolSpec

__all__ = ("OpenAIStreamState", "format_messages", "format_tool_choice", "format_tools")

_FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filtered",
}


def format_messages(messages: Messages, system_prompt: SystemPrompt | None) -> list[dict[str, Any]]:
    """Converse messages as Chat Completions ``messages``.

    Tool results become ``role: "tool"`` messages placed right after the assistant turn that asked for them
    (the API requires that order); images a tool returned follow as a user message, because a tool message
    carries text only. Reasoning blocks are not sent back: Chat Completions has no field for them.
    """
    formatted: list[dict[str, Any]] = []
    system = system_prompt_text(system_prompt)  # Chat Completions has no cache points: their text only
    if system:
        formatted.append({"role": "system", "content": system})
    for message in messages:
        if message["role"] == "assistant":
            assistant = _format_assistant(message)
            if assistant is not None:
                formatted.append(assistant)
        else:
            formatted.extend(_format_user(message))
    return formatted


def _format_assistant(message: Message) -> dict[str, Any] | None:
    texts = [block["text"] for block in message["content"] if block.get("text")]
    calls = [{"id": block["toolUse"]["toolUseId"], "type": "function",
              "function": {"name": block["toolUse"]["name"], "arguments": json.dumps(block["toolUse"].get("input") or {})}}
             for block in message["content"] if "toolUse" in block]
    if not texts and not calls:
        return None
    formatted: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        formatted["tool_calls"] = calls
    return formatted


def _format_user(message: Message) -> list[dict[str, Any]]:
    tool_messages: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message["content"]:
        if "toolResult" in block:
            result = block["toolResult"]
            texts, extra_parts = _split_result(result["content"])
            text = "\n".join(texts)
            if result.get("status") == "error" and not text.startswith("Error"):
                text = f"Error: {text}"
            tool_messages.append({"role": "tool", "tool_call_id": result["toolUseId"], "content": text})
            parts.extend(extra_parts)
        else:
            part = _format_part(block)
            if part is not None:
                parts.append(part)
    formatted = list(tool_messages)
    if parts:
        formatted.append({"role": "user", "content": parts})
    return formatted


def _split_result(content: list[Any]) -> tuple[list[str], list[dict[str, Any]]]:
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for item in content:
        if "text" in item:
            texts.append(item["text"])
        elif "json" in item:
            texts.append(json.dumps(item["json"]))
        else:
            part = _format_part(item)
            if part is not None:
                parts.append(part)
    return texts, parts


def _format_part(block: ContentBlock | dict[str, Any]) -> dict[str, Any] | None:
    if "text" in block:
        return {"type": "text", "text": block["text"]} if block["text"] else None
    if "json" in block:
        return {"type": "text", "text": json.dumps(block["json"])}
    if "image" in block:
        image = block["image"]
        media_type = mimetypes.types_map.get(f".{image['format'].lower()}", f"image/{image['format'].lower()}")
        return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{_b64(image['source']['bytes'])}"}}
    if "document" in block:
        document = block["document"]
        media_type = mimetypes.types_map.get(f".{document['format'].lower()}", "application/octet-stream")
        return {"type": "file", "file": {"filename": document.get("name") or f"document.{document['format']}",
                                         "file_data": f"data:{media_type};base64,{_b64(document['source']['bytes'])}"}}
    if "reasoningContent" in block or "cachePoint" in block:
        return None
    raise TypeError(f"content block with keys {sorted(block)} cannot be sent to OpenAI")


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode()


def format_tools(tool_specs: list[ToolSpec] | None) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": spec["name"], "description": spec["description"],
                                              "parameters": spec["inputSchema"]["json"]}}
            for spec in tool_specs or []]


def format_tool_choice(tool_choice: ToolChoice | None) -> str | dict[str, Any] | None:
    if not tool_choice:
        return None
    if "tool" in tool_choice:
        return {"type": "function", "function": {"name": tool_choice["tool"]["name"]}}
    if "any" in tool_choice:
        return "required"
    if "auto" in tool_choice:
        return "auto"
    raise ValueError(f"unknown tool_choice {tool_choice!r}; expected one of auto, any, tool")


class OpenAIStreamState:
    """Turns Chat Completions chunks into Converse stream events (one instance per response).

    Converse blocks are sequential, so a tool call's block is closed when the next call (a new ``index`` or a new
    ``id`` on the same index, as some compatible servers send) or the end of the stream arrives.
    """

    def __init__(self) -> None:
        self.finish_reason: str | None = None
        self.usage: dict[str, int] | None = None
        self.saw_tool_call = False
        self._next_index = 0
        self._open: tuple[str, Any] | None = None  # ("text" | "reasoning" | "tool", key) of the open block
        self._open_index = 0

    def convert(self, chunk: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if getattr(chunk, "usage", None) is not None:
            self.usage = _usage(chunk.usage)
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) != 0:
                continue  # n > 1 is not a Converse concept; the first choice is the answer
            delta = choice.delta
            if delta is not None:
                events.extend(self._delta(delta))
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return events

    def finish(self) -> list[StreamEvent]:
        events = self._close()
        reason = _FINISH_REASONS.get(self.finish_reason or "stop", "end_turn")
        if self.saw_tool_call and reason == "end_turn":
            reason = "tool_use"  # some compatible servers say "stop" after tool calls
        events.append({"messageStop": {"stopReason": reason}})
        return events

    def _delta(self, delta: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        reasoning = getattr(delta, "reasoning_content", None) or (getattr(delta, "model_extra", None) or {}).get(
            "reasoning_content") or (getattr(delta, "model_extra", None) or {}).get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            events.extend(self._open_block(("reasoning", None)))
            events.append(self._block_delta({"reasoningContent": {"text": reasoning}}))
        if getattr(delta, "content", None):
            events.extend(self._open_block(("text", None)))
            events.append(self._block_delta({"text": delta.content}))
        for position, call in enumerate(getattr(delta, "tool_calls", None) or []):
            events.extend(self._tool_delta(position, call))
        return events

    def _tool_delta(self, position: int, call: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        index = call.index if getattr(call, "index", None) is not None else position
        function = getattr(call, "function", None)
        name = getattr(function, "name", None)
        same = self._open is not None and self._open[0] == "tool" and self._open[1][0] == index
        new_id = call.id is not None and not (same and self._open is not None and self._open[1][1] == call.id)
        if not same or new_id:
            events.extend(self._close())
            self.saw_tool_call = True
            use_id = call.id or f"call_{index}"
            self._open = ("tool", (index, use_id))
            self._open_index = self._next_index
            self._next_index += 1
            events.append({"contentBlockStart": {"start": {"toolUse": {"toolUseId": use_id, "name": name or ""}},
                                                 "contentBlockIndex": self._open_index}})
        arguments = getattr(function, "arguments", None)
        if arguments:
            events.append(self._block_delta({"toolUse": {"input": arguments}}))
        return events

    def _open_block(self, key: tuple[str, Any]) -> list[StreamEvent]:
        if self._open == key:
            return []
        events = self._close()
        self._open = key
        self._open_index = self._next_index
        self._next_index += 1
        events.append({"contentBlockStart": {"start": {}, "contentBlockIndex": self._open_index}})
        return events

    def _block_delta(self, delta: dict[str, Any]) -> StreamEvent:
        return {"contentBlockDelta": {"delta": delta, "contentBlockIndex": self._open_index}}  # type: ignore[typeddict-item]

    def _close(self) -> list[StreamEvent]:
        if self._open is None:
            return []
        self._open = None
        return [{"contentBlockStop": {"contentBlockIndex": self._open_index}}]


def _usage(usage: Any) -> dict[str, int]:
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    converted = {"inputTokens": prompt, "outputTokens": completion, "totalTokens": prompt + completion}
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if cached:
        converted["cacheReadInputTokens"] = int(cached)
    return converted
