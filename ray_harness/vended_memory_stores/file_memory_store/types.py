"""``FileMemoryStore``'s configuration."""

from __future__ import annotations

from typing import Any

from ray_harness.memory.types import MemoryStoreConfig

__all__ = ("FileMemoryStoreConfig",)


class FileMemoryStoreConfig(MemoryStoreConfig, total=False):
    """``FileMemoryStore``'s keyword arguments.

    Attributes:
        storage: The :class:`~ray_harness.storage.Storage` backend (default ``LocalFileStorage()``, under
            ``./.ray_harness/``). Keys go under ``memory/<name>/`` unless the storage is a namespace already, so
            stores of different names can share one backend (two of the same name share their files).
    """

    storage: Any
