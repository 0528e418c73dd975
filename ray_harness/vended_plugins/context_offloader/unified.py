"""Offloading into a :mod:`ray_harness.storage` ``Storage`` as well as into an offloader storage.

An offloader storage (``store``/``retrieve``, this package's ``InMemoryStorage``, ``FileStorage``,
``S3Storage``) keeps the MIME type itself and returns its own reference. A unified ``Storage`` keeps bytes
only: each block is written under its key (the reference) framed with its type, in Strands' layout — two bytes
(big-endian) of type length, the type in UTF-8, then the content — so either SDK reads what the other stored.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, TypeAlias

from ray_harness.vended_plugins.context_offloader.storage import Storage as OffloaderStorage

if TYPE_CHECKING:
    from ray_harness.storage import Storage as UnifiedStorage

    AnyStorage: TypeAlias = "OffloaderStorage | UnifiedStorage[Any, Any]"
else:
    AnyStorage: TypeAlias = Any

__all__ = ("AnyStorage", "frame", "is_offloader_storage", "is_unified_storage", "retrieve_content",
           "store_content", "unframe")

_LENGTH = struct.Struct(">H")


def is_offloader_storage(storage: object) -> bool:
    """Whether ``storage`` keeps blocks itself (``store``/``retrieve``), as this package's backends do."""
    return callable(getattr(storage, "store", None)) and callable(getattr(storage, "retrieve", None))


def is_unified_storage(storage: object) -> bool:
    """Whether ``storage`` has what the offloader asks of a ``ray_harness.storage`` ``Storage``."""
    return all(callable(getattr(storage, name, None)) for name in ("write", "read", "delete"))


def frame(content: bytes, content_type: str) -> bytes:
    """``content`` preceded by its MIME type and the type's length."""
    kind = content_type.encode("utf-8")
    return _LENGTH.pack(len(kind)) + kind + content


def unframe(data: bytes) -> tuple[bytes, str]:
    """``(content, content_type)`` of a framed block.

    Raises:
        ValueError: The frame is shorter than its header says.
    """
    if len(data) < _LENGTH.size:
        raise ValueError(f"Corrupt storage frame: expected at least {_LENGTH.size} bytes, got {len(data)}")
    (length,) = _LENGTH.unpack_from(data)
    end = _LENGTH.size + length
    if len(data) < end:
        raise ValueError(f"Corrupt storage frame: content-type length {length} exceeds frame size {len(data)}")
    return data[end:], data[_LENGTH.size:end].decode("utf-8")


async def store_content(storage: AnyStorage, key: str, content: bytes, content_type: str) -> str:
    """Store one block; the reference: the offloader storage's, or ``key`` in a unified storage."""
    if is_offloader_storage(storage):
        reference: str = await storage.store(key, content, content_type)  # type: ignore[union-attr]
        return reference
    await storage.write(key, frame(content, content_type))  # type: ignore[union-attr]
    return key


async def retrieve_content(storage: AnyStorage, reference: str) -> tuple[bytes, str]:
    """``(content, content_type)`` of a stored block.

    Raises:
        KeyError: Nothing is stored under ``reference``.
    """
    if is_offloader_storage(storage):
        found: tuple[bytes, str] = await storage.retrieve(reference)  # type: ignore[union-attr]
        return found
    data = await storage.read(reference)  # type: ignore[union-attr]
    if data is None:
        raise KeyError(f"Reference not found: {reference}")
    return unframe(data)
