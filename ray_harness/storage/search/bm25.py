"""BM25 search over a SQLite FTS5 index kept next to a ``LocalFileStorage`` directory.

The index is built at write time (the storage calls :meth:`Bm25SearchStrategy.index` after each write), so a
search reads no entries; what was stored before the strategy was attached is not in it. Ranking is SQLite's
``bm25()`` (term frequency, inverse document frequency, length normalisation), mapped into ``0 < score < 1``.
Only the standard library is needed (``sqlite3`` with FTS5, as every current Python build has).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ray_harness.storage.search.keyword import STOP_WORDS, tokenize
from ray_harness.storage.storage import StorageSearchResult

if TYPE_CHECKING:
    from ray_harness.storage.local_file_storage import LocalFileStorage

__all__ = ("Bm25SearchStrategy", "Bm25SearchStrategyConfig")

_INDEX_FILE = ".__ray_harness_{name}-fts5.sqlite"
"""The default index of a directory, beside it (hidden and internal, so listings skip it)."""

_SCHEMA = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS entries USING fts5(key, body)",
    "CREATE TABLE IF NOT EXISTS digests (key TEXT PRIMARY KEY, digest TEXT NOT NULL)",
)


def _match_expression(query: str) -> str | None:
    """The FTS5 query: every meaningful word of ``query`` as a prefix, all required; ``None`` if none is left."""
    words = sorted(word for word in tokenize(query) - STOP_WORDS if len(word) > 1)
    return " ".join(f'"{word}"*' for word in words) or None


@dataclass
class Bm25SearchStrategyConfig:
    """Settings of :class:`Bm25SearchStrategy`.

    Attributes:
        db_path: The SQLite file of the index. By default each storage directory gets its own,
            ``.__ray_harness_<dir>-fts5.sqlite`` beside it; a set ``db_path`` holds one directory's index, and
            using the strategy with a second directory then raises ``ValueError``.
    """

    db_path: str | None = None

    def __post_init__(self) -> None:
        if self.db_path is not None and (not isinstance(self.db_path, str | os.PathLike) or not str(self.db_path)):
            raise ValueError(f"db_path must be a non-empty path or None, got {self.db_path!r}")


class Bm25SearchStrategy:
    """Full-text BM25 search for :class:`~ray_harness.storage.LocalFileStorage`, indexed as entries are written.

    One index per storage directory, so one strategy can serve several namespaces of a storage (several memory
    stores on one ``LocalFileStorage``); :meth:`close` closes them all. The index lives on this host's file
    system: a sandboxed ``LocalFileStorage`` refuses the strategy (``requires_host_fs``). Entries whose last key
    segment starts with ``.`` are not indexed, and re-writing unchanged bytes does not re-index.

    Example::

        storage = LocalFileStorage("./memory/", search_strategy=Bm25SearchStrategy())
        await storage.write("auth.md", b"OAuth2 authentication flow")
        results = await storage.search("authentication flow")

    Args:
        config: Its settings (see :class:`Bm25SearchStrategyConfig`).

    Raises:
        TypeError: ``config`` is not a ``Bm25SearchStrategyConfig``.
    """

    requires_host_fs: Literal[True] = True

    def __init__(self, config: Bm25SearchStrategyConfig | None = None) -> None:
        if config is not None and not isinstance(config, Bm25SearchStrategyConfig):
            raise TypeError(f"config must be a Bm25SearchStrategyConfig, got {type(config).__name__}")
        self._config = config or Bm25SearchStrategyConfig()
        self._connections: dict[str, sqlite3.Connection] = {}  # absolute storage directory -> its index
        # A thread lock taken in the worker thread: it serialises SQLite use without tying the strategy to
        # one event loop.
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Connections and locks are per process: a pickled copy opens the same index files again on use.
        return {"_config": self._config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_config"])  # type: ignore[misc]

    async def index(self, storage: LocalFileStorage, key: str, data: bytes, **kwargs: Any) -> None:
        """Add or replace the entry ``key`` of ``storage`` in its directory's index."""
        if key.rpartition("/")[2].startswith("."):
            return
        directory = _directory(storage)
        body = data.decode("utf-8", errors="replace")
        digest = hashlib.sha256(data).hexdigest()
        await asyncio.to_thread(self._locked, directory, _upsert, key, body, digest)

    async def search(self, storage: LocalFileStorage, query: str, **kwargs: Any) -> list[StorageSearchResult]:
        """The indexed entries of ``storage`` containing every meaningful word of ``query`` (as prefixes).

        Raises:
            RuntimeError: This SQLite has no FTS5.
            ValueError: A configured ``db_path`` already indexes another directory.
        """
        if not isinstance(query, str):
            raise TypeError(f"search query must be a str, got {type(query).__name__}")
        expression = _match_expression(query)
        if expression is None:
            return []
        hits: list[StorageSearchResult] = await asyncio.to_thread(self._locked, _directory(storage), _query,
                                                                   expression)
        return hits

    async def close(self) -> None:
        """Close every index this strategy opened (using it again reopens them)."""
        await asyncio.to_thread(self._close_all)

    def _close_all(self) -> None:
        with self._lock:
            connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            connection.close()

    def _locked(self, directory: str, operation: Any, *args: Any) -> Any:
        with self._lock:
            return operation(self._connection(directory), *args)

    def _connection(self, directory: str) -> sqlite3.Connection:
        """The open index of ``directory`` (called with the lock held)."""
        connection = self._connections.get(directory)
        if connection is not None:
            return connection
        db_path = self._config.db_path
        if db_path is not None and self._connections:
            indexed = next(iter(self._connections))
            raise ValueError(f"Bm25SearchStrategy db_path {str(db_path)!r} already indexes {indexed!r} and cannot "
                             f"also index {directory!r}; leave db_path unset for an index per directory, or use "
                             "one strategy per storage")
        os.makedirs(directory, exist_ok=True)
        if db_path is None:
            parent, name = os.path.split(directory)
            db_path = os.path.join(parent, _INDEX_FILE.format(name=name))
        connection = sqlite3.connect(db_path, check_same_thread=False)
        try:
            for statement in _SCHEMA:
                connection.execute(statement)
        except sqlite3.OperationalError as error:
            connection.close()
            raise RuntimeError(f"SQLite build lacks FTS5 support ({error})") from error
        connection.commit()
        self._connections[directory] = connection
        return connection


def _directory(storage: LocalFileStorage) -> str:
    base_dir = getattr(storage, "base_dir", None)
    if not isinstance(base_dir, str):
        raise TypeError(f"Bm25SearchStrategy needs a storage with a base_dir (a LocalFileStorage), got "
                        f"{type(storage).__name__}")
    return os.path.abspath(base_dir)


def _upsert(connection: sqlite3.Connection, key: str, body: str, digest: str) -> None:
    row = connection.execute("SELECT digest FROM digests WHERE key = ?", (key,)).fetchone()
    if row is not None and row[0] == digest:
        return  # unchanged: re-indexing would only cost time
    with connection:
        connection.execute("DELETE FROM entries WHERE key = ?", (key,))
        connection.execute("INSERT INTO entries (key, body) VALUES (?, ?)", (key, body))
        connection.execute("INSERT OR REPLACE INTO digests (key, digest) VALUES (?, ?)", (key, digest))


def _query(connection: sqlite3.Connection, expression: str) -> list[StorageSearchResult]:
    rows = connection.execute("SELECT key, bm25(entries) FROM entries WHERE entries MATCH ? ORDER BY 2",
                              (expression,)).fetchall()
    # bm25() is negative, more negative is better: |rank| / (1 + |rank|) keeps the order within (0, 1).
    return [StorageSearchResult(key, abs(rank) / (1.0 + abs(rank))) for key, rank in rows]
