"""Search strategies for storage backends (Strands' ``strands.storage.search``).

Every shipped backend searches with :class:`KeywordSearchStrategy` unless given another; a memory store or the
context offloader can pass a different one, such as :class:`Bm25SearchStrategy` (a SQLite FTS5 index).
"""

from ray_harness.storage.search.bm25 import Bm25SearchStrategy, Bm25SearchStrategyConfig
from ray_harness.storage.search.keyword import KeywordSearchStrategy
from ray_harness.storage.search.types import SearchStrategy
from ray_harness.storage.storage import StorageSearchResult

__all__ = ("Bm25SearchStrategy", "Bm25SearchStrategyConfig", "KeywordSearchStrategy", "SearchStrategy",
           "StorageSearchResult")
