"""Keyword search: an entry scores the number of distinct query words found in its key and content.

No index and no model: the strategy lists the storage and reads its entries (a few at a time, so a remote
backend such as S3 is not flooded). The key's file extension is left out of scoring, so ``md`` does not match
every ``.md`` entry, and common English words in the query are ignored.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import re
from typing import Any, Literal

from ray_harness.storage.storage import Storage, StorageSearchResult
from ray_harness.types.exceptions import StorageError

__all__ = ("STOP_WORDS", "KeywordSearchStrategy", "token_overlap_score", "tokenize")

logger = logging.getLogger(__name__)

_STOP_WORDS = """
    a about above after again all although an and any are as at be because been before being below between both
    but by can could dare did do does during each either every few for from further had has have he her him his
    how i if in into is it its just may me might more most my need neither no nor not of off on once only or
    other ought our out over own same shall she should since so some such than that the their them then these
    they this those though through to too under unless until up us used very was we were what when where which
    while who whom why will with would yet you your
"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORDS.split())
"""Words dropped from a query before matching (Strands' list, so both rank alike)."""

_BATCH = 8
"""Entries read at once during a scan."""

_WORD = re.compile(r"\w+")


def tokenize(text: str) -> set[str]:
    """The distinct lowercased words of ``text``: runs of Unicode letters, digits and ``_``."""
    return set(_WORD.findall(text.lower()))


def token_overlap_score(query_tokens: set[str], content: str) -> int:
    """How many of ``query_tokens`` occur in ``content`` (0 for none)."""
    return len(query_tokens & tokenize(content))


def _without_extension(key: str) -> str:
    """``key`` minus the extension of its last segment (a leading dot, as in ``.env``, is not one)."""
    head, slash, name = key.rpartition("/")
    dot = name.rfind(".")
    return f"{head}{slash}{name[:dot]}" if dot > 0 else key


class KeywordSearchStrategy:
    """Rank entries by how many distinct query words (stop words aside) their key and content contain.

    Works on any storage with ``list`` and ``read``; the default of every shipped backend. Each hit carries
    the bytes read for it; an entry whose ``read`` raises ``StorageError`` is skipped.

    Example::

        results = await KeywordSearchStrategy().search(storage, "dark mode toggle")
    """

    requires_host_fs: Literal[False] = False

    async def index(self, storage: Storage[Any, Any], key: str, data: bytes, **kwargs: Any) -> None:
        """Nothing to do: the scan reads the storage at search time."""

    async def search(self, storage: Storage[Any, Any], query: str,
                     **kwargs: Any) -> builtins.list[StorageSearchResult]:
        """The entries sharing at least one word with ``query``, most shared words first."""
        if not isinstance(query, str):
            raise TypeError(f"search query must be a str, got {type(query).__name__}")
        wanted = tokenize(query) - STOP_WORDS
        if not wanted:
            return []
        keys = await storage.list("")
        hits: builtins.list[StorageSearchResult] = []
        for start in range(0, len(keys), _BATCH):
            batch = keys[start:start + _BATCH]
            for key, data in zip(batch, await asyncio.gather(*(_read(storage, key) for key in batch)), strict=True):
                if data is None:
                    continue
                text = f"{_without_extension(key)} {data.decode('utf-8', errors='replace')}"
                score = token_overlap_score(wanted, text)
                if score:
                    hits.append(StorageSearchResult(key, score, data))
        hits.sort(key=lambda hit: hit.score, reverse=True)  # stable: equal scores keep key order
        return hits


async def _read(storage: Storage[Any, Any], key: str) -> bytes | None:
    """The entry, or ``None`` when it cannot be read: one bad entry does not fail the search."""
    try:
        return await storage.read(key)
    except StorageError as error:
        logger.debug("key=<%s>, error=<%s> | skipped unreadable entry", key, error)
        return None
