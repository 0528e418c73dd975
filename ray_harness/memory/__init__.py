"""Cross-session memory (Strands' ``strands.memory``): a :class:`MemoryManager` plugin over pluggable stores.

``Agent(memory_manager=MemoryManager(stores=[...]))`` (or a :class:`MemoryManagerConfig` dict) gives the agent a
``search_memory`` tool (and, opted in, ``add_memory``), folds matching memories into each user turn's model input
(:mod:`ray_harness.injection`; the history never holds them) and, for stores configured with ``extraction``,
saves the conversation in the background when the store's triggers fire (:class:`IntervalTrigger` every N
invocations, :class:`InvocationTrigger` after each). Ready-made stores are in
:mod:`ray_harness.vended_memory_stores`. Not imported by ``import ray_harness``.
"""

from ray_harness.injection.types import InjectionConfig, InjectionContext, InjectionTrigger
from ray_harness.memory.extraction.model_extractor import ModelExtractor
from ray_harness.memory.extraction.triggers import IntervalTrigger, InvocationTrigger
from ray_harness.memory.extraction.types import (
    ExtractionConfig,
    ExtractionResult,
    ExtractionTrigger,
    ExtractionTriggerContext,
    Extractor,
    ExtractorContext,
    MemoryContentBlockType,
    MemoryMessageFilter,
)
from ray_harness.memory.memory_manager import MemoryManager
from ray_harness.memory.types import (
    AddMessagesContext,
    InjectionFormatContext,
    InjectionQueryContext,
    MemoryAddOptions,
    MemoryAddToolConfig,
    MemoryEntry,
    MemoryInjectionConfig,
    MemoryManagerConfig,
    MemorySearchOptions,
    MemoryStore,
    MemoryStoreConfig,
    MemoryToolConfig,
    SearchOptions,
)
from ray_harness.types.exceptions import AggregateMemoryError

__all__ = [
    "AddMessagesContext",
    "AggregateMemoryError",
    "ExtractionConfig",
    "ExtractionResult",
    "ExtractionTrigger",
    "ExtractionTriggerContext",
    "Extractor",
    "ExtractorContext",
    "InjectionConfig",
    "InjectionContext",
    "InjectionFormatContext",
    "InjectionQueryContext",
    "InjectionTrigger",
    "IntervalTrigger",
    "InvocationTrigger",
    "MemoryAddOptions",
    "MemoryAddToolConfig",
    "MemoryContentBlockType",
    "MemoryEntry",
    "MemoryInjectionConfig",
    "MemoryManager",
    "MemoryManagerConfig",
    "MemoryMessageFilter",
    "MemorySearchOptions",
    "MemoryStore",
    "MemoryStoreConfig",
    "MemoryToolConfig",
    "ModelExtractor",
    "SearchOptions",
]
