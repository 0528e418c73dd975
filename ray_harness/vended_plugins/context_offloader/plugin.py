"""The ``ContextOffloader`` plugin (Strands' ``strands.vended_plugins.context_offloader``).

It works where Strands' does: an ``AfterToolCallEvent`` hook replaces an oversized result before the result
enters the conversation, a ``BeforeModelCallEvent`` hook drives eviction (``InMemoryStorage``'s own, or the
plugin's for a :mod:`ray_harness.storage` ``Storage``), and a ``@tool`` method, ``retrieve_offloaded_content``,
reads an offloaded block back.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.
import inspect
import logging
import weakref
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, cast

from typing_extensions import TypedDict

from ray_harness.agent.as_tool import SubAgentTool
from ray_harness.hooks.events import AfterToolCallEvent, BeforeModelCallEvent
from ray_harness.models.base import estimate_tokens
from ray_harness.plugins import Plugin, hook
from ray_harness.storage.storage import _NAMESPACED, _NamespacedStorage
from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import tool
from ray_harness.types.content import Message
from ray_harness.vended_plugins.context_offloader.blocks import (
    CHARS_PER_TOKEN,
    decode_full,
    offloaded_result,
    preview_source,
    store_blocks,
)
from ray_harness.vended_plugins.context_offloader.search import is_searchable, search_text
from ray_harness.vended_plugins.context_offloader.storage import InMemoryStorage
from ray_harness.vended_plugins.context_offloader.unified import (
    AnyStorage,
    is_offloader_storage,
    is_unified_storage,
    retrieve_content,
)

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.storage import Storage as UnifiedStorage

__all__ = ("ContextOffloader", "LineRange", "ShouldOffload")

logger = logging.getLogger(__name__)

_RETRIEVAL_TOOL = "retrieve_offloaded_content"


class LineRange(TypedDict):
    """A span of lines, 1-indexed, both ends included."""

    start: int
    end: int


class ShouldOffload(Protocol):
    """Decides whether an oversized result is offloaded: ``True`` offloads it, ``False`` keeps it in context."""

    def __call__(self, tool_name: str, token_count: int, **kwargs: Any) -> bool | Awaitable[bool]:
        """Called only for a result above ``max_result_tokens``; may be async; accept ``**kwargs`` (reserved)."""
        ...


class ContextOffloader(Plugin):
    """Keep oversized tool results out of the context: store their blocks, leave a preview and references.

    A tool result whose token count (the model's ``count_tokens`` of it, an estimate unless the model counts
    natively) exceeds ``max_result_tokens`` has each block stored in ``storage`` and is replaced, before it
    enters the conversation, by one text block: a header, guidance, the first ``preview_tokens`` (×4
    characters) of its text and JSON, and a reference per stored block; a stored image or document leaves a
    placeholder with its reference, and a block that cannot be stored stays as it is. Results of the
    retrieval tool itself, of a cancelled call, and of an agent tool that delegates are never offloaded.
    When storing fails, the original result is kept (logged).

    Args:
        storage: Where blocks go. An offloader storage of this package: ``InMemoryStorage``, ``FileStorage``
            (bound to each agent's ``agent.sandbox``), ``S3Storage``, or your own ``store``/``retrieve``
            :class:`Storage`. Or a :mod:`ray_harness.storage` ``Storage`` (``LocalFileStorage``, ...): blocks go
            under ``offloader/`` in it unless it is a ``namespace(...)`` already, keyed ``<toolUseId>_<n>`` (the
            reference); a ``LocalFileStorage`` is bound to each agent's sandbox. ``None``: the agent's
            ``storage`` when it has one (under ``offloader/``), else an ``InMemoryStorage`` of this package.
        max_result_tokens: Results above this many tokens are offloaded (default 2,500).
        preview_tokens: Tokens of preview kept in context (default 1,000); less than ``max_result_tokens``.
        include_retrieval_tool: Give the agent the ``retrieve_offloaded_content`` tool (default ``True``).
        should_offload: ``(tool_name, token_count, **kwargs) -> bool`` (may be async), asked for each oversized
            result; ``False`` keeps it. One that raises is logged and the result offloaded.
        evict_after_cycles: For a :mod:`ray_harness.storage` ``Storage``: a block neither stored nor retrieved
            in the last this many agent cycles is deleted before the next model call (default 20; ``None``
            keeps everything). Offloader storages evict themselves (``InMemoryStorage(evict_after_turns=)``).
            The plugin tracks the ages per agent in this process: a pickled copy starts with none.

    Raises:
        TypeError: A token count or ``evict_after_cycles`` is not an ``int``, or ``should_offload`` is not
            callable.
        ValueError: ``max_result_tokens`` is not positive, ``preview_tokens`` is negative or not below
            ``max_result_tokens``, or ``evict_after_cycles`` is not positive; ``storage`` has neither
            ``store``/``retrieve`` nor ``write``/``read``/``delete``.
    """

    name = "context_offloader"

    def __init__(self, storage: AnyStorage | None = None, max_result_tokens: int = 2_500,
                 preview_tokens: int = 1_000, *, include_retrieval_tool: bool = True,
                 should_offload: ShouldOffload | None = None, evict_after_cycles: int | None = 20) -> None:
        _check_arguments(storage, max_result_tokens, preview_tokens, should_offload, evict_after_cycles)
        self._storage: AnyStorage | None = _scoped(storage) if storage is not None else None
        self._max_result_tokens = max_result_tokens
        self._preview_tokens = preview_tokens
        self._include_retrieval_tool = include_retrieval_tool
        self._should_offload = should_offload
        self._evict_after_cycles = evict_after_cycles
        self._storage_by_agent: weakref.WeakKeyDictionary[Any, AnyStorage] = weakref.WeakKeyDictionary()
        # agent -> {reference: the cycle it was last stored or retrieved in}, for a unified Storage's eviction
        self._stored_cycles: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
        super().__init__()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        # Weak references do not pickle: a copy binds its agent on first use and tracks ages from then on.
        del state["_storage_by_agent"], state["_stored_cycles"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._storage_by_agent = weakref.WeakKeyDictionary()
        self._stored_cycles = weakref.WeakKeyDictionary()

    def init_agent(self, agent: "Agent") -> None:
        """Resolve the storage, bind it to ``agent``, and drop the retrieval tool unless it is wanted.

        The storage is resolved once, by the first agent: one plugin is not meant for agents with different
        storages.
        """
        if self._storage is None:
            shared = getattr(agent, "storage", None)  # an agent-level storage, where the agent has one
            self._storage = _scoped(shared) if shared is not None else InMemoryStorage()
        if isinstance(self._storage, InMemoryStorage):
            self._storage._bind(id(agent))
        self._storage_for(agent)
        if not self._include_retrieval_tool:
            self._tools = [each for each in self.tools if each.tool_name != _RETRIEVAL_TOOL]

    def _storage_for(self, agent: Any) -> AnyStorage:
        """The storage of ``agent``: one with ``for_sandbox`` is bound to the agent's sandbox once."""
        if self._storage is None:
            raise RuntimeError("ContextOffloader storage not initialized; call init_agent first")
        bind = getattr(self._storage, "for_sandbox", None)
        if bind is None:
            return self._storage
        bound = self._storage_by_agent.get(agent)
        if bound is None:
            bound = self._storage_by_agent[agent] = bind(agent.sandbox)
        return bound

    @hook
    async def _on_before_model_call(self, event: BeforeModelCallEvent) -> None:
        """Evict what went unused: ``InMemoryStorage`` itself, a unified Storage's blocks by the plugin."""
        cycle = event.agent.event_loop_metrics.cycle_count
        if isinstance(self._storage, InMemoryStorage):
            self._storage._evict(cycle)
            return
        if self._storage is None or is_offloader_storage(self._storage) or self._evict_after_cycles is None:
            return
        ages = self._stored_cycles.get(event.agent)
        stale = [ref for ref, used in (ages or {}).items() if used < cycle - self._evict_after_cycles]
        if not ages or not stale:
            return
        storage: Any = self._storage_for(event.agent)
        evicted = 0
        for reference in stale:
            try:
                await storage.delete(reference)
            except Exception as error:  # kept, and tried again before the next model call
                logger.debug("key=<%s>, error=<%s> | failed to evict stale entry", reference, error)
                continue
            del ages[reference]
            evicted += 1
        if evicted:
            logger.debug("evicted=<%d>, cycle=<%d> | stale entries removed", evicted, cycle)

    def _note_used(self, agent: Any, reference: str) -> None:
        """Record that ``reference`` was stored or retrieved this cycle (unified Storage only)."""
        if self._storage is None or is_offloader_storage(self._storage):
            return
        ages = self._stored_cycles.get(agent)
        if ages is None:
            ages = self._stored_cycles[agent] = {}
        ages[reference] = agent.event_loop_metrics.cycle_count

    @hook
    async def _on_after_tool_call(self, event: AfterToolCallEvent) -> None:
        """Offload an oversized result block by block and put the preview in its place."""
        name = event.tool_use.get("name", "")
        if event.cancel_message is not None or (self._include_retrieval_tool and name == _RETRIEVAL_TOOL):
            return
        if isinstance(event.selected_tool, SubAgentTool) and event.selected_tool._delegate:
            return  # its result is the user's final answer: no later model call could retrieve it
        result, use_id = event.result, event.tool_use["toolUseId"]
        tokens = await _count_tokens(event.agent, {"role": "user", "content": [{"toolResult": result}]})
        if tokens <= self._max_result_tokens or not await self._wanted(name, tokens, use_id):
            return
        try:
            stored = await store_blocks(self._storage_for(event.agent), use_id, result["content"],
                                        on_stored=lambda reference: self._note_used(event.agent, reference))
        except Exception:
            logger.warning("tool_use_id=<%s> | failed to offload tool result, keeping original", use_id,
                           exc_info=True)
            return
        preview = preview_source(result["content"])[:self._preview_tokens * CHARS_PER_TOKEN]
        logger.debug("tool_use_id=<%s>, blocks=<%d>, tokens=<%d> | tool result offloaded", use_id, len(stored),
                     tokens)
        event.result = offloaded_result(result, stored, token_count=tokens, preview=preview,
                                        with_tool=self._include_retrieval_tool)

    async def _wanted(self, tool_name: str, tokens: int, use_id: str) -> bool:
        if self._should_offload is None:
            return True
        try:
            verdict = self._should_offload(tool_name, tokens)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            return bool(verdict)
        except Exception:
            logger.warning("tool_use_id=<%s> | should_offload callback failed, falling back to default offload",
                           use_id, exc_info=True)
            return True

    @tool(context=True)
    async def retrieve_offloaded_content(self, reference: str, tool_context: ToolContext, pattern: str | None = None,
                                         line_range: LineRange | None = None,
                                         context_lines: int | None = None) -> dict[str, Any] | str:
        """Read back a tool result that was offloaded because it was too large, by the reference its preview lists.

        With a pattern: the matching lines, numbered, with context lines around them. With a line_range: those
        lines, numbered. With both: the matches within the range. With neither: the whole stored content —
        all its tokens come back, so use that last. Patterns and line ranges apply to text content only (text,
        JSON); for an image or document, give the reference alone. Line numbers start at 1 and can be passed
        back as a line_range.

        Examples: {"reference": "mem_1_tool-1_0", "pattern": "error|warning", "context_lines": 3};
        {"reference": "mem_1_tool-1_0", "line_range": {"start": 10, "end": 25}}.

        Args:
            reference: A reference from the offloaded result (e.g. "mem_1_tool-123_0").
            tool_context: Given by the agent.
            pattern: A regex (or plain keyword) to find lines by; only matching lines and their context return.
            line_range: Only these lines: {"start": first, "end": last}, 1-indexed; combine with pattern to
                search within them.
            context_lines: Lines shown before and after each match (default 5); alone, the first this many lines.
        """
        try:
            data, content_type = await retrieve_content(self._storage_for(tool_context.agent), reference)
        except KeyError as error:
            raise ValueError(f"reference not found: {reference}") from error
        self._note_used(tool_context.agent, reference)  # content in active use outlives evict_after_cycles
        if pattern is None and line_range is None and context_lines is None:
            return decode_full(data, content_type, reference)
        if not is_searchable(content_type):
            raise ValueError(f"cannot search binary content ({content_type}). "
                             "Omit pattern/line_range/context_lines to retrieve the full content.")
        around = 5 if context_lines is None else context_lines
        span = (int(line_range["start"]), int(line_range["end"])) if line_range is not None else \
            None if pattern is not None else (1, max(1, around))
        return search_text(data.decode("utf-8"), pattern=pattern, line_range=span, context_lines=around,
                           max_chars=self._max_result_tokens * CHARS_PER_TOKEN)


async def _count_tokens(agent: Any, message: Message) -> int:
    """The model's count of ``message`` (Strands asks ``model.count_tokens``); the estimate when it cannot."""
    count = getattr(agent.model, "count_tokens", None)
    if count is not None:
        try:
            return int(await count([message]))
        except Exception as error:  # the estimate still decides, as it does for the model call itself
            logger.debug("error=<%s> | token count failed; using the estimate", error)
    return estimate_tokens([message])


def _check_arguments(storage: object, max_result_tokens: object, preview_tokens: object,
                     should_offload: object, evict_after_cycles: object) -> None:
    """Raise the error naming the first bad constructor argument."""
    for label, value in (("max_result_tokens", max_result_tokens), ("preview_tokens", preview_tokens)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{label} must be an int, got {value!r}")
    assert isinstance(max_result_tokens, int) and isinstance(preview_tokens, int)
    if max_result_tokens <= 0:
        raise ValueError(f"max_result_tokens must be positive, got {max_result_tokens}")
    if preview_tokens < 0:
        raise ValueError(f"preview_tokens must be non-negative, got {preview_tokens}")
    if preview_tokens >= max_result_tokens:
        raise ValueError(f"preview_tokens must be less than max_result_tokens ({preview_tokens} >= "
                         f"{max_result_tokens})")
    if evict_after_cycles is not None and (not isinstance(evict_after_cycles, int)
                                           or isinstance(evict_after_cycles, bool) or evict_after_cycles < 1):
        raise ValueError(f"evict_after_cycles must be a positive integer or None, got {evict_after_cycles!r}")
    if should_offload is not None and not callable(should_offload):
        raise TypeError(f"should_offload must be callable, got {should_offload!r}")
    if storage is not None and not (is_offloader_storage(storage) or is_unified_storage(storage)):
        raise ValueError("storage must have async store() and retrieve() methods (an offloader storage) or "
                         "write(), read() and delete() (a ray_harness.storage Storage), got "
                         f"{type(storage).__name__}")


def _scoped(storage: AnyStorage) -> AnyStorage:
    """An offloader storage as it is; a unified Storage under ``offloader/`` unless scoped already."""
    if is_offloader_storage(storage) or getattr(storage, "_namespaced", None) is _NAMESPACED:
        return storage
    return _NamespacedStorage(cast("UnifiedStorage[Any, Any]", storage), "offloader")
