"""Translate between MCP types and ray_harness's Converse-style tool specs and results.

MCP content maps onto Converse tool-result blocks: text → ``{"text"}``, image →
``{"image": {"format", "source": {"bytes"}}}``, embedded resources → text,
image or document blocks by MIME type, and ``structuredContent`` → an added
``{"json"}`` block. Content Converse cannot carry (audio, exotic MIME types)
becomes a short text note, so the model still learns that something came back.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

import mcp_types

from ray_harness.types.content import ToolResult, ToolResultContent
from ray_harness.types.tools import ToolSpec

__all__ = ("published_names", "to_tool_result", "to_tool_spec")

# What model providers accept as a tool name (Bedrock, OpenAI, Anthropic); MCP also allows dots and 128 chars.
_PROVIDER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NOT_NAME_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64
_DIGEST_CHARS = 8

# Converse image formats, keyed by MIME subtype.
_IMAGE_FORMATS = {"png": "png", "jpeg": "jpeg", "jpg": "jpeg", "gif": "gif", "webp": "webp"}
# Converse document formats, keyed by MIME type.
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}


def published_names(server_names: list[str], prefix: str | None) -> list[str]:
    """The names the agent publishes for the server's tools: ``<prefix>_<name>``, made acceptable to providers.

    A name a provider would refuse (a dot or space, more than 64 characters) gets ``_`` for each other
    character and, when too long or when that collides with another tool's name, a short digest of the
    original so it stays unique. Valid names are kept as they are; calls still use the server's own name.
    """
    wanted = [f"{prefix}_{name}" if prefix else name for name in server_names]
    valid = {name for name in wanted if _PROVIDER_NAME.match(name)}
    published: list[str] = []
    for name in wanted:
        if name in valid:
            published.append(name)
            continue
        cleaned = _NOT_NAME_CHAR.sub("_", name)
        if len(cleaned) > _MAX_NAME or not cleaned or cleaned in valid or cleaned in published:
            digest = hashlib.sha256(name.encode()).hexdigest()[:_DIGEST_CHARS]
            cleaned = f"{cleaned[:_MAX_NAME - _DIGEST_CHARS - 1]}_{digest}"
        published.append(cleaned)
    return published


def to_tool_spec(tool: mcp_types.Tool, name: str) -> ToolSpec:
    """The agent-facing spec of an MCP tool, published under ``name`` (the prefixed name)."""
    schema: dict[str, Any] = dict(tool.input_schema) if tool.input_schema else {"type": "object", "properties": {}}
    return {
        "name": name,
        "description": tool.description or tool.title or tool.name,
        "inputSchema": {"json": schema},
    }


def to_tool_result(tool_use_id: str, result: mcp_types.CallToolResult) -> ToolResult:
    """Convert a ``tools/call`` result; ``isError`` becomes status ``"error"``."""
    content: list[ToolResultContent] = [_block(item) for item in result.content]
    if result.structured_content is not None:
        content.append({"json": result.structured_content})
    return {"toolUseId": tool_use_id, "status": "error" if result.is_error else "success", "content": content}


def _block(item: mcp_types.ContentBlock) -> ToolResultContent:
    if isinstance(item, mcp_types.TextContent):
        return {"text": item.text}
    if isinstance(item, mcp_types.ImageContent):
        return _binary_block(item.data, item.mime_type, name="image")
    if isinstance(item, mcp_types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return {"text": resource.text}
        return _binary_block(resource.blob, resource.mime_type or "application/octet-stream", name=str(resource.uri))
    if isinstance(item, mcp_types.ResourceLink):
        return {"text": f"[resource link: {item.name} <{item.uri}>]"}
    if isinstance(item, mcp_types.AudioContent):
        return {"text": f"[audio content ({item.mime_type}) not shown: tool results cannot carry audio]"}
    return {"text": f"[unsupported MCP content type {getattr(item, 'type', type(item).__name__)!r}]"}


def _binary_block(data: str, mime_type: str, *, name: str) -> ToolResultContent:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return {"text": f"[{mime_type} content not shown: its base64 data is invalid]"}
    major, _, subtype = mime_type.lower().partition("/")
    subtype = subtype.split(";", 1)[0].strip()
    if major == "image" and subtype in _IMAGE_FORMATS:
        return {"image": {"format": _IMAGE_FORMATS[subtype], "source": {"bytes": raw}}}
    document_format = _DOCUMENT_FORMATS.get(f"{major}/{subtype}")
    if document_format is not None:
        return {"document": {"format": document_format, "name": _document_name(name), "source": {"bytes": raw}}}
    return {"text": f"[{mime_type} content ({len(raw)} bytes) not shown: unsupported type]"}


def _document_name(uri: str) -> str:
    # Converse document names allow only a small character set; keep the last path segment's safe part.
    tail = uri.rstrip("/").rsplit("/", 1)[-1] or "document"
    cleaned = "".join(ch if ch.isalnum() or ch in " -()[]" else "-" for ch in tail)
    return cleaned[:200] or "document"
