"""Tool blocks in a history sent without tool specs.

Anthropic and Bedrock reject a request whose history holds ``toolUse`` /
``toolResult`` blocks but that declares no tools ("must define tools" /
"toolConfig field must be defined"). That happens in ordinary use: a later
call of an agent whose earlier turn used the structured-output tool, or an
agent whose tools were removed. Such blocks are sent as text instead, so the
model still sees what happened.
"""

from __future__ import annotations

import json
from typing import Any

from ray_harness.types.content import ContentBlock, Messages

__all__ = ("has_tool_blocks", "tool_blocks_as_text", "tool_use_input")


def tool_use_input(use: Any) -> dict[str, Any]:
    """A tool use's input as the providers take it: an object.

    The agent keeps input that did not parse as JSON verbatim, as a string (a call cut off by ``max_tokens``, a
    model's malformed JSON) so the tool's validation error can tell the model; Anthropic and Bedrock reject a
    string input, which would fail every later call of the conversation, so it is sent as ``{}`` (as in Strands).
    """
    value = use.get("input")
    return value if isinstance(value, dict) else {}


def has_tool_blocks(messages: Messages) -> bool:
    return any("toolUse" in block or "toolResult" in block for message in messages for block in message["content"])


def tool_blocks_as_text(messages: Messages) -> Messages:
    return [{"role": message["role"], "content": [_as_text(block) for block in message["content"]]}
            for message in messages]


def _as_text(block: ContentBlock) -> ContentBlock:
    if "toolUse" in block:
        use = block["toolUse"]
        return {"text": f"[called tool {use['name']} with input {json.dumps(use.get('input'), default=str)}]"}
    if "toolResult" in block:
        result = block["toolResult"]
        parts = [_part_text(part) for part in result["content"]]
        return {"text": f"[tool result ({result.get('status', 'success')}): {' '.join(parts)}]"}
    return block


def _part_text(part: Any) -> str:
    if "text" in part:
        return str(part["text"])
    if "json" in part:
        return json.dumps(part["json"], default=str)
    return f"<{next(iter(part), 'content')}>"
