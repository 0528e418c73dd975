"""``InMemoryStorage``: entries in a dict of this process, for tests and short-lived programs."""

from __future__ import annotations

import builtins
import copy
from typing import TYPE_CHECKING

from ray_harness.storage._common import Shelf, check_data, check_strategy, index_written, search_with
from ray_harness.storage.storage import _EPHEMERAL, _NAMESPACED, _normalize_key, _normalize_prefix, _scope

if TYPE_CHECKING:
    from ray_harness.storage.search.types import SearchStrategy
    from ray_harness.storage.storage import StorageSearchResult

__all__ = ("InMemoryStorage",)


class InMemoryStorage:
    """Entries in memory: gone when the process ends, and never evicted (the user of the storage decides).

    A pickled copy (an agent shipped to a Ray host) carries the entries with it; from then on the copy and the
    original are separate stores.

    Example::

        storage = InMemoryStorage()
        await storage.write("sessions/abc/state.json", b'{"messages": []}')
        data = await storage.read("sessions/abc/state.json")

    Args:
        search_strategy: What ``search`` uses (default: keyword scoring); each ``write`` is indexed by it.

    Raises:
        TypeError: ``search_strategy`` has no ``index``/``search`` methods.
    """

    _ephemeral = _EPHEMERAL

    def __init__(self, *, search_strategy: SearchStrategy[InMemoryStorage] | None = None) -> None:
        check_strategy(search_strategy)
        self._shelf = Shelf()  # shared with every namespace of this storage; each sees its own prefix only
        self._prefix = ""
        self._search_strategy = search_strategy

    async def write(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key``, replacing what was there.

        Raises:
            StorageError: The key is invalid, or the search strategy failed to index it (the bytes are kept).
        """
        normalized = _normalize_key(key)
        value = check_data(data)
        with self._shelf.lock:
            self._shelf.entries[self._prefix + normalized] = value
        await index_written(self, self._search_strategy, key, normalized, value)

    async def read(self, key: str) -> bytes | None:
        """The bytes under ``key``, or ``None``. Raises ``StorageError`` for an invalid key."""
        full = self._prefix + _normalize_key(key)
        with self._shelf.lock:
            return self._shelf.entries.get(full)

    async def delete(self, key: str) -> None:
        """Forget ``key`` (nothing happens if it is missing). Raises ``StorageError`` for an invalid key."""
        full = self._prefix + _normalize_key(key)
        with self._shelf.lock:
            self._shelf.entries.pop(full, None)

    async def list(self, query: str = "") -> builtins.list[str]:
        """The keys starting with the prefix ``query`` (all for ``""``), sorted."""
        wanted = self._prefix + _normalize_prefix(query)
        cut = len(self._prefix)
        with self._shelf.lock:
            return sorted(key[cut:] for key in self._shelf.entries if key.startswith(wanted))

    async def search(self, query: str) -> builtins.list[StorageSearchResult]:
        """The entries ranked for ``query`` by the search strategy (keyword scoring by default)."""
        return await search_with(self, self._search_strategy, query)

    def namespace(self, prefix: str) -> InMemoryStorage:
        """This storage's entries under ``prefix``, keys relative to it; the entries and strategy are shared.

        Its ``search`` sees only entries under the prefix and scores their keys without it. A shared strategy
        that keeps an index gets keys relative to the prefix (see ``SearchStrategy.index``).
        """
        # A shallow copy keeps a subclass's type and attributes and shares the shelf and the strategy.
        scoped = copy.copy(self)
        scoped._prefix = self._prefix + _scope(prefix)
        scoped._namespaced = _NAMESPACED  # type: ignore[attr-defined]
        return scoped

    def clear(self) -> None:
        """Remove every entry this storage sees: all of them, or those under its namespace."""
        with self._shelf.lock:
            if not self._prefix:
                self._shelf.entries.clear()
                return
            for key in [key for key in self._shelf.entries if key.startswith(self._prefix)]:
                del self._shelf.entries[key]

    def __repr__(self) -> str:
        scope = f"namespace={self._prefix!r}, " if self._prefix else ""
        with self._shelf.lock:
            return f"InMemoryStorage({scope}entries={len(self._shelf.entries)})"
