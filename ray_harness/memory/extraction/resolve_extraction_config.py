"""A store's ``extraction`` setting (``bool | ExtractionConfig``) resolved to concrete triggers, extractor, filter."""

from __future__ import annotations

from dataclasses import dataclass

from ray_harness.memory.extraction.model_extractor import ModelExtractor
from ray_harness.memory.extraction.triggers import IntervalTrigger
from ray_harness.memory.extraction.types import (
    DEFAULT_MEMORY_MESSAGE_FILTER,
    ExtractionConfig,
    ExtractionTrigger,
    Extractor,
    MemoryMessageFilter,
)
from ray_harness.memory.types import MemoryStore, has_method

__all__ = ("DEFAULT_EXTRACTION_TRIGGER_TURNS", "ResolvedExtractionConfig", "resolve_extraction_config")

DEFAULT_EXTRACTION_TRIGGER_TURNS = 5
"""The cadence of a config without a trigger: every 5 invocations."""


@dataclass
class ResolvedExtractionConfig:
    """An :class:`ExtractionConfig` with every field decided.

    Attributes:
        triggers: Always a list (an explicit empty list stays empty, for the manager to reject).
        extractor: The extractor writing through ``add``, or ``None``: the messages go to ``add_messages``.
        filter: The blocks stripped before extraction.
    """

    triggers: list[ExtractionTrigger]
    extractor: Extractor | None
    filter: MemoryMessageFilter


def resolve_extraction_config(extraction: bool | ExtractionConfig | None,
                              store: MemoryStore) -> ResolvedExtractionConfig | None:
    """``None`` when extraction is off; else the config with the defaults filled in.

    The default extractor follows the store's write methods: a store with only ``add`` cannot extract by itself,
    so a :class:`ModelExtractor` distills facts for it; a store with ``add_messages`` gets the messages.

    Raises:
        TypeError: ``extraction`` is neither a bool nor a dict.
    """
    if extraction is None or extraction is False:
        return None
    if extraction is True:
        config = ExtractionConfig()
    elif isinstance(extraction, dict):
        config = extraction
    else:
        raise TypeError(f"store {store.name!r}: extraction must be a bool or an ExtractionConfig, "
                        f"got {type(extraction).__name__}")
    given = config.get("trigger")
    triggers: list[ExtractionTrigger] = ([IntervalTrigger(turns=DEFAULT_EXTRACTION_TRIGGER_TURNS)] if given is None
                                         else list(given) if isinstance(given, list) else [given])
    extractor = config.get("extractor")
    if extractor is None and has_method(store, "add") and not has_method(store, "add_messages"):
        extractor = ModelExtractor()
    return ResolvedExtractionConfig(triggers=triggers, extractor=extractor,
                                    filter=config.get("filter") or DEFAULT_MEMORY_MESSAGE_FILTER)
