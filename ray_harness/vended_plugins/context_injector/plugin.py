"""The ``ContextInjector`` plugin (Strands' ``strands.vended_plugins.context_injector``)."""

from __future__ import annotations

from typing import Any

from ray_harness.injection._message_injection import InjectionMiddleware, RenderContent
from ray_harness.injection.types import InjectionTriggerPredicate
from ray_harness.middleware import InvokeModelStage
from ray_harness.plugins.plugin import Plugin

_DEFAULT_NAME = "strands:context-injector"  # Strands' default name: one program's plugins keep their names


class ContextInjector(Plugin):
    """Before each model call, fold ``render_content``'s text into the model input — for that call only.

    The text is appended to the latest user message of the call's input (a blank line after the message's own
    text); the agent's messages, and so sessions and snapshots, never contain it. Several injectors each add
    their text, in the order the agent got them (give each its own ``name``).

    Args:
        render_content: ``(InjectionContext) -> str | None`` (sync or async): the text for this call; ``None`` or
            blank skips it. The text reaches the model verbatim — escape anything a user could have written. A
            callback that raises skips the injection (logged); the model call goes on.
        name: The plugin's name (default ``"strands:context-injector"``).
        trigger: ``"userTurn"`` (default: only when the latest message is a user's ask, not a tool result),
            ``"everyTurn"``, or a predicate over the ``InjectionContext`` (one that raises skips the injection).

    Raises:
        TypeError: ``render_content`` is not callable.
        ValueError: ``trigger`` is neither a trigger name nor callable.
    """

    name = _DEFAULT_NAME

    def __init__(self, render_content: RenderContent, *, name: str | None = None,
                 trigger: InjectionTriggerPredicate | None = None) -> None:
        self._middleware = InjectionMiddleware(render_content, trigger)
        self.name = name or _DEFAULT_NAME
        super().__init__()

    def init_agent(self, agent: Any) -> None:
        """Register the injection on the agent's ``InvokeModelStage.Input`` phase."""
        agent.add_middleware(InvokeModelStage.Input, self._middleware)
