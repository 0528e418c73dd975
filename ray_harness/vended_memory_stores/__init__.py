"""Ready-made memory stores (Strands' ``strands.vended_memory_stores``) for :class:`~ray_harness.memory.MemoryManager`.

- :class:`TestMemoryStore` — entries in one JSON file (or in memory with ``persist=False``), keyword recall; for
  prototypes and tests.
- :class:`FileMemoryStore` — topic files in markdown on a :mod:`ray_harness.storage` backend, keyword recall;
  extraction groups facts by topic.

Strands' ``BedrockKnowledgeBaseStore`` is not provided: asking for it raises ``ImportError`` saying so (it is in
Strands' ``__all__``, not in this one, so ``from ray_harness.vended_memory_stores import *`` works).
"""

from typing import Any

from ray_harness.vended_memory_stores.file_memory_store import FileMemoryStore
from ray_harness.vended_memory_stores.test_memory_store import TestMemoryStore

__all__ = ["FileMemoryStore", "TestMemoryStore"]

_NOT_PROVIDED = {
    "BedrockKnowledgeBaseStore": "ray_harness does not provide Strands' BedrockKnowledgeBaseStore (Amazon Bedrock "
                                 "Knowledge Bases); implement the MemoryStore protocol (search, and add or "
                                 "add_messages) over boto3's bedrock-agent-runtime retrieve for one",
}


def __getattr__(name: str) -> Any:
    # Looked up lazily, as Strands does, so the missing store fails only for code that uses it.
    if name in _NOT_PROVIDED:
        raise ImportError(_NOT_PROVIDED[name], name=name, path=__file__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
