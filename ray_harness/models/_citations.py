"""Citations as Strands carries them: ``{"citation": ...}`` stream deltas and ``citationsContent`` blocks.

A citation delta arrives inside a text block; the agent keeps the block as ``{"citationsContent": {"citations":
[...], "content": [{"text": ...}]}}``. A citation is Bedrock's shape: ``location`` (one of ``documentChar``,
``documentPage``, ``documentChunk``, ``searchResultLocation``, ``web``), ``sourceContent`` (the cited texts) and
``title``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

__all__ = ("anthropic_citation", "bedrock_citations_block", "citation_deltas")

logger = logging.getLogger(__name__)

# Anthropic location type -> (our location key, its index field, its start field, its end field).
_ANTHROPIC_LOCATIONS = {
    "search_result_location": ("searchResultLocation", "searchResultIndex", "search_result_index",
                               "start_block_index", "end_block_index"),
    "char_location": ("documentChar", "documentIndex", "document_index", "start_char_index", "end_char_index"),
    "page_location": ("documentPage", "documentIndex", "document_index", "start_page_number", "end_page_number"),
    "content_block_location": ("documentChunk", "documentIndex", "document_index", "start_block_index",
                               "end_block_index"),
}


def anthropic_citation(citation: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic ``citations_delta`` citation in Bedrock's shape (Strands' ``_format_citation``)."""
    formatted: dict[str, Any] = {}
    if title := citation.get("title") or citation.get("document_title"):
        formatted["title"] = title
    if cited_text := citation.get("cited_text"):
        formatted["sourceContent"] = [{"text": cited_text}]
    kind = citation.get("type")
    if kind == "web_search_result_location":
        url = citation.get("url") or ""
        web = {"url": url}
        if domain := urlparse(url).hostname:
            web["domain"] = domain
        formatted["location"] = {"web": web}
    elif kind in _ANTHROPIC_LOCATIONS:
        key, index_name, index_field, start_field, end_field = _ANTHROPIC_LOCATIONS[kind]
        formatted["location"] = {key: {index_name: citation.get(index_field, 0), "start": citation.get(start_field, 0),
                                       "end": citation.get(end_field, 0)}}
    else:
        logger.warning("citation_type=<%s> | unsupported citation location | skipping", kind)
    return formatted


def bedrock_citations_block(block: dict[str, Any]) -> dict[str, Any]:
    """A ``citationsContent`` block with only the fields Converse accepts back (as Strands sends it)."""
    result: dict[str, Any] = {}
    if "citations" in block:
        result["citations"] = [_bedrock_citation(citation) for citation in block["citations"]]
    texts = [{"text": part["text"]} for part in block.get("content", []) if "text" in part]
    if texts:
        result["content"] = texts
    return {"citationsContent": result}


def _bedrock_citation(citation: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    if "location" in citation:
        kept["location"] = citation["location"]
    sources = [{"text": source["text"]} for source in citation.get("sourceContent", []) if "text" in source]
    if sources:
        kept["sourceContent"] = sources
    if "title" in citation:
        kept["title"] = citation["title"]
    return kept


def citation_deltas(block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The deltas a non-streamed ``citationsContent`` block stands for: its text, then one per citation."""
    if "content" in block:
        yield {"text": "".join(part.get("text", "") for part in block["content"])}
    for citation in block.get("citations", []):
        yield {"citation": {key: citation[key] for key in ("title", "location", "sourceContent") if key in citation}}
