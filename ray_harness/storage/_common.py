"""What the shipped backends share: argument checks, strategy delegation, and the process-local lock."""

from __future__ import annotations

import builtins
import threading
from typing import Any

from ray_harness.storage.storage import StorageSearchResult
from ray_harness.types.exceptions import StorageError


def check_data(data: object) -> bytes:
    """``data`` as ``bytes``; a ``bytearray`` or ``memoryview`` is copied, anything else refused."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"storage data must be bytes, got {type(data).__name__}")


def check_strategy(strategy: object) -> None:
    if strategy is not None and not (callable(getattr(strategy, "index", None))
                                     and callable(getattr(strategy, "search", None))):
        raise TypeError(f"search_strategy must have index() and search() methods, got {type(strategy).__name__}")


async def index_written(storage: Any, strategy: Any, raw_key: str, key: str, data: bytes) -> None:
    """Let ``strategy`` index an entry just written; its failure is the write's (the bytes are stored)."""
    if strategy is None:
        return
    try:
        await strategy.index(storage, key, data)
    except Exception as error:
        raise StorageError(f"Wrote '{raw_key}' but indexing failed") from error


async def search_with(storage: Any, strategy: Any, query: str) -> builtins.list[StorageSearchResult]:
    """``strategy``'s search of ``storage``, keyword scoring when there is none."""
    if strategy is None:
        from ray_harness.storage.search.keyword import KeywordSearchStrategy

        strategy = KeywordSearchStrategy()
    hits: builtins.list[StorageSearchResult] = await strategy.search(storage, query)
    return hits


class Shelf:
    """A dict of entries and its lock, shared by a storage and its namespaces; the lock is made per process."""

    def __init__(self) -> None:
        self.entries: dict[str, bytes] = {}
        self.lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        with self.lock:
            return {"entries": dict(self.entries)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.entries = state["entries"]
        self.lock = threading.Lock()
