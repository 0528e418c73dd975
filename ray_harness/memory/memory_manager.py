"""``MemoryManager``: cross-session memory for an agent, as a plugin (Strands' ``strands.memory.MemoryManager``).

It manages one or more :class:`~ray_harness.memory.MemoryStore` objects and gives the agent three things:

- tools: ``search_memory`` (on by default) and ``add_memory`` (opt-in), plus the stores' own tools;
- injection: before a model call, entries matching the conversation are folded into that call's input (an
  ``InvokeModelStage.Input`` middleware built on :mod:`ray_harness.injection`), never into the history;
- extraction: stores configured with ``extraction`` get the conversation saved in the background, when their
  triggers fire. ``agent(...)`` waits for the saves it started before it returns (each sync call runs its own
  event loop, which would cancel them); :meth:`MemoryManager.flush` saves what is left and waits, and
  ``agent.shutdown()`` / ``shutdown_async()`` / leaving ``with agent`` call it.

Everything the manager registers on an agent is an object with methods, so the agent pickles into Ray hosts.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Literal
from xml.sax.saxutils import escape

from ray_harness.hooks.events import MessageAddedEvent
from ray_harness.injection._message_injection import InjectionMiddleware, is_user_turn
from ray_harness.injection.types import InjectionContext
from ray_harness.memory.extraction.coordinator import ExtractionBinding, ExtractionCoordinator
from ray_harness.memory.extraction.resolve_extraction_config import resolve_extraction_config
from ray_harness.memory.extraction.types import ExtractionTriggerContext
from ray_harness.memory.types import (
    InjectionFormatContext,
    InjectionQueryContext,
    MemoryAddOptions,
    MemoryAddToolConfig,
    MemoryEntry,
    MemoryInjectionConfig,
    MemorySearchOptions,
    MemoryStore,
    MemoryToolConfig,
    has_method,
    has_write_sink,
)
from ray_harness.middleware.types import InvokeModelStage
from ray_harness.plugins.plugin import Plugin
from ray_harness.tools.decorator import tool
from ray_harness.types.content import Message
from ray_harness.types.exceptions import AggregateMemoryError

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("ADD_TOOL_DESCRIPTION", "DEFAULT_MAX_ENTRIES", "DEFAULT_MAX_SEARCH_RESULTS", "SEARCH_TOOL_DESCRIPTION",
           "MemoryManager", "attach_memory_manager", "resolve_memory_manager")

logger = logging.getLogger(__name__)

SEARCH_TOOL_DESCRIPTION = (
    "Search long-term memory for facts, preferences, or context from previous conversations. Use when you need "
    "background about the user or topic that may have been discussed before."
)
ADD_TOOL_DESCRIPTION = (
    "Add facts, preferences, or decisions to long-term memory so they are remembered across conversations. Use when "
    "the user shares something worth recalling later."
)
DEFAULT_MAX_SEARCH_RESULTS = 3
"""Results per store when neither the caller nor the store says."""
DEFAULT_MAX_ENTRIES = 5
"""Entries injected per model call unless ``max_entries`` says."""


class MemoryManager(Plugin):
    """Cross-session memory for an agent: search/add tools, injection before model calls, background extraction.

    Args:
        stores: The stores (at least one; names unique).
        search_tool_config: ``True`` (default): a ``search_memory`` tool; a :class:`MemoryToolConfig` renames or
            re-describes it; ``False``: none.
        add_tool_config: ``False`` (default): no add tool; ``True``: an ``add_memory`` tool writing to every store
            with ``add``; a :class:`MemoryAddToolConfig` scopes or customizes it.
        injection: ``True`` (default): memory folded into the model input of each user turn; a
            :class:`MemoryInjectionConfig` tunes it; ``False``: off.

    Raises:
        ValueError: No store, a duplicate name, a writable store without ``add``/``add_messages``, an extraction
            config that cannot work (not writable, no trigger, no matching write method), or an add tool with no
            store that has ``add``.

    Example:
        ```python
        from ray_harness import Agent
        from ray_harness.memory import MemoryManager
        from ray_harness.vended_memory_stores import TestMemoryStore

        memory = MemoryManager(stores=[TestMemoryStore(name="notes", persist=False)], add_tool_config=True)
        agent = Agent(model, memory_manager=memory)
        ```
    """

    name = "strands:memory-manager"  # Strands' name: one program's plugin names stay the same

    def __init__(self, stores: list[MemoryStore], search_tool_config: MemoryToolConfig | bool = True,
                 add_tool_config: MemoryAddToolConfig | bool = False,
                 injection: MemoryInjectionConfig | bool = True) -> None:
        if not isinstance(stores, list | tuple) or len(stores) == 0:
            raise ValueError("MemoryManager: at least one store is required")
        bindings = _bindings(list(stores))
        super().__init__()
        self._stores = list(stores)
        self._add_stores = [store for store in self._stores if store.writable and has_method(store, "add")]
        self._extraction_stores = bindings
        self._search_tool_config: MemoryToolConfig | Literal[False] = _tool_config(search_tool_config)
        self._add_tool_config: MemoryAddToolConfig | Literal[False] = False
        self._add_tool_stores: list[MemoryStore] = []
        if add_tool_config is not None and add_tool_config is not False:
            if not self._add_stores:
                raise ValueError("MemoryManager: add_tool_config is enabled but no writable stores implement add")
            self._add_tool_config = add_tool_config if isinstance(add_tool_config, dict) else MemoryAddToolConfig()
            self._add_tool_stores = self._resolve_add_tool_stores(self._add_tool_config)
        self._injection_config: MemoryInjectionConfig | Literal[False] = (
            injection if isinstance(injection, dict) else MemoryInjectionConfig() if injection else False)
        self._coordinator: ExtractionCoordinator | None = None
        self._background_tasks: set[asyncio.Task[None]] = set()  # add_memory's fire-and-forget writes
        self._memory_tools: list[Any] = self._build_tools()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_background_tasks"] = set()  # tasks belong to this process's event loop
        return state

    @property
    def tools(self) -> list[Any]:
        """The tools registered with the agent: ``search_memory``/``add_memory`` and the stores' own."""
        return list(self._memory_tools)

    @property
    def stores(self) -> list[MemoryStore]:
        """The managed stores, in the order given."""
        return list(self._stores)

    # -- setup -----------------------------------------------------------------------------------------

    async def init_agent(self, agent: Agent) -> None:
        """Initialize the stores, then wire extraction (hooks and triggers) and injection (middleware) on ``agent``.

        A store whose ``initialize`` raises fails the agent's construction.
        """
        for store in self._stores:
            if has_method(store, "initialize"):
                await store.initialize()
        if self._extraction_stores:
            coordinator = ExtractionCoordinator(self._extraction_stores, agent.aux_model)
            self._coordinator = coordinator
            agent.add_hook(coordinator.on_message_added, MessageAddedEvent)
            for binding in self._extraction_stores:
                for trigger in binding.config.triggers:
                    trigger.attach(ExtractionTriggerContext(agent=agent, fire=_Fire(coordinator, binding.store)))
        config = self._injection_config
        if config is not False:
            agent.add_middleware(InvokeModelStage.Input,
                                 InjectionMiddleware(_MemoryInjection(self, config), config.get("trigger")))

    def _resolve_add_tool_stores(self, config: MemoryAddToolConfig) -> list[MemoryStore]:
        given = config.get("stores")
        if given is None:
            return self._add_stores
        resolved: list[MemoryStore] = []
        for name in dict.fromkeys(entry if isinstance(entry, str) else entry.name for entry in given):
            found = self._store(name)
            if found is None:
                raise ValueError(f"MemoryManager: add_tool_config store '{name}' not found")
            if not found.writable:
                raise ValueError(f"MemoryManager: add_tool_config store '{name}' is not writable")
            if not has_method(found, "add"):
                raise ValueError(f"MemoryManager: add_tool_config store '{name}' has no add method (only add_messages)")
            resolved.append(found)
        return resolved

    def _build_tools(self) -> list[Any]:
        tools: list[Any] = []
        if self._search_tool_config is not False:
            tools.append(self._search_tool(self._search_tool_config))
        if self._add_tool_config is not False:
            tools.append(self._add_tool(self._add_tool_config))
        for store in self._stores:
            if has_method(store, "get_tools"):
                tools.extend(store.get_tools())
        return tools

    def _search_tool(self, config: MemoryToolConfig) -> Any:
        description = config.get("description", SEARCH_TOOL_DESCRIPTION)
        described = [f"- {store.name}: {store.description}" for store in self._stores if store.description]
        if described:
            description += ("\n\nAvailable memory stores:\n" + "\n".join(described) +
                            "\n\nYou can target one or more memory stores by name if you know which domains are "
                            "relevant, or omit the stores parameter to search all.")
        return tool(name=config.get("name", "search_memory"), description=description)(self._search_memory)

    def _add_tool(self, config: MemoryAddToolConfig) -> Any:
        description = config.get("description", ADD_TOOL_DESCRIPTION)
        described = [f"- {store.name}: {store.description}" for store in self._add_tool_stores if store.description]
        if described:
            description += ("\n\nAvailable writable stores:\n" + "\n".join(described) +
                            "\n\nYou can target a specific store by name to route facts to the right place, "
                            "or omit to add to all available writable stores.")
        return tool(name=config.get("name", "add_memory"), description=description)(self._add_memory)

    # -- the tools (bound methods: they pickle with the manager) ---------------------------------------

    async def _search_memory(self, query: str, max_search_results: int | None = None,
                             stores: list[str] | None = None) -> list[dict[str, Any]]:
        """Search long-term memory.

        Args:
            query: What to search for.
            max_search_results: Maximum number of results per store.
            stores: Filter to specific stores by name. Omit to search all available stores.
        """
        options = MemorySearchOptions(stores=self._tool_targets([store.name for store in self._stores], stores))
        if max_search_results is not None:
            options["max_search_results"] = max_search_results
        found: list[dict[str, Any]] = []
        for entry in await self.search(query, options):
            item: dict[str, Any] = {"content": entry.content}
            if entry.store_name:
                item["store_name"] = entry.store_name
            if entry.metadata:
                item["metadata"] = entry.metadata
            found.append(item)
        return found

    async def _add_memory(self, entries: list[str], stores: list[str] | None = None) -> dict[str, int]:
        """Add data to long-term memory.

        Args:
            entries: Data to add to long-term memory.
            stores: Target specific stores by name. Omit to add to all writable stores.
        """
        if not entries:
            raise ValueError("MemoryManager: add_memory requires at least one entry")
        targets = self._tool_targets([store.name for store in self._add_tool_stores], stores)
        config = self._add_tool_config
        if config is not False and not config.get("wait_for_writes", True):
            for content in entries:
                task = asyncio.ensure_future(self._add_quietly(content, targets))
                self._background_tasks.add(task)
                task.add_done_callback(self._background_tasks.discard)
            return {"accepted": len(entries)}
        outcomes = await asyncio.gather(*(self.add(content, MemoryAddOptions(stores=targets)) for content in entries),
                                        return_exceptions=True)
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if failures:
            reasons = _flattened(failures)
            raise AggregateMemoryError(f"MemoryManager: failed to add {len(failures)} of {len(entries)} entries: "
                                       + "; ".join(str(reason) for reason in reasons), reasons)
        return {"stored": len(entries)}

    async def _add_quietly(self, content: str, targets: list[str]) -> None:
        try:
            await self.add(content, MemoryAddOptions(stores=targets))
        except Exception:
            pass

    def _tool_targets(self, scoped: list[str], requested: list[str] | None) -> list[str]:
        """The tool's stores among ``requested`` (none requested: all of them); others are dropped with a warning.

        Raises:
            ValueError: None of the requested stores is the tool's.
        """
        if not requested:
            return scoped
        in_scope = [name for name in requested if name in scoped]
        out_of_scope = [name for name in requested if name not in scoped]
        if not in_scope:
            raise ValueError(f"MemoryManager: requested=<{', '.join(requested)}> | none of the requested memory "
                             f"stores are available; available stores: {', '.join(scoped)}")
        if out_of_scope:
            logger.warning("requested=<%s> | ignoring memory stores outside this tool's scope", ", ".join(out_of_scope))
        return in_scope

    # -- programmatic API ------------------------------------------------------------------------------

    async def search(self, query: str, options: MemorySearchOptions | None = None) -> list[MemoryEntry]:
        """Entries matching ``query`` from every store (or ``options["stores"]``), each with its ``store_name``.

        The stores are searched concurrently; results are concatenated in store order. A store whose search raises
        is logged and left out.

        Raises:
            ValueError: A named store is not configured (before any store is searched).
        """
        requested = options.get("stores") if options is not None else None
        caller_max = options.get("max_search_results") if options is not None else None
        targets = self._named(requested) if requested is not None else self._stores
        outcomes = await asyncio.gather(
            *(store.search(query, MemorySearchOptions(max_search_results=_max_results(caller_max, store)))
              for store in targets),
            return_exceptions=True)
        results: list[MemoryEntry] = []
        for store, outcome in zip(targets, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome  # cancelled: not a store failure
                logger.warning("store=<%s>, reason=<%s> | store search failed", store.name, outcome)
                continue
            results.extend(MemoryEntry(content=entry.content, store_name=store.name, metadata=entry.metadata)
                           for entry in outcome)
        logger.debug("query=<%s>, results=<%d> | memory search complete", query, len(results))
        return results

    async def add(self, content: str, options: MemoryAddOptions | None = None) -> None:
        """Write ``content`` to every writable store with ``add`` (or ``options["stores"]``), concurrently.

        Raises:
            ValueError: A named store is not configured or is read-only, or no writable store matched.
            AggregateMemoryError: A store's write failed (``errors``: each failure); the others were written.
        """
        requested = options.get("stores") if options is not None else None
        metadata = options.get("metadata") if options is not None else None
        targets = self._named(requested, writable=True) if requested is not None else self._add_stores
        if not targets:
            raise ValueError("MemoryManager: no writable store matched")
        outcomes = await asyncio.gather(*(store.add(content, metadata) for store in targets), return_exceptions=True)
        failed = [(store.name, outcome) for store, outcome in zip(targets, outcomes, strict=True)
                  if isinstance(outcome, BaseException)]
        for name, error in failed:
            logger.warning("store=<%s>, reason=<%s> | store write failed", name, error)
        if failed:
            raise AggregateMemoryError(f"MemoryManager: store writes failed: {', '.join(name for name, _ in failed)}",
                                       [error for _, error in failed])

    async def flush(self) -> None:
        """Save every extraction store's remaining messages and wait for all saves; nothing to do without extraction.

        ``add_memory``'s fire-and-forget writes are not waited for (as in Strands).
        """
        if self._coordinator is not None:
            await self._coordinator.flush()

    async def settle(self) -> None:
        """Wait for the background saves already started, without starting any (``agent(...)`` does before returning).

        Unlike :meth:`flush`, the triggers' cadence is kept: messages a trigger has not asked to save yet stay
        buffered for a later save.
        """
        if self._coordinator is not None:
            await self._coordinator.settle()

    def _store(self, name: str) -> MemoryStore | None:
        return next((store for store in self._stores if store.name == name), None)

    def _named(self, requested: list[str], *, writable: bool = False) -> list[MemoryStore]:
        resolved: list[MemoryStore] = []
        for name in dict.fromkeys(requested):
            found = self._store(name)
            if found is None:
                raise ValueError(f"MemoryManager: store '{name}' not found")
            if writable and not found.writable:
                raise ValueError(f"MemoryManager: store '{name}' is read-only")
            resolved.append(found)
        return resolved

    # -- injection -------------------------------------------------------------------------------------

    async def _memory_context(self, messages: list[Message], config: MemoryInjectionConfig) -> str | None:
        """The text to inject for a model call, or ``None`` (no query, no entries, or a format that raised)."""
        query = _injection_query(messages, config)
        if query is None or not query.strip():
            return None
        limit = config.get("max_entries", DEFAULT_MAX_ENTRIES)
        entries = (await self.search(query, MemorySearchOptions(max_search_results=limit)))[:limit]
        if not entries:
            return None
        custom = config.get("format")
        if custom is None:
            return default_injection_format(entries)
        try:
            return custom(InjectionFormatContext(entries=entries))
        except Exception as error:
            logger.warning("reason=<%s> | injection format raised | skipping injection", error)
            return None


class _MemoryInjection:
    """The injection middleware's ``render_content``: an object (not a closure) so the agent pickles."""

    def __init__(self, manager: MemoryManager, config: MemoryInjectionConfig) -> None:
        self.manager = manager
        self.config = config

    async def __call__(self, context: InjectionContext) -> str | None:
        return await self.manager._memory_context(context.messages, self.config)


class _Fire:
    """A trigger's ``fire``: start saving one store's unsaved messages (an object, so the agent pickles)."""

    def __init__(self, coordinator: ExtractionCoordinator, store: MemoryStore) -> None:
        self.coordinator = coordinator
        self.store = store

    def __call__(self) -> None:
        self.coordinator.schedule(self.store)


def default_injection_format(entries: list[MemoryEntry]) -> str:
    """A ``<memory>`` block with one ``<entry>`` per entry, ``source`` naming its store; text and names escaped."""
    items = [f'<entry source="{escape(entry.store_name, {chr(34): "&quot;"})}">{escape(entry.content)}</entry>'
             if entry.store_name else f"<entry>{escape(entry.content)}</entry>" for entry in entries]
    return "<memory>\n" + "\n".join(items) + "\n</memory>"


def _injection_query(messages: list[Message], config: MemoryInjectionConfig) -> str | None:
    custom = config.get("query")
    if custom is not None:
        try:
            return custom(InjectionQueryContext(messages=messages))
        except Exception as error:
            logger.warning("reason=<%s> | injection query raised | skipping injection", error)
            return None
    role = "user" if is_user_turn(messages) else "assistant"
    latest = next((message for message in reversed(messages) if message["role"] == role), None)
    if latest is None:
        return None
    text = "\n".join(block["text"] for block in latest["content"] if "text" in block).strip()
    return text or None


def _bindings(stores: list[MemoryStore]) -> list[ExtractionBinding]:
    """Check the stores; the extraction bindings of those with extraction."""
    seen: set[str] = set()
    bindings: list[ExtractionBinding] = []
    for store in stores:
        if store.name in seen:
            raise ValueError(f"MemoryManager: duplicate store name '{store.name}'")
        seen.add(store.name)
        if store.writable and not has_write_sink(store):
            raise ValueError(f"MemoryManager: store '{store.name}' is writable but has no add or add_messages method")
        config = resolve_extraction_config(getattr(store, "extraction", None), store)
        if config is None:
            continue
        if not store.writable:
            raise ValueError(f"MemoryManager: store '{store.name}' has extraction config but is not writable")
        if not config.triggers:
            raise ValueError(f"MemoryManager: store '{store.name}' has extraction config but no triggers")
        if config.extractor is not None and not has_method(store, "add"):
            raise ValueError(f"MemoryManager: store '{store.name}' has an extractor but no add method "
                             "(extracted entries are written via add)")
        if config.extractor is None and not has_method(store, "add_messages"):
            raise ValueError(f"MemoryManager: store '{store.name}' has extraction config without an extractor "
                             "but no add_messages method")
        bindings.append(ExtractionBinding(store=store, config=config))
    return bindings


def _tool_config(value: MemoryToolConfig | bool) -> MemoryToolConfig | Literal[False]:
    return value if isinstance(value, dict) else MemoryToolConfig() if value else False


def _max_results(caller_max: int | None, store: MemoryStore) -> int:
    if caller_max is not None:
        return caller_max
    return store.max_search_results if store.max_search_results is not None else DEFAULT_MAX_SEARCH_RESULTS


def _flattened(reasons: list[BaseException]) -> list[BaseException]:
    """Nested aggregate errors opened up, so each leaf is a concrete reason."""
    flat: list[BaseException] = []
    for reason in reasons:
        flat.extend(_flattened(reason.errors) if isinstance(reason, AggregateMemoryError) else [reason])
    return flat


def resolve_memory_manager(value: Any) -> MemoryManager | None:
    """``Agent(memory_manager=...)``: a :class:`MemoryManager` as it is, a ``MemoryManagerConfig`` dict wrapped.

    Raises:
        ValueError: Anything else (Strands' error).
    """
    if value is None or isinstance(value, MemoryManager):
        return value
    if isinstance(value, dict):
        return MemoryManager(**value)
    raise ValueError(f"memory_manager must be a MemoryManager or MemoryManagerConfig, got {type(value).__name__}")


def attach_memory_manager(agent: Agent, value: Any) -> MemoryManager | None:
    """Resolve ``value`` and register it as one of ``agent``'s plugins (after those of ``plugins=``).

    Raises:
        ValueError: A plugin of the same name was given in ``plugins=`` too, or ``value`` is no manager.
    """
    manager = resolve_memory_manager(value)
    if manager is None:
        return None
    from ray_harness.plugins.registry import PluginRegistry

    registry = agent.__dict__.get("_plugin_registry")
    if registry is None:
        registry = agent._plugin_registry = PluginRegistry()
    if manager.name in registry.plugins:
        raise ValueError("A MemoryManager is already registered via plugins; pass it through the memory_manager "
                         "parameter instead")
    registry.add_and_init(agent, manager)
    return manager
