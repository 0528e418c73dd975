"""Converse ⇄ OpenAI Chat Completions: request messages out, streamed chunks back."""

from __future__ import annotations

import base64
import json
import mimetypes
from types import SimpleNamespace
from typing import Any, cast

from ray_harness.models._tool_history import tool_use_input
from ray_harness.models.base import system_prompt_text
from ray_harness.types.content import ContentBlock, Message, Messages, SystemPrompt
from ray_harness.types.streaming import StreamEvent
from ray_harness.types.tools import ToolChoice, ToolSpec

__all__ = ("OpenAIStreamState", "completion_as_chunk", "format_messages", "format_tool_choice", "format_tools")

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
    texts = [text for text in map(_block_text, message["content"]) if text]
    calls = [{"id": block["toolUse"]["toolUseId"], "type": "function",
              "function": {"name": block["toolUse"]["name"], "arguments": json.dumps(tool_use_input(block["toolUse"]))}}
             for block in message["content"] if "toolUse" in block]
    if not texts and not calls:
        return None
    formatted: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        formatted["tool_calls"] = calls
    return formatted


def _block_text(block: ContentBlock) -> str | None:
    """The text of a text block, or of a ``citationsContent`` block (a Bedrock answer in a restored session)."""
    if "text" in block:
        return block["text"]
    cited = cast(dict[str, Any], block).get("citationsContent")
    if cited is not None:
        return "".join(part["text"] for part in cited.get("content", []) if "text" in part)
    return None


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
    if "citationsContent" in block:
        text = _block_text(cast(ContentBlock, block))
        return {"type": "text", "text": text} if text else None
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


def completion_as_chunk(completion: Any) -> Any:
    """A non-streamed ``chat.completion`` as one chunk whose delta is the whole message.

    ``OpenAIStreamState`` then converts it as it converts streamed chunks, so both paths give the same events (a
    message's tool calls carry no ``index``; their position stands in for it).
    """
    choices = [SimpleNamespace(index=getattr(choice, "index", 0), delta=getattr(choice, "message", None),
                               finish_reason=getattr(choice, "finish_reason", None))
               for choice in getattr(completion, "choices", None) or []]
    return SimpleNamespace(choices=choices, usage=getattr(completion, "usage", None))


class _ToolCall:
    """One streamed tool call: what has arrived of it, and whether its block has been started."""

    def __init__(self, index: int, use_id: str | None) -> None:
        self.index = index
        self.use_id = use_id
        self.name = ""
        self.arguments: list[str] = []
        self.started = False


class OpenAIStreamState:
    """Turns Chat Completions chunks into Converse stream events (one instance per response).

    Converse blocks are sequential, but a compatible server (or a gateway translating another API) may interleave
    the argument fragments of parallel tool calls, told apart by ``index``. So one tool call streams live (the
    first one, as OpenAI sends them in order) and any other is collected by ``index`` and emitted whole when the
    live one is over: at the end of the stream, before text that follows, or when a new ``id`` arrives on the live
    call's index (servers that send every call complete at index 0).
    """

    def __init__(self) -> None:
        self.finish_reason: str | None = None
        self.usage: dict[str, int] | None = None
        self.saw_tool_call = False
        self._next_index = 0
        self._open: str | None = None  # "text" | "reasoning" | "tool": the kind of the open block
        self._open_index = 0
        self._live: _ToolCall | None = None  # the tool call whose block is open (or waits for its name to start)
        self._calls: list[_ToolCall] = []  # tool calls not yet emitted, the live one included

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
            events.extend(self._open_block("reasoning"))
            events.append(self._block_delta({"reasoningContent": {"text": reasoning}}))
        if getattr(delta, "content", None):
            events.extend(self._open_block("text"))
            events.append(self._block_delta({"text": delta.content}))
        for position, call in enumerate(getattr(delta, "tool_calls", None) or []):
            events.extend(self._tool_delta(position, call))
        return events

    def _tool_delta(self, position: int, call: Any) -> list[StreamEvent]:
        self.saw_tool_call = True
        index = call.index if getattr(call, "index", None) is not None else position
        function = getattr(call, "function", None)
        name = getattr(function, "name", None)
        arguments = getattr(function, "arguments", None)
        events: list[StreamEvent] = []
        tool_call = self._find_call(index, call.id)
        if tool_call is None:
            if self._live is not None and self._live.index == index:
                events.extend(self._close())  # a new id on the live index: the live call is complete
            tool_call = _ToolCall(index, call.id)
            self._calls.append(tool_call)
        if name and not tool_call.name:
            tool_call.name = name
        if self._live is None:
            events.extend(self._close())
            self._live = tool_call
        if tool_call is not self._live:
            if arguments:
                tool_call.arguments.append(arguments)
            return events
        if not tool_call.started and (tool_call.name or arguments):
            events.extend(self._start_tool(tool_call))
        if arguments:
            if tool_call.started:
                events.append(self._block_delta({"toolUse": {"input": arguments}}))
            else:
                tool_call.arguments.append(arguments)
        return events

    def _find_call(self, index: int, use_id: str | None) -> _ToolCall | None:
        for tool_call in reversed(self._calls):
            if tool_call.index == index:
                if use_id is not None and tool_call.use_id is not None and use_id != tool_call.use_id:
                    return None
                if tool_call.use_id is None:
                    tool_call.use_id = use_id
                return tool_call
        return None

    def _start_tool(self, tool_call: _ToolCall) -> list[StreamEvent]:
        tool_call.started = True
        self._open = "tool"
        self._open_index = self._next_index
        self._next_index += 1
        use_id = tool_call.use_id or f"call_{tool_call.index}"
        events: list[StreamEvent] = [{"contentBlockStart": {
            "start": {"toolUse": {"toolUseId": use_id, "name": tool_call.name}},
            "contentBlockIndex": self._open_index}}]
        if tool_call.arguments:
            events.append(self._block_delta({"toolUse": {"input": "".join(tool_call.arguments)}}))
            tool_call.arguments.clear()
        return events

    def _open_block(self, kind: str) -> list[StreamEvent]:
        if self._open == kind:
            return []
        events = self._close()
        self._open = kind
        self._open_index = self._next_index
        self._next_index += 1
        events.append({"contentBlockStart": {"start": {}, "contentBlockIndex": self._open_index}})
        return events

    def _block_delta(self, delta: dict[str, Any]) -> StreamEvent:
        return {"contentBlockDelta": {"delta": delta, "contentBlockIndex": self._open_index}}  # type: ignore[typeddict-item]

    def _close(self) -> list[StreamEvent]:
        """Close the open block; after a live tool call, emit the tool calls collected meanwhile, each whole."""
        events: list[StreamEvent] = []
        live, self._live = self._live, None
        if live is not None:
            if not live.started:
                events.extend(self._start_tool(live))
            self._calls.remove(live)
        if self._open is not None:
            events.append({"contentBlockStop": {"contentBlockIndex": self._open_index}})
            self._open = None
        if live is not None:
            for tool_call in sorted(self._calls, key=lambda pending: pending.index):
                events.extend(self._start_tool(tool_call))
                events.append({"contentBlockStop": {"contentBlockIndex": self._open_index}})
                self._open = None
            self._calls.clear()
        return events


def _usage(usage: Any) -> dict[str, int]:
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    converted = {"inputTokens": prompt, "outputTokens": completion, "totalTokens": prompt + completion}
    details = getattr(usage, "prompt_tokens_details", None)
    for field, key in (("cached_tokens", "cacheReadInputTokens"), ("cache_write_tokens", "cacheWriteInputTokens")):
        value = getattr(details, field, None) if details is not None else None  # cache writes: billed from GPT-5.6
        if isinstance(value, int) and value:
            converted[key] = value
    return converted
