"""Extraction's types (Strands' ``strands.memory.extraction.types``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from typing_extensions import TypedDict

from ray_harness.types.content import Message

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.models.base import Model

__all__ = (
    "DEFAULT_MEMORY_MESSAGE_FILTER",
    "ExtractionConfig",
    "ExtractionResult",
    "ExtractionTrigger",
    "ExtractionTriggerContext",
    "Extractor",
    "ExtractorContext",
    "MemoryContentBlockType",
    "MemoryMessageFilter",
)

Metadata = dict[str, Any]

MemoryContentBlockType = Literal["text", "toolUse", "toolResult", "image", "document", "reasoningContent", "video",
                                 "guardContent", "citationsContent", "cachePoint"]
"""A content block's kind (its key), as a :class:`MemoryMessageFilter` names it."""


@dataclass
class ExtractionResult:
    """One entry an :class:`Extractor` produced, written with the store's ``add``."""

    content: str
    metadata: Metadata | None = None


@dataclass
class ExtractorContext:
    """What :meth:`Extractor.extract` gets besides the messages.

    Attributes:
        default_model: The model an extractor without its own uses: ``agent.aux_model`` (the agent's
            ``aux_model``, else its model, as in Strands).
    """

    default_model: Model | None = None


class Extractor(Protocol):
    """Turns conversation messages into discrete entries (optional: without one, messages go to ``add_messages``)."""

    async def extract(self, messages: list[Message], context: ExtractorContext | None = None) -> list[ExtractionResult]:
        """The entries to store for ``messages``."""
        ...


@dataclass
class MemoryMessageFilter:
    """Content blocks stripped before extraction; a message left empty is dropped.

    Attributes:
        exclude: The block kinds to strip (the default filter strips ``toolUse`` and ``toolResult``).
    """

    exclude: list[MemoryContentBlockType]


DEFAULT_MEMORY_MESSAGE_FILTER = MemoryMessageFilter(exclude=["toolUse", "toolResult"])
"""Tool traffic is left out; everything else is kept."""


@dataclass
class ExtractionTriggerContext:
    """What :meth:`ExtractionTrigger.attach` gets.

    Attributes:
        agent: The agent to hook into.
        fire: Saves the store's unsaved messages; starts the save in the background and returns at once
            (``MemoryManager.flush`` waits for saves).
    """

    agent: Agent
    fire: Callable[[], None]


class ExtractionTrigger(ABC):
    """Decides when a store's extraction runs: :meth:`attach` hooks into the agent and calls ``context.fire()``.

    Attributes:
        name: The kind of trigger, for logs.
    """

    name: str

    @abstractmethod
    def attach(self, context: ExtractionTriggerContext) -> None:
        """Hook into ``context.agent``; called once per store when the manager joins the agent.

        The agent is pickled into Ray actors with whatever is registered here: prefer objects with methods
        (or module-level functions) over closures, which only cloudpickle ships.
        """


class ExtractionConfig(TypedDict, total=False):
    """A store's automatic extraction.

    Attributes:
        trigger: When it runs: a trigger or a list (any one firing runs it). Omitted: every 5 invocations; an
            empty list is rejected.
        extractor: How messages become entries (the store then needs ``add``). Omitted: a
            :class:`~ray_harness.memory.ModelExtractor` for a store with only ``add``, none (the messages go to
            ``add_messages``) for a store with ``add_messages``.
        filter: Blocks stripped first (default: tool uses and tool results).
    """

    trigger: ExtractionTrigger | list[ExtractionTrigger]
    extractor: Extractor
    filter: MemoryMessageFilter
