"""The memory module's types (Strands' ``strands.memory.types``): entries, options, configs and the store protocol.

A store is any object with the :class:`MemoryStoreConfig` fields as attributes and an async ``search``; it may add
``add`` (one piece of content), ``add_messages`` (a batch of conversation messages, for backends that extract
themselves), ``initialize`` and ``get_tools``. Subclassing :class:`MemoryStore` is optional; a method a subclass
only inherits from it counts as not implemented.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Required

from typing_extensions import TypedDict

from ray_harness.injection.types import InjectionConfig
from ray_harness.types.content import Message

if TYPE_CHECKING:
    from ray_harness.memory.extraction.types import ExtractionConfig

__all__ = (
    "AddMessagesContext",
    "InjectionFormatContext",
    "InjectionQueryContext",
    "MemoryAddOptions",
    "MemoryAddToolConfig",
    "MemoryEntry",
    "MemoryInjectionConfig",
    "MemoryManagerConfig",
    "MemorySearchOptions",
    "MemoryStore",
    "MemoryStoreConfig",
    "MemoryToolConfig",
    "Metadata",
    "SearchOptions",
)

Metadata = dict[str, Any]
"""JSON metadata of an entry (scores, ids, timestamps, ...)."""


@dataclass
class MemoryEntry:
    """One entry a store returned or was given.

    Attributes:
        content: The remembered text.
        store_name: The store it came from; ``MemoryManager.search`` sets it, stores need not.
        metadata: The store's metadata for it (scores, ids, ...).
    """

    content: str
    store_name: str | None = None
    metadata: Metadata | None = None


class SearchOptions(TypedDict, total=False):
    """Options of :meth:`MemoryStore.search`; a store may read more keys of its own.

    Attributes:
        max_search_results: At most this many entries.
    """

    max_search_results: int


@dataclass
class AddMessagesContext:
    """What the manager tells :meth:`MemoryStore.add_messages` besides the messages.

    Attributes:
        sequence_numbers: One number per message (``sequence_numbers[i]`` is ``messages[i]``'s): a retried batch
            carries the same numbers, so a store can build an idempotency key from them. They increase with order,
            may have gaps (a message filtered to nothing is dropped) and restart at 0 with each manager, so a
            durable key combines one with an id of its own. ``None`` when the manager has none to give.
    """

    sequence_numbers: list[int] | None = None


class MemorySearchOptions(SearchOptions, total=False):
    """Options of ``MemoryManager.search``.

    Attributes:
        stores: Search only these stores (by name); omitted searches all. An empty list searches none (the
            ``search_memory`` tool reads an empty list as "all its stores").
    """

    stores: list[str]


class MemoryAddOptions(TypedDict, total=False):
    """Options of ``MemoryManager.add``.

    Attributes:
        metadata: Stored with the content.
        stores: Write only to these writable stores (by name); omitted writes to all. An empty list matches no store
            (an error), where the ``add_memory`` tool reads it as "all its stores".
    """

    metadata: Metadata
    stores: list[str]


class MemoryToolConfig(TypedDict, total=False):
    """A memory tool's name and description, when not the defaults."""

    name: str
    description: str


class MemoryAddToolConfig(MemoryToolConfig, total=False):
    """The ``add_memory`` tool's configuration.

    Attributes:
        stores: The writable stores it may write to (names or stores); omitted: every store with ``add``.
        wait_for_writes: ``True`` (default): the tool waits and answers ``{"stored": n}`` or fails. ``False``: it
            answers ``{"accepted": n}`` once the writes are started; failures are only logged.
    """

    stores: list[str | MemoryStore]
    wait_for_writes: bool


@dataclass
class InjectionQueryContext:
    """What :attr:`MemoryInjectionConfig.query` gets: the conversation about to be sent."""

    messages: list[Message]


@dataclass
class InjectionFormatContext:
    """What :attr:`MemoryInjectionConfig.format` gets: the entries to render."""

    entries: list[MemoryEntry]


class InjectionQueryCallback(Protocol):
    """Derives the injection's search query from the conversation (a plain function qualifies)."""

    def __call__(self, context: InjectionQueryContext, **kwargs: Any) -> str | None:
        """The query; ``None`` or ``""`` skips the injection this call."""
        ...


class InjectionFormatCallback(Protocol):
    """Renders the retrieved entries into the injected text (a plain function qualifies)."""

    def __call__(self, context: InjectionFormatContext, **kwargs: Any) -> str:
        """The text to inject."""
        ...


InjectionQuery = Callable[[InjectionQueryContext], "str | None"] | InjectionQueryCallback
InjectionFormat = Callable[[InjectionFormatContext], str] | InjectionFormatCallback


class MemoryInjectionConfig(InjectionConfig, total=False):
    """Memory injection: :class:`~ray_harness.injection.InjectionConfig` (``trigger``) plus what to retrieve and how.

    Attributes:
        max_entries: Entries retrieved and injected per model call (default 5); with several stores, their results
            are concatenated in store order before this cap.
        query: The search query from the conversation (default: the latest user message's text on a user turn,
            else the latest assistant message's). A callback that raises skips the injection.
        format: The injected text (default: a ``<memory>`` block, one escaped ``<entry source="store">`` per
            entry). A callback that raises skips the injection; one that emits markup escapes it itself.
    """

    max_entries: int
    query: InjectionQuery
    format: InjectionFormat


class MemoryManagerConfig(TypedDict, total=False):
    """``MemoryManager``'s constructor arguments as a dict (``Agent(memory_manager={...})``).

    Attributes:
        stores: The stores to manage (at least one).
        search_tool_config: The ``search_memory`` tool (default ``True``).
        add_tool_config: The ``add_memory`` tool (default ``False``).
        injection: Memory injection before model calls (default ``True``).
    """

    stores: Required[list[MemoryStore]]
    search_tool_config: MemoryToolConfig | bool
    add_tool_config: MemoryAddToolConfig | bool
    injection: MemoryInjectionConfig | bool


class MemoryStoreConfig(TypedDict, total=False):
    """The fields a store is configured with (and exposes as attributes).

    Attributes:
        name: Unique among the manager's stores; tools target stores by it.
        description: Shown in the tools' descriptions.
        max_search_results: The store's default result count.
        writable: Whether it takes writes (then it needs ``add`` or ``add_messages``).
        extraction: Automatic extraction into this store: ``True`` (defaults), an
            :class:`~ray_harness.memory.ExtractionConfig`, or ``False``/omitted (off). By default it runs every 5
            invocations; a store with only ``add`` gets facts distilled by a
            :class:`~ray_harness.memory.ModelExtractor`, a store with ``add_messages`` gets the messages.
    """

    name: Required[str]
    description: str
    max_search_results: int
    writable: bool
    extraction: ExtractionConfig | bool


def _not_implemented(store: object, method: str) -> Any:
    raise NotImplementedError(f"{type(store).__name__} does not implement {method}")


class MemoryStore(Protocol):
    """What a memory store is: the :class:`MemoryStoreConfig` fields as attributes and ``search``.

    ``add``, ``add_messages``, ``initialize`` and ``get_tools`` are optional; the defaults here stand for "not
    implemented" (the manager never calls an inherited default write sink).
    """

    name: str
    description: str | None
    max_search_results: int | None
    writable: bool
    extraction: ExtractionConfig | bool | None

    async def search(self, query: str, options: SearchOptions | None = None) -> list[MemoryEntry]:
        """Entries matching ``query``, most relevant first."""
        ...

    async def add(self, content: str, metadata: Metadata | None = None) -> Any:
        """Store one piece of content; extraction may write the same content again (at-least-once)."""
        return _not_implemented(self, "add")

    async def add_messages(self, messages: list[Message], context: AddMessagesContext | None = None) -> Any:
        """Take a batch of conversation messages (the sink of extraction without an extractor)."""
        return _not_implemented(self, "add_messages")

    async def initialize(self) -> None:
        """Set up what must work before the agent runs; called when the manager joins an agent."""
        return None

    def get_tools(self) -> list[Any]:
        """Tools of the store's own, registered next to the manager's."""
        return []


def has_method(store: object, name: str) -> bool:
    """Whether ``store`` implements ``name`` itself (one only inherited from :class:`MemoryStore` does not count)."""
    method = getattr(type(store), name, None)
    if method is None or method is getattr(MemoryStore, name, None):
        return False
    return callable(method)


def has_write_sink(store: object) -> bool:
    """Whether ``store`` implements ``add`` or ``add_messages``."""
    return has_method(store, "add") or has_method(store, "add_messages")
