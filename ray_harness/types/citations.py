"""Citations: where a cited answer's text comes from (Bedrock's shapes, as Strands' ``strands.types.citations``).

A ``citationsContent`` block holds the generated ``content`` and the ``citations`` that support it; each citation
names its source document and a ``location`` in it, one of five tagged forms (``{"documentChar": {...}}``, ...).
"""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

__all__ = (
    "Citation",
    "CitationGeneratedContent",
    "CitationLocation",
    "CitationSourceContent",
    "CitationsConfig",
    "CitationsContentBlock",
    "DocumentCharLocation",
    "DocumentCharLocationDict",
    "DocumentChunkLocation",
    "DocumentChunkLocationDict",
    "DocumentPageLocation",
    "DocumentPageLocationDict",
    "SearchResultLocation",
    "SearchResultLocationDict",
    "WebLocation",
    "WebLocationDict",
)


class CitationsConfig(TypedDict):
    """A document's ``citations`` setting: ``{"enabled": True}`` asks the model to cite it."""

    enabled: bool


class _DocumentRange(TypedDict, total=False):
    documentIndex: int
    start: int
    end: int


class DocumentCharLocation(_DocumentRange, total=False):
    """Characters ``start`` to ``end`` of the request's document number ``documentIndex``."""


class DocumentChunkLocation(_DocumentRange, total=False):
    """Chunks ``start`` to ``end`` of the request's document number ``documentIndex``."""


class DocumentPageLocation(_DocumentRange, total=False):
    """Pages ``start`` to ``end`` of the request's document number ``documentIndex``."""


class SearchResultLocation(TypedDict, total=False):
    """Blocks ``start`` to ``end`` of the search result block number ``searchResultIndex``."""

    searchResultIndex: int
    start: int
    end: int


class WebLocation(TypedDict, total=False):
    """A cited web page: its ``url`` and ``domain``."""

    url: str
    domain: str


DocumentCharLocationDict = dict[Literal["documentChar"], DocumentCharLocation]
DocumentPageLocationDict = dict[Literal["documentPage"], DocumentPageLocation]
DocumentChunkLocationDict = dict[Literal["documentChunk"], DocumentChunkLocation]
SearchResultLocationDict = dict[Literal["searchResultLocation"], SearchResultLocation]
WebLocationDict = dict[Literal["web"], WebLocation]

CitationLocation = (DocumentCharLocationDict | DocumentPageLocationDict | DocumentChunkLocationDict
                    | SearchResultLocationDict | WebLocationDict)
"""Where cited text is: one key naming the kind of location, its value the location."""


class CitationSourceContent(TypedDict, total=False):
    """The cited text of the source."""

    text: str


class CitationGeneratedContent(TypedDict, total=False):
    """Generated text that a citation supports."""

    text: str


class Citation(TypedDict, total=False):
    """One citation: the source's ``title``, the ``location`` in it, and the cited ``sourceContent``."""

    location: CitationLocation
    sourceContent: list[CitationSourceContent]
    title: str


class CitationsContentBlock(TypedDict, total=False):
    """The value of a ``citationsContent`` block: generated ``content`` and the ``citations`` behind it."""

    citations: list[Citation]
    content: list[CitationGeneratedContent]
