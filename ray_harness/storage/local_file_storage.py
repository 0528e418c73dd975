"""``LocalFileStorage``: each key a file under a base directory, on this host or through a sandbox."""

from __future__ import annotations

import asyncio
import builtins
import os
import uuid
import warnings
from typing import TYPE_CHECKING, Any, overload

from ray_harness.storage._common import check_data, check_strategy, index_written, search_with
from ray_harness.storage.storage import _NAMESPACED, _normalize_key, _normalize_prefix
from ray_harness.types.exceptions import StorageError

if TYPE_CHECKING:
    from ray_harness.sandbox.base import Sandbox
    from ray_harness.storage.search.types import SandboxSafeSearchStrategy, SearchStrategy
    from ray_harness.storage.storage import StorageSearchResult

__all__ = ("LocalFileStorage",)

_INTERNAL = (".__ray_harness_", ".__strands_")
"""File name prefixes of temporary files and indexes: never keys (Strands' too, for a directory both use)."""

_MISSING = (FileNotFoundError, NotADirectoryError)


class LocalFileStorage:
    """Each key a file under ``base_dir``; the key's ``/`` segments are directories.

    On this host a write goes to a temporary file first and is renamed into place, so a reader never sees half
    of it. Through a sandbox (``sandbox=``, or :meth:`for_sandbox`, which ``ContextOffloader`` calls with each
    agent's sandbox) every file operation is the sandbox's, and writes are not indexed by a search strategy
    that needs this host's file system (such a strategy is refused with a sandbox).

    Example::

        storage = LocalFileStorage("./.ray_harness/")
        await storage.write("session/abc/state.json", data)

    Args:
        base_dir: The directory of the files (default ``./.ray_harness/``), made on first write.
        sandbox: Do every file operation through this sandbox.
        search_strategy: What ``search`` uses (default: keyword scoring); each ``write`` is indexed by it.

    Raises:
        ValueError: ``base_dir`` is empty or not a path; ``search_strategy`` needs this host's file system
            and ``sandbox`` is set.
        TypeError: ``search_strategy`` has no ``index``/``search`` methods.
    """

    @overload
    def __init__(self, base_dir: str | os.PathLike[str] = ..., *, sandbox: Sandbox,
                 search_strategy: SandboxSafeSearchStrategy[LocalFileStorage] | None = ...) -> None: ...

    @overload
    def __init__(self, base_dir: str | os.PathLike[str] = ..., *,
                 search_strategy: SearchStrategy[LocalFileStorage] | None = ...) -> None: ...

    def __init__(self, base_dir: str | os.PathLike[str] = "./.ray_harness/", *, sandbox: Sandbox | None = None,
                 search_strategy: Any = None) -> None:
        if not isinstance(base_dir, str | os.PathLike) or not os.fspath(base_dir):
            raise ValueError(f"base_dir must be a non-empty directory path, got {base_dir!r}")
        check_strategy(search_strategy)
        if sandbox is not None and getattr(search_strategy, "requires_host_fs", False):
            raise ValueError(f"search_strategy {type(search_strategy).__name__} requires host filesystem access "
                             "and cannot be used with a sandbox")
        self._base_dir = os.path.normpath(os.fspath(base_dir))
        self._sandbox = sandbox
        self._search_strategy = search_strategy

    @property
    def base_dir(self) -> str:
        """The directory the keys are files under."""
        return self._base_dir

    def for_sandbox(self, sandbox: Sandbox) -> LocalFileStorage:
        """This storage doing its file operations through ``sandbox`` (itself if bound to it already).

        A search strategy needing this host's file system is dropped, with a warning: the copy searches by
        keyword scoring.
        """
        if self._sandbox is sandbox:
            return self
        strategy = self._search_strategy
        if getattr(strategy, "requires_host_fs", False):
            warnings.warn(f"{type(strategy).__name__} requires host filesystem access and is not compatible with "
                          "sandboxed storage — dropping search strategy, falling back to keyword search",
                          stacklevel=2)
            strategy = None
        bound = LocalFileStorage(self._base_dir, sandbox=sandbox, search_strategy=strategy)
        if getattr(self, "_namespaced", None) is _NAMESPACED:
            bound._namespaced = _NAMESPACED  # type: ignore[attr-defined]
        return bound

    async def write(self, key: str, data: bytes) -> None:
        """Write ``data`` to the key's file, making its directories.

        Raises:
            StorageError: The key is invalid, the write failed, or the search strategy failed to index it.
        """
        normalized = _normalize_key(key)
        value = check_data(data)
        path = self._path(normalized)
        try:
            if self._sandbox is not None:
                await self._sandbox.write_file(path, value)
                return  # a sandboxed write is not indexed: the index would sit outside the sandbox
            await asyncio.to_thread(_write_atomically, path, value)
        except Exception as error:
            raise StorageError(f"Failed to write '{key}'") from error
        await index_written(self, self._search_strategy, key, normalized, value)

    async def read(self, key: str) -> bytes | None:
        """The key's file, or ``None`` if there is none.

        Raises:
            StorageError: The key is invalid, or reading failed otherwise.
        """
        path = self._path(_normalize_key(key))
        try:
            if self._sandbox is not None:
                return await self._sandbox.read_file(path)
            return await asyncio.to_thread(_read, path)
        except _MISSING:
            return None
        except Exception as error:
            raise StorageError(f"Failed to read '{key}'") from error

    async def delete(self, key: str) -> None:
        """Remove the key's file (nothing happens if there is none).

        Raises:
            StorageError: The key is invalid, or removing failed.
        """
        path = self._path(_normalize_key(key))
        try:
            if self._sandbox is not None:
                await self._sandbox.remove_file(path)
            else:
                await asyncio.to_thread(os.unlink, path)
        except _MISSING:
            pass
        except Exception as error:
            raise StorageError(f"Failed to delete '{key}'") from error

    async def list(self, query: str = "") -> builtins.list[str]:
        """The keys starting with the prefix ``query`` (all for ``""``), sorted.

        Raises:
            StorageError: The prefix is invalid, or walking the directory failed.
        """
        prefix = _normalize_prefix(query)
        try:
            if self._sandbox is not None:
                keys = await self._walk_sandbox(self._base_dir, "")
            else:
                keys = await asyncio.to_thread(self._walk_host, prefix)
        except Exception as error:
            raise StorageError(f"Failed to list keys with prefix '{query}'") from error
        return sorted(key for key in keys if key.startswith(prefix))

    async def search(self, query: str) -> builtins.list[StorageSearchResult]:
        """The entries ranked for ``query`` by the search strategy (keyword scoring by default)."""
        return await search_with(self, self._search_strategy, query)

    def namespace(self, prefix: str) -> LocalFileStorage:
        """A ``LocalFileStorage`` rooted at the sub-directory ``prefix``, with this one's sandbox and strategy.

        A real ``LocalFileStorage`` rather than a key-prefixing view: its ``base_dir`` is the sub-directory
        (what an index-keeping strategy locates its index by), and ``for_sandbox`` still works.
        """
        normalized = _normalize_prefix(prefix).rstrip("/")
        sub_dir = os.path.join(self._base_dir, *normalized.split("/")) if normalized else self._base_dir
        scoped = LocalFileStorage(sub_dir, search_strategy=self._search_strategy)
        scoped._sandbox = self._sandbox  # a strategy a sandbox refuses was refused when this one was made
        scoped._namespaced = _NAMESPACED  # type: ignore[attr-defined]
        return scoped

    def __repr__(self) -> str:
        sandbox = f", sandbox={self._sandbox!r}" if self._sandbox is not None else ""
        return f"LocalFileStorage({self._base_dir!r}{sandbox})"

    def _path(self, key: str) -> str:
        return os.path.join(self._base_dir, key)

    def _walk_host(self, prefix: str) -> builtins.list[str]:
        # Start at the deepest existing directory the prefix names, not the whole tree.
        start = self._base_dir
        for segment in prefix.split("/")[:-1]:
            candidate = os.path.join(start, segment)
            if not os.path.isdir(candidate):
                break
            start = candidate
        keys: builtins.list[str] = []
        for directory, _, files in os.walk(start):
            for name in files:
                if not name.startswith(_INTERNAL):
                    relative = os.path.relpath(os.path.join(directory, name), self._base_dir)
                    keys.append(relative.replace(os.sep, "/"))
        return keys

    async def _walk_sandbox(self, directory: str, relative: str) -> builtins.list[str]:
        assert self._sandbox is not None
        try:
            entries = await self._sandbox.list_files(directory)
        except _MISSING:
            return []
        keys: builtins.list[str] = []
        for entry in entries:
            if entry.name.startswith(_INTERNAL):
                continue
            key = f"{relative}{entry.name}"
            if entry.is_dir:
                keys.extend(await self._walk_sandbox(f"{directory}/{entry.name}", f"{key}/"))
            else:
                keys.append(key)
        return keys


def _write_atomically(path: str, data: bytes) -> None:
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    temporary = os.path.join(parent, f"{_INTERNAL[0]}tmp_{uuid.uuid4().hex}")
    try:
        with open(temporary, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()
