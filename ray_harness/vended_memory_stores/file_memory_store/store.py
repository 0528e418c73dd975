"""``FileMemoryStore``: one markdown file per topic; ``add`` files content under the slug of its first line.

Search is the storage backend's own ``search`` (keyword scoring over key and content by default). With extraction
on and no extractor given, a :class:`~ray_harness.memory.ModelExtractor` is told the existing topics, so new facts
join the file of their topic instead of starting another.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

from typing_extensions import Unpack

from ray_harness.memory.extraction.model_extractor import ModelExtractor
from ray_harness.memory.extraction.types import ExtractionConfig, ExtractionResult, ExtractorContext
from ray_harness.memory.types import MemoryEntry, MemoryStore, Metadata, SearchOptions
from ray_harness.storage import LocalFileStorage
from ray_harness.storage.storage import normalize_key, resolve_namespace
from ray_harness.types.content import Message
from ray_harness.types.exceptions import StorageError
from ray_harness.vended_memory_stores.file_memory_store.types import FileMemoryStoreConfig

__all__ = ("FileMemoryStore",)

logger = logging.getLogger(__name__)

_FRAMING = "You extract durable facts worth remembering across future conversations from a transcript."
_LAYOUT = (
    "Group related facts into a single entry. The first line is a markdown heading"
    ' (e.g. "# User preferences", "# Project setup", "# Team conventions").'
    " Put each fact on its own line below the heading."
)
_DEFAULT_MAX_SEARCH_RESULTS = 10
_NAMESPACE = "memory"
_MAX_SLUG = 50


def _slug(text: str) -> str:
    """``text`` in kebab case, letters and digits only, at most 50 characters."""
    slug = re.sub(r"\s+", "-", re.sub(r"[^a-z0-9\s-]", "", text.lower()).strip())
    return slug[:_MAX_SLUG].rstrip("-")


def _topic(key: str) -> str:
    return key.rsplit("/", maxsplit=1)[-1].removesuffix(".md").replace("-", " ")


class TopicAwareExtractor:
    """A :class:`ModelExtractor` told the store's existing topics, so it reuses their headings.

    An object holding the storage (not a closure): the store, and so the agent, pickles.
    """

    def __init__(self, storage: Any) -> None:
        self.storage = storage

    async def extract(self, messages: list[Message], context: ExtractorContext | None = None
                      ) -> list[ExtractionResult]:
        """The facts of ``messages``, grouped under topic headings."""
        topics = [_topic(key) for key in await self.storage.list("")]
        prompt = f"{_FRAMING}\n\n{_LAYOUT}"
        if topics:
            prompt += (f"\n\nExisting topics: {', '.join(topics)}. "
                       "Reuse an existing topic heading when new facts belong to it.")
        return await ModelExtractor(system_prompt=prompt).extract(messages, context)


class FileMemoryStore(MemoryStore):
    """A memory store of markdown topic files on a storage backend; writable by default.

    Args:
        **config: :class:`FileMemoryStoreConfig`: ``name`` (required), ``description``, ``max_search_results``,
            ``writable``, ``extraction``, ``storage``.

    Example:
        ```python
        from ray_harness import Agent
        from ray_harness.memory import MemoryManager
        from ray_harness.vended_memory_stores.file_memory_store import FileMemoryStore

        agent = Agent(model, memory_manager=MemoryManager(stores=[FileMemoryStore(name="agent-memory")],
                                                          injection=False))
        ```
    """

    def __init__(self, **config: Unpack[FileMemoryStoreConfig]) -> None:
        self.name: str = config["name"]
        self.writable: bool = config.get("writable", True)
        self.description: str | None = config.get("description")
        self.max_search_results: int | None = config.get("max_search_results")
        self._storage: Any = resolve_namespace(config.get("storage") or LocalFileStorage(), f"{_NAMESPACE}/{self.name}")
        self.extraction: ExtractionConfig | bool | None = self._extraction(config.get("extraction"))
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lock"] = state["_lock_loop"] = None  # a lock belongs to its event loop
        return state

    def _extraction(self, given: ExtractionConfig | bool | None) -> ExtractionConfig | bool | None:
        """``True`` or a config without an extractor: the topic-aware extractor, the other fields kept."""
        if given is None or given is False:
            return given
        if given is True:
            return ExtractionConfig(extractor=TopicAwareExtractor(self._storage))
        if given.get("extractor") is None:
            return ExtractionConfig(**{**given, "extractor": TopicAwareExtractor(self._storage)})
        return given

    async def search(self, query: str, options: SearchOptions | None = None) -> list[MemoryEntry]:
        """The topic files matching ``query``, best first (``metadata``: ``path`` and ``score``); unreadable ones skipped.

        Raises:
            ValueError: ``max_search_results`` below 1.
        """
        asked = options.get("max_search_results") if options else None
        if asked is not None and asked < 1:
            raise ValueError("max_search_results must be >= 1")
        limit = asked if asked is not None else self.max_search_results or _DEFAULT_MAX_SEARCH_RESULTS
        entries: list[MemoryEntry] = []
        for hit in await self._storage.search(query):
            if len(entries) >= limit:  # an unreadable hit gives its place to the next one
                break
            data = hit.data
            if data is None:
                try:
                    data = await self._storage.read(hit.key)
                except StorageError as error:
                    logger.debug("key=<%s>, error=<%s> | skipped unreadable memory entry", hit.key, error)
                    continue
            if data is not None:
                entries.append(MemoryEntry(content=data.decode("utf-8", errors="replace").strip(),
                                           metadata={"path": hit.key, "score": hit.score}))
        return entries

    async def add(self, content: str, metadata: Metadata | None = None) -> str:
        """File ``content`` under the slug of its first line; an existing topic gets the lines after the heading.

        Args:
            content: The entry; its first line (a markdown heading or not) names the topic.
            metadata: Not stored (accepted for the protocol).

        Returns:
            The key written.
        """
        lines = content.split("\n")
        slug = _slug(re.sub(r"^#+\s*", "", lines[0])) or f"entry-{int(time.time() * 1000)}"
        key = normalize_key(f"{slug}.md").lower()
        async with self._write_lock():
            existing = await self._storage.read(key)
            if existing:
                facts = "\n".join(lines[1:]).strip()
                old = existing.decode("utf-8", errors="replace")
                merged = f"{old.rstrip()}\n{facts}" if facts else old
            else:
                merged = content
            await self._storage.write(key, merged.encode("utf-8"))
        return key

    def _write_lock(self) -> asyncio.Lock:
        # One lock per event loop: each sync agent call runs its own loop, and a lock is bound to the first it meets.
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock
