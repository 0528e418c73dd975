"""``FileMemoryStore``: knowledge as markdown topic files on a :mod:`ray_harness.storage` backend (Strands' name).

Example::

    from ray_harness.vended_memory_stores.file_memory_store import FileMemoryStore

    store = FileMemoryStore(name="agent-memory")  # ./.ray_harness/memory/agent-memory/*.md
"""

from ray_harness.vended_memory_stores.file_memory_store.store import FileMemoryStore
from ray_harness.vended_memory_stores.file_memory_store.types import FileMemoryStoreConfig

__all__ = ["FileMemoryStore", "FileMemoryStoreConfig"]
