"""Composes middleware handlers into an onion around a terminal call.

Layers, outermost first: every Input handler, then every Output handler, then
every Wrap handler (so Input runs before the call, Wrap around it, Output on
its result, whatever the registration order); within a phase the first
registered handler is outermost. With nothing registered the terminal runs
with zero layers. Inner generators are always closed when their layer ends,
including every one a Wrap handler opened through ``next_fn``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable
from typing import Any

from ray_harness.middleware.types import MiddlewareStage, _Phase

__all__ = ("MiddlewareRegistry", "Next")

Next = Callable[[Any], AsyncGenerator[Any, None]]
_PHASE_RANK = {"input": 0, "output": 1, "wrap": 2}


class MiddlewareRegistry:
    """The middleware of one agent, per stage, in run order (Input, then Wrap, then Output)."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[tuple[str, Callable[..., Any]]]] = {}

    def add_middleware(self, stage_or_phase: MiddlewareStage | _Phase, handler: Callable[..., Any]) -> None:
        """Register ``handler`` on a stage (a Wrap) or on one of its phases.

        Args:
            stage_or_phase: ``InvokeModelStage`` / ``ExecuteToolStage`` (wrap), or their ``.Input`` / ``.Output``.
            handler: ``ctx -> ctx`` (Input), ``result -> result`` (Output) or an async generator ``(ctx, next_fn)``
                (Wrap).

        Raises:
            TypeError: An unknown stage, a non-callable handler, or a Wrap that is not an async generator function.
        """
        if isinstance(stage_or_phase, _Phase):
            stage, phase = stage_or_phase.stage, stage_or_phase.phase
        elif isinstance(stage_or_phase, MiddlewareStage):
            stage, phase = stage_or_phase, "wrap"
        else:
            raise TypeError(f"expected a middleware stage or phase (e.g. InvokeModelStage.Input), got {stage_or_phase!r}")
        if not callable(handler):
            raise TypeError(f"middleware handler must be callable, got {handler!r}")
        if phase == "wrap" and not _is_async_generator_function(handler):
            raise TypeError("a Wrap middleware must be an async generator function (ctx, next_fn)")
        handlers = self._handlers.setdefault(stage.name, [])
        handlers.append((phase, _adapt(stage, phase, handler)))
        handlers.sort(key=lambda item: _PHASE_RANK[item[0]])  # stable: registration order within a phase

    def has(self, stage: MiddlewareStage) -> bool:
        """Whether ``stage`` has any middleware."""
        return bool(self._handlers.get(stage.name))

    def compose(self, stage: MiddlewareStage, terminal: Next) -> Next:
        """The stage's onion around ``terminal`` (``terminal`` itself when nothing is registered)."""
        handlers = self._handlers.get(stage.name)
        if not handlers:
            return terminal
        call = terminal
        for _, handler in reversed(handlers):
            call = _bind(handler, call)
        return call


def _is_async_generator_function(handler: Callable[..., Any]) -> bool:
    # A callable object counts when its __call__ is an async generator method.
    return inspect.isasyncgenfunction(handler) or inspect.isasyncgenfunction(type(handler).__call__)


def _bind(handler: Callable[[Any, Next], AsyncGenerator[Any, None]], inner: Next) -> Next:
    async def layer(ctx: Any) -> AsyncGenerator[Any, None]:
        # Every inner chain the handler opens is closed with the layer: a wrap that stops reading one (a
        # short-circuit after a peek, a retry) would otherwise leave the tool or the model stream open until
        # the event loop's finalizer gets to it, after the call's result was recorded.
        opened: list[AsyncGenerator[Any, None]] = []

        def tracking_next(inner_ctx: Any) -> AsyncGenerator[Any, None]:
            generator = inner(inner_ctx)
            opened.append(generator)
            return generator

        generator = handler(ctx, tracking_next)
        try:
            async for event in generator:
                yield event
        finally:
            try:
                await generator.aclose()
            finally:
                for opened_generator in opened:
                    await opened_generator.aclose()

    return layer


def _adapt(stage: MiddlewareStage, phase: str, handler: Callable[..., Any]) -> Callable[[Any, Next], Any]:
    """A handler of ``phase`` (``wrap``, ``input`` or ``output``) as a wrap layer of the stage's chain."""
    if phase == "wrap":
        return handler
    if phase == "input":
        return _input_layer(handler)
    return _output_layer(stage, handler)


def _input_layer(handler: Callable[..., Any]) -> Callable[[Any, Next], Any]:
    """A layer that lets an Input handler change (or keep, returning None) the context passed inward."""

    async def input_layer(ctx: Any, next_fn: Next) -> AsyncGenerator[Any, None]:
        changed = handler(ctx)
        if inspect.isawaitable(changed):
            changed = await changed
        if changed is None:
            changed = ctx
        inner = next_fn(changed)
        try:
            async for event in inner:
                yield event
        finally:
            await inner.aclose()

    return input_layer


def _output_layer(stage: MiddlewareStage, handler: Callable[..., Any]) -> Callable[[Any, Next], Any]:
    """A layer that holds back the stage's result event and yields what the Output handler makes of it."""

    async def output_layer(ctx: Any, next_fn: Next) -> AsyncGenerator[Any, None]:
        result = None
        inner = next_fn(ctx)
        try:
            async for event in inner:
                if isinstance(event, stage.result_event):
                    result = event  # held back: the Output handler sees the final result once
                    continue
                yield event
        finally:
            await inner.aclose()
        if result is None:
            return
        wrapped = handler(stage.result_type(result=result))
        if inspect.isawaitable(wrapped):
            wrapped = await wrapped
        if not isinstance(wrapped, stage.result_type) or not isinstance(wrapped.result,  # type: ignore[attr-defined]
                                                                         stage.result_event):
            raise TypeError(f"{stage.name}.Output handler must return {stage.result_type.__name__} wrapping a "
                            f"{stage.result_event.__name__}, got {wrapped!r}")
        yield wrapped.result  # type: ignore[attr-defined]

    return output_layer
