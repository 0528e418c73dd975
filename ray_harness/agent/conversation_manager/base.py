"""``ConversationManager``: keeps an agent's history within its context window."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from ray_harness.models.base import DEFAULT_CONTEXT_WINDOW_LIMIT, estimate_tokens, warn_default_context_window

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.hooks.registry import HookRegistry

__all__ = ("DEFAULT_COMPRESSION_THRESHOLD", "ConversationManager", "parse_proactive_compression", "threshold_tokens")

logger = logging.getLogger(__name__)

DEFAULT_COMPRESSION_THRESHOLD = 0.7


def parse_proactive_compression(value: Any) -> float | None:
    """``None``/``False`` → off, ``True`` → 0.7, ``{"compression_threshold": x}`` with 0 < x <= 1."""
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT_COMPRESSION_THRESHOLD
    if isinstance(value, dict):
        unknown = set(value) - {"compression_threshold"}
        if unknown:
            raise ValueError(f"proactive_compression: unknown key(s) {sorted(unknown)}; "
                             "expected only 'compression_threshold'")
        threshold = value.get("compression_threshold", DEFAULT_COMPRESSION_THRESHOLD)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 1:
            raise ValueError(f"proactive_compression.compression_threshold must be a number in (0, 1], got {threshold!r}")
        return float(threshold)
    raise TypeError(f"proactive_compression must be None, a bool or a dict, got {type(value).__name__}")


def threshold_tokens(agent: Agent, threshold: float | None) -> int | None:
    """The context size (tokens) at which proactive compression starts, or None (off).

    The share ``threshold`` of the model's ``context_window_limit``; a model without one is taken to have
    Strands' default of 200,000 tokens, with a ``UserWarning`` saying so, as Strands' ``estimate_utilization`` does.
    """
    if threshold is None:
        return None
    window = getattr(agent.model, "context_window_limit", None)
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        window = DEFAULT_CONTEXT_WINDOW_LIMIT
        warn_default_context_window(agent.model, "proactive compression", stacklevel=1)
    return int(window * threshold)


class ConversationManager(ABC):
    """Trims or summarizes ``agent.messages``.

    ``apply_management`` runs after every invocation; ``reduce_context`` runs when the model
    reports a context-window overflow (the loop then retries the cycle) and must raise the given
    error when it cannot reduce further.
    """

    def __init__(self, *, proactive_compression: bool | dict[str, Any] | None = None) -> None:
        """Start with no messages removed.

        Args:
            proactive_compression: ``True`` (threshold 0.7) or ``{"compression_threshold": x}``: before a
                model call, once the context is that fraction of ``agent.model.context_window_limit`` (200,000
                tokens when the model has none, with a ``UserWarning``, as in Strands), call
                :meth:`reduce_context` (best effort: an error there is logged and the call goes ahead), as
                Strands' base class does. Subclasses with their own compression override :meth:`before_model_call`.

        Raises:
            ValueError: ``compression_threshold`` is not in (0, 1].
        """
        self.removed_message_count = 0
        self.compression_threshold = None if proactive_compression is None else parse_proactive_compression(
            proactive_compression)  # the default taken as it is: every agent makes a manager

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Register hook callbacks (none here: the agent calls the manager's methods itself).

        The manager is a hook provider, as in Strands, so a subclass may add callbacks and call
        ``super().register_hooks(registry, **kwargs)``.
        """

    @abstractmethod
    def apply_management(self, agent: Agent, **kwargs: Any) -> None:
        """Keep ``agent.messages`` within bounds after an invocation."""

    @abstractmethod
    def reduce_context(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """Shorten ``agent.messages`` after a context-window overflow.

        Raises:
            Exception: ``e`` (the overflow) or ``ContextWindowOverflowException`` when nothing can be removed.
        """

    def before_model_call(self, agent: Agent, **kwargs: Any) -> None:
        """Proactive management before a model call: :meth:`reduce_context` once past the threshold, if one is set."""
        limit = threshold_tokens(agent, getattr(self, "compression_threshold", None))
        if limit is None:
            return
        specs = list(agent.tool_registry.get_all_specs())
        if estimate_tokens(agent.messages, agent.system_prompt, specs) < limit:
            return
        try:
            self.reduce_context(agent)
        except Exception:  # best effort, as in Strands: the model call may still fit, or overflow reactively
            logger.debug("proactive compression failed; the model call goes ahead", exc_info=True)

    # The loop awaits these two, so a manager that calls a model (summarizing) can do it without
    # blocking the event loop; the defaults delegate to the synchronous methods.
    async def reduce_context_async(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """The loop's entry for an overflow: by default :meth:`reduce_context`."""
        self.reduce_context(agent, e, **kwargs)

    async def before_model_call_async(self, agent: Agent, **kwargs: Any) -> None:
        """The loop's entry before each model call: by default :meth:`before_model_call`."""
        self.before_model_call(agent, **kwargs)

    def get_state(self) -> dict[str, Any]:
        """The state a session persists: the manager's class name and how many messages it removed."""
        return {"__name__": type(self).__name__, "removed_message_count": self.removed_message_count}

    def restore_from_session(self, state: dict[str, Any]) -> list[Any] | None:
        """Restore the state written by :meth:`get_state`.

        Returns:
            Messages to put back in front of the restored conversation, or ``None`` (the base adds none).

        Raises:
            ValueError: The state was written by another manager class.
        """
        if state.get("__name__") not in (None, type(self).__name__):
            raise ValueError(f"conversation manager state is for {state.get('__name__')}, not {type(self).__name__}")
        self.removed_message_count = int(state.get("removed_message_count", 0))
        return None
