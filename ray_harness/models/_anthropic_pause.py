"""A paused Anthropic turn (``stop_reason="pause_turn"``), rebuilt as the assistant content that resumes it.

Anthropic pauses a long server-tool turn (web search, code execution, ...) and expects the paused assistant
message sent back as it was, server-tool blocks included, to continue it. The Converse events the agent gets hold
no such blocks, so the raw stream events are collected here as well, block by block.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ("MAX_CONTINUATIONS", "RawContent")

# How often one call resumes a paused turn before giving up (Strands' bound too).
MAX_CONTINUATIONS = 10
_CALL_BLOCKS = {"tool_use", "server_tool_use", "mcp_tool_use"}  # their input arrives as JSON text deltas


class RawContent:
    """The content blocks of one Anthropic response, as the Messages API takes them back."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._inputs: dict[int, list[str]] = {}

    def feed(self, event: Any) -> None:
        """Take one raw stream event (those that are not about content blocks are ignored)."""
        kind = getattr(event, "type", None)
        if kind == "content_block_start":
            self._blocks[event.index] = event.content_block.to_dict(mode="json")
        elif kind == "content_block_delta" and event.index in self._blocks:
            self._delta(event.index, event.delta)
        elif kind == "content_block_stop" and event.index in self._inputs:
            text = "".join(self._inputs.pop(event.index))
            self._blocks[event.index]["input"] = json.loads(text) if text else {}

    def blocks(self) -> list[dict[str, Any]]:
        """The blocks in their order."""
        return [self._blocks[index] for index in sorted(self._blocks)]

    def _delta(self, index: int, delta: Any) -> None:
        block = self._blocks[index]
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.text
        elif kind == "input_json_delta" and block.get("type") in _CALL_BLOCKS:
            self._inputs.setdefault(index, []).append(delta.partial_json)
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.signature
        elif kind == "citations_delta":
            block["citations"] = [*(block.get("citations") or []), delta.citation.to_dict(mode="json")]
