"""The ``Storage`` protocol, its search result, and the key helpers the shipped backends share.

A storage keeps opaque bytes under string keys: ``write``, ``read`` (``None`` when missing), ``delete`` (a no-op
when missing), ``list`` (full keys under a prefix, sorted) and ``search`` (keys ranked by a query). The shipped
backends read ``/`` as a separator: runs of it collapse, leading and trailing ones go, and a ``..`` segment or a
backslash is refused with :class:`~ray_harness.types.exceptions.StorageError`. A custom backend may use any key
scheme of its own.

``namespace(prefix)`` gives a view under a prefix. A construct that scopes a storage it is given (the context
offloader under ``offloader/``, a memory store under its name) uses :func:`_resolve_namespace`, which leaves a
storage the caller scoped already as it is.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from typing_extensions import TypeVar

from ray_harness.types.exceptions import StorageError

__all__ = ("Storage", "StorageSearchResult", "normalize_key", "normalize_prefix", "resolve_namespace")

ListQuery = TypeVar("ListQuery", default=str, contravariant=True)
SearchQuery = TypeVar("SearchQuery", default=str, contravariant=True)

_NAMESPACED: object = object()
"""Marks a storage as scoped already: constructs that scope a storage leave such a one as it is."""

_EPHEMERAL: object = object()
"""Marks a storage whose data ends with the process (``InMemoryStorage`` and views of it)."""

_SLASHES = re.compile(r"/+")


@dataclass
class StorageSearchResult:
    """One search hit.

    Attributes:
        key: The key of the matched entry, relative to the storage searched.
        score: Relevance, higher is better (a distance-based backend returns a similarity instead).
        data: The entry's bytes, when the search read them anyway.
    """

    key: str
    score: float
    data: bytes | None = field(default=None, repr=False)


def _check_str(value: object, label: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"storage {label} must be a str, got {type(value).__name__}")
    return value


def _check_segments(raw: str, normalized: str, label: str) -> None:
    if "\\" in raw:
        raise StorageError(f"Invalid storage {label} '{raw}': backslashes are not allowed")
    if ".." in normalized.split("/"):
        raise StorageError(f"Invalid storage {label} '{raw}': '..' path segments are not allowed")


def _normalize_key(key: str) -> str:
    """``key`` for a path-based backend: slash runs collapsed, outer slashes stripped.

    Raises:
        StorageError: The key is empty (after stripping), has a backslash, or a ``..`` segment.
        TypeError: The key is not a ``str``.
    """
    _check_str(key, "key")
    normalized = _SLASHES.sub("/", key).strip("/")
    _check_segments(key, normalized, "key")
    if not normalized:
        raise StorageError("Storage key must not be empty")
    return normalized


def _normalize_prefix(prefix: str) -> str:
    """``prefix`` for a path-based listing: slash runs collapsed, leading slashes stripped.

    Empty matches every key. A trailing slash stays: ``"a/"`` matches ``a/x`` but not ``ab``.

    Raises:
        StorageError: The prefix has a backslash or a ``..`` segment.
        TypeError: The prefix is not a ``str``.
    """
    _check_str(prefix, "prefix")
    normalized = _SLASHES.sub("/", prefix).lstrip("/")
    _check_segments(prefix, normalized, "prefix")
    return normalized


def _scope(prefix: str) -> str:
    """The key prefix of a namespace: the normalized ``prefix`` and one ``/``, or ``""`` for none."""
    normalized = _normalize_prefix(prefix).rstrip("/")
    return f"{normalized}/" if normalized else ""


@runtime_checkable
class Storage(Protocol[ListQuery, SearchQuery]):
    """Bytes under string keys; implement it for a backend of your own (the shipped ones are below).

    ``ListQuery`` is what ``list`` takes (a key prefix unless a backend takes a richer query too) and
    ``SearchQuery`` what ``search`` takes (a text query unless a backend takes more, such as a vector). A class
    that subclasses ``Storage`` explicitly inherits the default ``search``: keyword scoring over every entry.
    """

    async def write(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, replacing what was there. Raises ``StorageError`` on failure."""
        ...

    async def read(self, key: str) -> bytes | None:
        """The bytes under ``key``, ``None`` if there are none. Raises ``StorageError`` on other failures."""
        ...

    async def delete(self, key: str) -> None:
        """Remove ``key``; nothing happens if it is missing. Raises ``StorageError`` on failure."""
        ...

    async def list(self, query: ListQuery) -> builtins.list[str]:
        """The full keys starting with the prefix ``query``, sorted; ``""`` lists every key."""
        ...

    async def search(self, query: SearchQuery) -> builtins.list[StorageSearchResult]:
        """Entries ranked best-first for ``query`` (default: keyword token overlap over every entry)."""
        from ray_harness.storage.search.keyword import KeywordSearchStrategy

        return await KeywordSearchStrategy().search(self, query)  # type: ignore[arg-type]


class _NamespacedStorage:
    """A view of any ``Storage`` with every key under a prefix; ``namespace`` on it nests the prefixes.

    For backends without a ``namespace`` of their own. It assumes ``/``-separated keys. Its ``search`` asks
    the whole underlying storage and keeps the hits under the prefix.
    """

    _namespaced = _NAMESPACED

    def __init__(self, storage: Storage[Any, Any], prefix: str) -> None:
        self._storage = storage
        self._prefix = _scope(prefix)
        if getattr(storage, "_ephemeral", None) is _EPHEMERAL:
            self._ephemeral = _EPHEMERAL

    @property
    def prefix(self) -> str:
        """The prefix this view puts before every key (with its trailing ``/``)."""
        return self._prefix

    async def write(self, key: str, data: bytes) -> None:
        """Write under the prefixed key."""
        await self._storage.write(self._prefix + _check_str(key, "key"), data)

    async def read(self, key: str) -> bytes | None:
        """Read the prefixed key."""
        return await self._storage.read(self._prefix + _check_str(key, "key"))

    async def delete(self, key: str) -> None:
        """Delete the prefixed key."""
        await self._storage.delete(self._prefix + _check_str(key, "key"))

    async def list(self, query: str = "") -> builtins.list[str]:
        """The keys under the prefix and ``query``, without the prefix."""
        keys = await self._storage.list(self._prefix + _check_str(query, "prefix"))
        return [key[len(self._prefix):] for key in keys]

    async def search(self, query: str) -> builtins.list[StorageSearchResult]:
        """The underlying storage's hits under the prefix, their keys without it."""
        hits: builtins.list[StorageSearchResult] = await self._storage.search(query)
        cut = len(self._prefix)
        return [StorageSearchResult(hit.key[cut:], hit.score, hit.data) for hit in hits
                if hit.key.startswith(self._prefix)]

    def namespace(self, prefix: str) -> _NamespacedStorage:
        """A view under ``prefix`` within this one."""
        return _NamespacedStorage(self._storage, self._prefix + _check_str(prefix, "prefix"))

    def for_sandbox(self, sandbox: object) -> _NamespacedStorage:
        """This view over the underlying storage bound to ``sandbox`` (itself when that cannot be bound)."""
        bind = getattr(self._storage, "for_sandbox", None)
        if bind is None:
            return self
        return _NamespacedStorage(bind(sandbox), self._prefix)


def _resolve_namespace(storage: Storage[Any, Any], prefix: str) -> Storage[Any, Any]:
    """``storage`` scoped under ``prefix``, unless it is scoped already (then it is returned as it is).

    A backend's own ``namespace`` is used when it has one, else a generic ``/``-prefix view.
    """
    if getattr(storage, "_namespaced", None) is _NAMESPACED:
        return storage
    scope = getattr(storage, "namespace", None)
    if scope is not None:
        scoped: Storage[Any, Any] = scope(prefix)
        return scoped
    return _NamespacedStorage(storage, prefix)


# Public spellings of the helpers (Strands keeps them private; these are the same functions).
normalize_key = _normalize_key
normalize_prefix = _normalize_prefix
resolve_namespace = _resolve_namespace
