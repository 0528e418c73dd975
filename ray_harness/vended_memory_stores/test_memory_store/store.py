"""``TestMemoryStore``: records in one JSON array, ranked by how many query words they contain.

The file holds Strands' records (``id``, ``content``, optional ``metadata``, ``createdAt`` as a millisecond ISO
time with ``Z``), so a file written by Strands' (Python or TypeScript) ``TestMemoryStore`` reads here and back.
Each ``add`` rewrites the file: fine for hundreds of entries, not for production volumes.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from typing_extensions import Unpack

from ray_harness.memory.types import MemoryEntry, MemoryStore, Metadata, SearchOptions
from ray_harness.storage import InMemoryStorage, LocalFileStorage
from ray_harness.storage.search.keyword import token_overlap_score, tokenize
from ray_harness.vended_memory_stores.test_memory_store.types import TestMemoryAddResult, TestMemoryStoreConfig

__all__ = ("DEFAULT_MAX_SEARCH_RESULTS", "RELEVANCE_SCORE_KEY", "TestMemoryStore")

DEFAULT_MAX_SEARCH_RESULTS = 10
RELEVANCE_SCORE_KEY = "_relevanceScore"
"""The metadata key of a search hit's score (the number of query words it contains); reserved."""


def _now() -> str:
    now = datetime.now(UTC)
    return f"{now.strftime('%Y-%m-%dT%H:%M:%S')}.{now.microsecond // 1000:03d}Z"


def _file_name(name: str) -> str:
    """``name`` as one safe path segment: no parent references, separators or other unsafe characters."""
    cleaned = name.replace("..", "_").replace("/", "_").replace("\\", "_")
    return re.sub(r"[^\w\-.]", "_", cleaned, flags=re.ASCII) + ".json"


class TestMemoryStore(MemoryStore):
    """A memory store in one JSON file (or in memory), with keyword recall; writable by default.

    Recall is lexical: an entry scores the number of query words its content contains; ties go to the newest.
    Identical content is stored once (extraction may write an entry again). Writes are serialized within one
    event loop, not across processes.

    Args:
        **config: :class:`TestMemoryStoreConfig`: ``name`` (required), ``description``, ``max_search_results``,
            ``writable`` (default ``True``), ``extraction``, ``persist`` (default ``True``), ``path``.

    Raises:
        ValueError: ``name`` or ``path`` is blank, or ``max_search_results`` is below 1.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, **config: Unpack[TestMemoryStoreConfig]) -> None:
        self.name = config["name"]
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("TestMemoryStore: name must not be empty.")
        self.description = config.get("description")
        max_search_results = config.get("max_search_results")
        if max_search_results is not None and max_search_results < 1:
            raise ValueError("TestMemoryStore: max_search_results must be at least 1.")
        self.max_search_results = max_search_results
        self.writable = config.get("writable", True)
        self.extraction = config.get("extraction")
        path = config.get("path")
        if path is not None and not path.strip():
            raise ValueError("TestMemoryStore: path must not be empty.")
        # No I/O here: neither backend touches the file system before the first read or write.
        self._storage: Any
        if not config.get("persist", True):
            self._storage, self._key = InMemoryStorage(), _file_name(self.name)
        elif path is not None:
            self._storage, self._key = LocalFileStorage(str(Path(path).parent)), Path(path).name
        else:
            self._storage = LocalFileStorage(str(Path.home() / ".ray_harness" / "memory"))
            self._key = _file_name(self.name)
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lock"] = state["_lock_loop"] = None  # a lock belongs to its event loop
        return state

    async def search(self, query: str, options: SearchOptions | None = None) -> list[MemoryEntry]:
        """The entries sharing words with ``query``, best first; each carries its score under ``_relevanceScore``.

        Raises:
            ValueError: ``max_search_results`` below 1, or a malformed file.
            StorageError: The file could not be read.
        """
        asked = options.get("max_search_results") if options is not None else None
        if asked is not None and asked < 1:
            raise ValueError("TestMemoryStore: max_search_results must be at least 1.")
        limit = asked or self.max_search_results or DEFAULT_MAX_SEARCH_RESULTS
        words = tokenize(query)
        if not words:
            return []
        scored = [(record, score) for record in await self._read()
                  if (score := token_overlap_score(words, record["content"])) > 0]
        scored.sort(key=lambda pair: (pair[1], pair[0]["createdAt"]), reverse=True)
        return [MemoryEntry(content=record["content"],
                            metadata={**(record.get("metadata") or {}), RELEVANCE_SCORE_KEY: score})
                for record, score in scored[:limit]]

    async def add(self, content: str, metadata: Metadata | None = None) -> TestMemoryAddResult:
        """Store ``content``; content already stored (ignoring outer whitespace) returns the existing record's id.

        Raises:
            ValueError: The store is not writable, ``content`` is blank, or the file is malformed.
            StorageError: The file could not be read or written.
        """
        if not self.writable:
            raise ValueError("TestMemoryStore: store is not writable. Set writable=True in config to enable add().")
        if not content.strip():
            raise ValueError("TestMemoryStore: content must not be empty.")
        async with self._write_lock():  # read-modify-write: two adds must not both start from the same file
            records = await self._read()
            for record in records:
                if record["content"].strip() == content.strip():
                    return TestMemoryAddResult(id=record["id"])
            record = {"id": str(uuid.uuid4()), "content": content, "createdAt": _now()}
            if metadata is not None:
                record["metadata"] = metadata
            data = json.dumps([*records, record], indent=2, ensure_ascii=False).encode("utf-8")
            await self._storage.write(self._key, data)
            return TestMemoryAddResult(id=record["id"])

    def _write_lock(self) -> asyncio.Lock:
        # One lock per event loop: each sync agent call runs its own loop, and a lock is bound to the first it meets.
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def _read(self) -> list[dict[str, Any]]:
        data = await self._storage.read(self._key)
        if data is None:
            return []
        try:
            records = json.loads(data)
        except json.JSONDecodeError as error:
            raise ValueError(f"TestMemoryStore: invalid JSON in {self._key}: {error}") from error
        if not isinstance(records, list):
            raise ValueError(f"TestMemoryStore: invalid backing file {self._key}: expected a JSON array of records")
        for record in records:
            if not (isinstance(record, dict) and all(isinstance(record.get(key), str)
                                                     for key in ("id", "content", "createdAt"))):
                raise ValueError(f"TestMemoryStore: invalid backing file {self._key}: each record must have string "
                                 "'id', 'content', and 'createdAt' fields")
            if record.get("metadata") is not None and not isinstance(record["metadata"], dict):
                raise ValueError(f"TestMemoryStore: invalid backing file {self._key}: a record's 'metadata', when "
                                 "present, must be a JSON object")
        return records
