"""Converse ⇄ Anthropic Messages API: request bodies out, stream events back."""

from __future__ import annotations

import base64
import json
import mimetypes
from typing import Any, cast

from ray_harness.models._anthropic_cache import cache_control
from ray_harness.models._citations import anthropic_citation
from ray_harness.models._tool_history import tool_use_input
from ray_harness.types.content import ContentBlock, Messages, SystemPrompt
from ray_harness.types.streaming import StreamEvent
from ray_harness.types.tools import ToolChoice, ToolSpec

__all__ = ("AnthropicStreamState", "format_messages", "format_tool_choice", "format_tools")

_STOP_REASONS = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filtered",
    # A server-tool turn the API paused: AnthropicModel resumes it; if it is given up, the answer so far ends it.
    "pause_turn": "end_turn",
    # The output was cut off by the context window, which for the loop is the same as hitting max_tokens.
    "model_context_window_exceeded": "max_tokens",
}

# Blocks of tools Anthropic runs server-side that are not named ``*_tool_result``.
_SERVER_TOOL_BLOCKS = {"server_tool_use", "mcp_tool_use", "container_upload"}

# The block types Anthropic accepts ``cache_control`` on.
_CACHEABLE_TYPES = {"text", "image", "document", "tool_use", "tool_result"}

_TEXT_DOCUMENT_FORMATS = {"txt": "text/plain", "md": "text/plain", "csv": "text/plain", "html": "text/plain"}


def format_messages(messages: Messages) -> list[dict[str, Any]]:
    """Converse messages as Anthropic ``messages`` (empty text dropped: the API rejects it).

    Consecutive messages of one role become one turn (the API would combine them too; this way the request is
    what is sent), as after a session repaired from a crash followed by a new prompt.
    """
    formatted: list[dict[str, Any]] = []
    for message in messages:
        content = _format_blocks(message["content"])
        if not content:
            continue
        if formatted and formatted[-1]["role"] == message["role"]:
            formatted[-1]["content"].extend(content)
        else:
            formatted.append({"role": message["role"], "content": content})
    return formatted


def format_system(system_prompt: SystemPrompt) -> str | list[dict[str, Any]]:
    """A system prompt as Anthropic's ``system``.

    A string stays one; blocks become text blocks, and a cache point ``cache_control`` on the block before it.
    """
    if isinstance(system_prompt, str):
        return system_prompt
    return _format_blocks(cast(list[ContentBlock], system_prompt))


def _format_blocks(blocks: list[ContentBlock]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for block in blocks:
        if "cachePoint" in block:
            # Converse marks a cache breakpoint with its own block; Anthropic puts it on the preceding block that
            # can carry one (a thinking block cannot).
            mark = next((item for item in reversed(content) if item["type"] in _CACHEABLE_TYPES), None)
            if mark is not None:
                mark["cache_control"] = cache_control(block["cachePoint"].get("ttl"))
            continue
        converted = _format_block(block)
        if converted is not None:
            content.append(converted)
    return content


def _format_block(block: ContentBlock) -> dict[str, Any] | None:
    if "text" in block:
        return {"type": "text", "text": block["text"]} if block["text"] else None
    if "toolUse" in block:
        use = block["toolUse"]
        return {"type": "tool_use", "id": use["toolUseId"], "name": use["name"], "input": tool_use_input(use)}
    if "toolResult" in block:
        result = block["toolResult"]
        parts = [part for part in (_format_result_part(item) for item in result["content"]) if part is not None]
        formatted: dict[str, Any] = {"type": "tool_result", "tool_use_id": result["toolUseId"], "content": parts}
        if result.get("status") == "error":
            formatted["is_error"] = True
        return formatted
    if "reasoningContent" in block:
        return _format_reasoning(block["reasoningContent"])  # type: ignore[arg-type]
    if "image" in block:
        return _format_image(block["image"])  # type: ignore[arg-type]
    if "document" in block:
        return _format_document(block["document"])  # type: ignore[arg-type]
    if "json" in block:
        return {"type": "text", "text": json.dumps(block["json"])}
    if "citationsContent" in block:  # e.g. a Bedrock answer in a restored session: its text, as Strands sends it
        cited = cast(dict[str, Any], block)["citationsContent"]
        text = "".join(part["text"] for part in cited.get("content", []) if "text" in part)
        return {"type": "text", "text": text} if text else None
    raise TypeError(f"content block with keys {sorted(block)} cannot be sent to Anthropic")


def _format_result_part(part: dict[str, Any] | Any) -> dict[str, Any] | None:
    if "text" in part:
        return {"type": "text", "text": part["text"]} if part["text"] else None
    if "json" in part:
        return {"type": "text", "text": json.dumps(part["json"])}
    if "image" in part:
        return _format_image(part["image"])
    if "document" in part:
        return _format_document(part["document"])
    raise TypeError(f"tool result content with keys {sorted(part)} cannot be sent to Anthropic")


def _format_reasoning(reasoning: dict[str, Any]) -> dict[str, Any] | None:
    if "redactedContent" in reasoning:
        data = reasoning["redactedContent"]
        return {"type": "redacted_thinking", "data": data.decode() if isinstance(data, bytes) else str(data)}
    text = reasoning.get("reasoningText", {})
    if not text.get("signature"):
        # Reasoning of another model family (an OpenAI-compatible server's reasoning_content) has no signature,
        # and Anthropic rejects a thinking block without one; it is left out, as Strands does.
        return None
    return {"type": "thinking", "thinking": text.get("text", ""), "signature": text["signature"]}


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode()


def _format_image(image: dict[str, Any]) -> dict[str, Any]:
    fmt = image["format"].lower()
    media_type = mimetypes.types_map.get(f".{fmt}", f"image/{fmt}")
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": _b64(image["source"]["bytes"])}}


def _format_document(document: dict[str, Any]) -> dict[str, Any]:
    fmt = document["format"].lower()
    data = document["source"]["bytes"]
    if fmt in _TEXT_DOCUMENT_FORMATS:
        text = data.decode() if isinstance(data, bytes) else str(data)
        source: dict[str, Any] = {"type": "text", "media_type": _TEXT_DOCUMENT_FORMATS[fmt], "data": text}
    else:
        media_type = mimetypes.types_map.get(f".{fmt}", "application/pdf")
        source = {"type": "base64", "media_type": media_type, "data": _b64(data)}
    formatted: dict[str, Any] = {"type": "document", "source": source}
    if document.get("name"):
        formatted["title"] = document["name"]
    return formatted


def format_tools(tool_specs: list[ToolSpec] | None) -> list[dict[str, Any]]:
    return [{"name": spec["name"], "description": spec["description"], "input_schema": spec["inputSchema"]["json"]}
            for spec in tool_specs or []]


def format_tool_choice(tool_choice: ToolChoice | None, *, thinking: bool) -> dict[str, Any] | None:
    """Converse ``{"auto": {}}`` / ``{"any": {}}`` / ``{"tool": {"name"}}`` as Anthropic's ``tool_choice``.

    With extended thinking on, Anthropic accepts only ``auto``; a forced choice is relaxed to ``auto`` rather than
    failing the call (the structured-output tool is still offered and the prompt asks for it).
    """
    if not tool_choice:
        return None
    if "tool" in tool_choice:
        choice: dict[str, Any] = {"type": "tool", "name": tool_choice["tool"]["name"]}
    elif "any" in tool_choice:
        choice = {"type": "any"}
    elif "auto" in tool_choice:
        choice = {"type": "auto"}
    else:
        raise ValueError(f"unknown tool_choice {tool_choice!r}; expected one of auto, any, tool")
    if thinking and choice["type"] != "auto":
        return {"type": "auto"}
    return choice


def _is_server_tool_block(kind: Any) -> bool:
    """A block of a tool Anthropic runs itself (web search, code execution, MCP connector, ...): call or result."""
    return isinstance(kind, str) and (kind.endswith("_tool_result") or kind in _SERVER_TOOL_BLOCKS)


class AnthropicStreamState:
    """Turns raw Anthropic stream events into Converse stream events (one instance per response).

    The blocks of server tools (``anthropic_tools=``) are left out, as in Strands: the agent neither runs those
    calls nor holds their results (a Converse message has no block for them); the answer's text around them stays.
    """

    def __init__(self) -> None:
        self.stop_reason = "end_turn"
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read = 0
        self.cache_write = 0
        self.stopped = False
        self.paused = False  # the response ended with pause_turn: the caller resumes it (see ``resume``)
        self._server_blocks: set[int] = set()
        self._started = False
        self._offset = 0  # a resumed turn's blocks follow the earlier responses' blocks
        self._next_index = 0
        self._earlier = [0, 0, 0, 0]  # usage (input, output, cache read, cache write) of a resumed turn's earlier responses

    def convert(self, event: Any) -> list[StreamEvent]:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            started, self._started = self._started, True
            self._take_usage(event.message.usage)
            return [] if started else [{"messageStart": {"role": "assistant"}}]
        if kind in ("content_block_start", "content_block_delta", "content_block_stop"):
            return self._block_event(str(kind), event)
        if kind == "message_delta":
            reason = getattr(event.delta, "stop_reason", None)
            self.paused = reason == "pause_turn"
            if reason and not self.paused:
                self.stop_reason = _STOP_REASONS.get(reason, "end_turn")
            if event.usage is not None:
                self._take_usage(event.usage)
            return []
        if kind == "message_stop" and not self.paused:
            self.stopped = True
            return [{"messageStop": {"stopReason": self.stop_reason}}]
        return []

    def resume(self) -> None:
        """The paused turn goes on in a new response: one message, its usage the sum of the responses'."""
        self.paused = False
        self._offset = self._next_index
        now = (self.input_tokens, self.output_tokens, self.cache_read, self.cache_write)
        self._earlier = [earlier + tokens for earlier, tokens in zip(self._earlier, now, strict=True)]
        self.input_tokens = self.output_tokens = self.cache_read = self.cache_write = 0

    def _block_event(self, kind: str, event: Any) -> list[StreamEvent]:
        if kind == "content_block_start" and _is_server_tool_block(getattr(event.content_block, "type", None)):
            self._server_blocks.add(event.index)
        if event.index in self._server_blocks:
            if kind == "content_block_stop":
                self._server_blocks.discard(event.index)
            return []
        index = event.index + self._offset
        if kind == "content_block_start":
            self._next_index = max(self._next_index, index + 1)
            return self._block_start(index, event.content_block)
        if kind == "content_block_delta":
            return self._block_delta(index, event.delta)
        return [{"contentBlockStop": {"contentBlockIndex": index}}]

    def usage(self) -> dict[str, int]:
        """Usage with ``inputTokens`` counting every prompt token, cached or not (what ``ModelPrices`` expects)."""
        fresh, output, cache_read, cache_write = (earlier + now for earlier, now in zip(
            self._earlier, (self.input_tokens, self.output_tokens, self.cache_read, self.cache_write), strict=True))
        input_tokens = fresh + cache_read + cache_write
        usage = {"inputTokens": input_tokens, "outputTokens": output, "totalTokens": input_tokens + output}
        if cache_read:
            usage["cacheReadInputTokens"] = cache_read
        if cache_write:
            usage["cacheWriteInputTokens"] = cache_write
        return usage

    def _take_usage(self, usage: Any) -> None:
        # message_delta usage is cumulative, so later values replace earlier ones.
        if getattr(usage, "input_tokens", None) is not None:
            self.input_tokens = usage.input_tokens
        if getattr(usage, "output_tokens", None) is not None:
            self.output_tokens = usage.output_tokens
        if getattr(usage, "cache_read_input_tokens", None) is not None:
            self.cache_read = usage.cache_read_input_tokens
        if getattr(usage, "cache_creation_input_tokens", None) is not None:
            self.cache_write = usage.cache_creation_input_tokens

    @staticmethod
    def _block_start(index: int, block: Any) -> list[StreamEvent]:
        kind = getattr(block, "type", None)
        if kind == "tool_use":
            return [{"contentBlockStart": {"start": {"toolUse": {"toolUseId": block.id, "name": block.name}},
                                           "contentBlockIndex": index}}]
        events: list[StreamEvent] = [{"contentBlockStart": {"start": {}, "contentBlockIndex": index}}]
        if kind == "redacted_thinking":
            events.append({"contentBlockDelta": {
                "delta": {"reasoningContent": {"redactedContent": str(block.data).encode()}},
                "contentBlockIndex": index}})
        return events

    @staticmethod
    def _block_delta(index: int, delta: Any) -> list[StreamEvent]:
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            return [{"contentBlockDelta": {"delta": {"text": delta.text}, "contentBlockIndex": index}}]
        if kind == "input_json_delta":
            if not delta.partial_json:
                return []
            return [{"contentBlockDelta": {"delta": {"toolUse": {"input": delta.partial_json}},
                                           "contentBlockIndex": index}}]
        if kind == "thinking_delta":
            return [{"contentBlockDelta": {"delta": {"reasoningContent": {"text": delta.thinking}},
                                           "contentBlockIndex": index}}]
        if kind == "signature_delta":
            return [{"contentBlockDelta": {"delta": {"reasoningContent": {"signature": delta.signature}},
                                           "contentBlockIndex": index}}]
        if kind == "citations_delta":  # kept as Strands keeps it: the text block becomes a citationsContent block
            return [{"contentBlockDelta": {"delta": {"citation": anthropic_citation(delta.citation.to_dict(mode="json"))},
                                           "contentBlockIndex": index}}]
        return []  # future delta kinds carry nothing the Converse message holds
