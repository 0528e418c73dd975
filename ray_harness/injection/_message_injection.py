"""The middleware that folds injected text into the latest user message of one model call."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ray_harness.injection.types import InjectionContext, InjectionTriggerPredicate
from ray_harness.middleware.types import InvokeModelContext
from ray_harness.types.content import Message

logger = logging.getLogger(__name__)


class RenderContentCallback(Protocol):
    """Renders the text to inject for a model call (a plain function qualifies)."""

    def __call__(self, context: InjectionContext, **kwargs: Any) -> str | Awaitable[str | None] | None:
        """The text to inject; ``None`` or blank to skip this call."""
        ...


RenderContent = Callable[[InjectionContext], "str | Awaitable[str | None] | None"] | RenderContentCallback


class InjectionMiddleware:
    """An ``InvokeModelStage.Input`` handler: the call's context with ``render_content``'s text folded in.

    A class rather than a closure so an agent carrying it pickles with the standard pickler too (agents ship to
    Ray hosts). Everything that skips — the trigger not firing, blank text, a callback that raises — hands the
    context on unchanged: an injection never stops the model call. The agent's own history is never touched (the
    context's messages are the call's copies).
    """

    def __init__(self, render_content: RenderContent, trigger: InjectionTriggerPredicate | None = None) -> None:
        if not callable(render_content):
            raise TypeError(f"render_content must be callable, got {render_content!r}")
        if trigger is not None and trigger not in ("userTurn", "everyTurn") and not callable(trigger):
            raise ValueError(f"trigger must be 'userTurn', 'everyTurn' or a predicate, got {trigger!r}")
        self.render_content = render_content
        self.trigger = trigger

    async def __call__(self, context: InvokeModelContext) -> InvokeModelContext:
        agent = context.agent
        injection = InjectionContext(messages=list(context.messages), state=agent.state, agent=agent)
        if not self._fires(injection):
            return context
        try:
            text = self.render_content(injection)
            if inspect.isawaitable(text):
                text = await text
        except Exception as error:  # an injection must not fail the model call
            logger.warning("reason=<%s> | injection render_content raised | skipping injection", error)
            return context
        if not isinstance(text, str) or not text.strip():
            return context
        return context.replace(messages=fold_into_last_user_message(context.messages, text))

    def _fires(self, context: InjectionContext) -> bool:
        trigger = self.trigger
        if trigger is None or trigger == "userTurn":
            return is_user_turn(context.messages)
        if trigger == "everyTurn":
            return True
        try:
            return bool(trigger(context))
        except Exception as error:
            logger.warning("reason=<%s> | injection trigger raised | skipping injection", error)
            return False


def is_user_turn(messages: list[Message]) -> bool:
    """Whether the latest message is a fresh ask: a ``user`` message carrying no tool result."""
    if not messages:
        return False
    last = messages[-1]
    return last["role"] == "user" and not any("toolResult" in block for block in last["content"])


def fold_into_last_user_message(messages: list[Message], text: str) -> list[Message]:
    """A new list whose latest ``user`` message ends with ``text`` as one more text block.

    Appended, not prepended: a tool result must stay the first block of the turn answering a tool use, and text in
    front of the stable conversation would move every provider's prompt-cache prefix. A blank line separates it
    from the message's own text (some providers join adjacent text blocks). Neither ``messages`` nor its messages
    are changed; with no ``user`` message the list comes back as it is.
    """
    for index in range(len(messages) - 1, -1, -1):
        target = messages[index]
        if target["role"] != "user":
            continue
        has_text = any("text" in block for block in target["content"])
        separator = "\n\n" if has_text and not text.startswith("\n") else ""
        folded: Message = {**target, "content": [*target["content"], {"text": separator + text}]}
        return [*messages[:index], folded, *messages[index + 1:]]
    return messages
