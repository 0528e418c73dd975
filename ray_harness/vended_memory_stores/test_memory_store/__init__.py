"""``TestMemoryStore``: a memory store in one JSON file, for prototypes and tests (Strands' name and file format).

Example::

    from ray_harness.vended_memory_stores.test_memory_store import TestMemoryStore

    store = TestMemoryStore(name="notes", persist=False)  # in memory; the default persists to a JSON file
"""

from ray_harness.vended_memory_stores.test_memory_store.store import TestMemoryStore
from ray_harness.vended_memory_stores.test_memory_store.types import TestMemoryAddResult, TestMemoryStoreConfig

__all__ = ["TestMemoryAddResult", "TestMemoryStore", "TestMemoryStoreConfig"]
