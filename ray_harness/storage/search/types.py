"""The ``SearchStrategy`` protocol: how a storage backend's ``search`` is done, swappable per backend."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from typing_extensions import TypeVar

from ray_harness.storage.storage import Storage, StorageSearchResult

__all__ = ("SandboxSafeSearchStrategy", "SearchStrategy")

S = TypeVar("S", bound=Storage[Any, Any], default=Storage, contravariant=True)


class SearchStrategy(Protocol[S]):
    """One way of searching stored content: a keyword scan, a full-text index, vector similarity, ...

    A backend given a strategy calls ``index`` after each ``write`` and hands ``search`` to it. ``S`` is the
    storage type the strategy works with (any ``Storage`` by default; ``Bm25SearchStrategy`` needs a
    ``LocalFileStorage`` for its ``base_dir``).
    """

    async def index(self, storage: S, key: str, data: bytes, **kwargs: Any) -> None:
        """Take note of one entry just written (a strategy that scans on demand does nothing).

        ``key`` is relative to ``storage``, and the namespaces of one backend share its strategy: the same key
        can name different entries (``x.md`` in two namespaces), and one entry can arrive under two keys
        (``a/x.md`` through the parent, ``x.md`` through ``namespace("a")``). A strategy keeping an index keys
        it by where the entry lives (``LocalFileStorage.base_dir`` and the key), not by the key alone.
        """
        ...

    async def search(self, storage: S, query: str, **kwargs: Any) -> list[StorageSearchResult]:
        """The entries of ``storage`` matching ``query``, best first."""
        ...


class SandboxSafeSearchStrategy(Protocol[S]):
    """A strategy that touches only the ``Storage`` API, so it works when the storage runs through a sandbox.

    Declare ``requires_host_fs: Literal[False] = False`` on the class; one keeping files on this host (an
    index) declares ``True`` and is refused by a sandboxed ``LocalFileStorage``.
    """

    requires_host_fs: Literal[False]

    async def index(self, storage: S, key: str, data: bytes, **kwargs: Any) -> None:
        """As :meth:`SearchStrategy.index`."""
        ...

    async def search(self, storage: S, query: str, **kwargs: Any) -> list[StorageSearchResult]:
        """As :meth:`SearchStrategy.search`."""
        ...
