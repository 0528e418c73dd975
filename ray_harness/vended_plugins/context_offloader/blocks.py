"""Offloading one tool result block by block, and what stands in for it in the context.

Text is stored as ``text/plain``, JSON (indented) as ``application/json``, an image as ``image/<format>``
and a document as ``application/<format>``, each block under the key ``<toolUseId>_<index>``. An image or
document whose source is not bytes (an S3 location, ...) and any other block kind stay in the result as
they are; an empty text block is dropped. The replacement is one text block — a header, guidance, a preview
of the text and JSON, and the references — followed by one placeholder per stored image or document and the
blocks that were kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray_harness.types.content import ToolResult, ToolResultContent
from ray_harness.vended_plugins.context_offloader.unified import AnyStorage, store_content

__all__ = ("Stored", "decode_full", "offloaded_result", "preview_source", "store_blocks")

CHARS_PER_TOKEN = 4
"""Characters a token, for slicing the preview and capping a retrieval (Strands' heuristic)."""

_WITH_TOOL = ("If you need more detail, use retrieve_offloaded_content with a reference and:\n"
              "  - pattern: regex or keyword to find matching lines with context\n"
              "  - line_range: { start, end } to read a specific span of lines\n"
              "Retrieve full content (omit pattern/line_range) as a last resort.")
_WITHOUT_TOOL = "If you need more detail, use your available tools to access specific data."


@dataclass(frozen=True)
class Stored:
    """Where one block went: its reference and how it is described to the model."""

    reference: str
    description: str


def preview_source(content: list[ToolResultContent]) -> str:
    """The text the preview is cut from: the non-empty text blocks and the JSON blocks (indented), in order."""
    parts = [block["text"] if block.get("text") else json.dumps(block["json"], indent=2)
             for block in content if block.get("text") or "json" in block]
    return "\n".join(parts)


async def store_blocks(storage: AnyStorage, tool_use_id: str, content: list[ToolResultContent],
                       on_stored: Callable[[str], None] | None = None) -> list[Stored | None]:
    """Store each block; ``None`` for a block that is not stored (kept in the result as it is).

    ``on_stored`` hears each reference as soon as its block is stored, so one stored before a later block
    failed is still known (and evicted in time).
    """
    stored: list[Stored | None] = []
    for index, block in enumerate(content):
        payload = _payload(block)
        if payload is None:
            stored.append(None)
            continue
        data, content_type, description = payload
        reference = await store_content(storage, f"{tool_use_id}_{index}", data, content_type)
        if on_stored is not None:
            on_stored(reference)
        stored.append(Stored(reference, description))
    return stored


def _payload(block: ToolResultContent) -> tuple[bytes, str, str] | None:
    """``(bytes, MIME type, description)`` of a block to store, ``None`` for one that stays."""
    if block.get("text"):
        text = block["text"]
        return text.encode("utf-8"), "text/plain", f"text, {len(text):,} chars"
    if "json" in block:
        data = json.dumps(block["json"], indent=2).encode("utf-8")
        return data, "application/json", f"json, {len(data):,} bytes"
    for kind, mime in (("image", "image"), ("document", "application")):
        if kind in block:
            media: Any = block[kind]  # type: ignore[literal-required]
            data = media.get("source", {}).get("bytes", b"")
            if not isinstance(data, bytes | bytearray) or not data:
                return None
            fmt = media.get("format", "unknown")
            label = f"{mime}/{fmt}" if kind == "image" else media.get("name", "unknown")
            return bytes(data), f"{mime}/{fmt}", f"{label}, {len(data):,} bytes"
    return None


def offloaded_result(result: ToolResult, stored: list[Stored | None], *, token_count: int, preview: str,
                     with_tool: bool) -> ToolResult:
    """The result the model sees instead of ``result``: the preview text, placeholders and the kept blocks."""
    content = result["content"]
    references = "\n".join(f"  {entry.reference} ({entry.description})" for entry in stored if entry)
    header = (f"[Offloaded: {len(content)} blocks, ~{token_count:,} tokens]\n"
              "Tool result was offloaded to external storage due to size.\n"
              "Use the preview below if it answers your question.\n"
              f"{_WITH_TOOL if with_tool else _WITHOUT_TOOL}")
    blocks: list[ToolResultContent] = [{"text": f"{header}\n\n{preview}\n\n[Stored references:]\n{references}"}]
    for block, entry in zip(content, stored, strict=True):
        if entry is None:
            if "text" not in block:  # an empty text block adds nothing (Strands drops it too)
                blocks.append(block)
        elif "text" not in block and "json" not in block:
            blocks.append({"text": _placeholder(block, entry.reference)})
    return {"toolUseId": result["toolUseId"], "status": result["status"], "content": blocks}


def _placeholder(block: ToolResultContent, reference: str) -> str:
    kind = "image" if "image" in block else "document"
    media: Any = block[kind]  # type: ignore[literal-required]
    size = len(media.get("source", {}).get("bytes", b""))
    name = f", {media.get('name', 'unknown')}" if kind == "document" else ""
    return f"[{kind}: {media.get('format', 'unknown')}{name}, {size} bytes | ref: {reference}]"


def decode_full(data: bytes, content_type: str, reference: str) -> dict[str, Any] | str:
    """A stored block as the retrieval tool returns it whole: text, or a result with the native block."""
    if content_type.startswith("text/"):
        return data.decode("utf-8")
    block: dict[str, Any]
    if content_type == "application/json":
        block = {"json": json.loads(data)}
    elif content_type.startswith("image/"):
        block = {"image": {"format": content_type.split("/")[-1], "source": {"bytes": data}}}
    elif content_type.startswith("application/"):
        block = {"document": {"format": content_type.split("/")[-1], "name": reference, "source": {"bytes": data}}}
    else:
        return data.decode("utf-8", errors="replace")
    return {"status": "success", "content": [block]}
