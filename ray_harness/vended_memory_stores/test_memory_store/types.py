"""``TestMemoryStore``'s configuration and ``add`` result."""

from __future__ import annotations

from dataclasses import dataclass

from ray_harness.memory.types import MemoryStoreConfig

__all__ = ("TestMemoryAddResult", "TestMemoryStoreConfig")


class TestMemoryStoreConfig(MemoryStoreConfig, total=False):
    """``TestMemoryStore``'s keyword arguments.

    Attributes:
        persist: ``True`` (default): entries are kept in a JSON file; ``False``: in memory, for this process.
        path: The JSON file (default ``~/.ray_harness/memory/<name>.json``); ignored when not persisting.
    """

    persist: bool
    path: str


TestMemoryStoreConfig.__test__ = False  # type: ignore[attr-defined]  # not a pytest test class


@dataclass
class TestMemoryAddResult:
    """What :meth:`TestMemoryStore.add` returns: the id of the stored (or already stored) record."""

    __test__ = False  # not a pytest test class

    id: str
