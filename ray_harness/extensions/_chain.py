"""One agent chain's contributions: assembled per invocation, resolved onto the model and tool stacks.

The stacks, outer to inner (the host's own layers in brackets):

* model: ``MODEL_LOGICAL`` → [retry layer: ``ModelRetryStrategy``, context-overflow reduction,
  Guide-after-model, ``AfterModelCallEvent.retry``] → [``agent.add_middleware`` model stages] →
  ``MODEL_PHYSICAL`` → [provider];
* tool: ``TOOL_VISIBLE`` → [interventions, tool hooks, ``agent.add_middleware`` tool stages, error
  wrapping, result conversion] → ``TOOL_RAW`` → [the tool].

``assemble`` returns None when no contribution applies, and the loop then runs exactly as without
extensions. The loop calls in at four points: around the logical model call (:meth:`ExtensionChain.model_call`),
around the provider terminal (:meth:`physical`), around each tool call (:meth:`tool_runner`) and around the
tool's own stream (:meth:`raw_stream`, which hands tools that expose their raw call a raw observer).
"""

from __future__ import annotations

import copy
import marshal
import re
from collections.abc import AsyncGenerator, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from ray_harness.extensions import loading
from ray_harness.extensions._isolation import Layers, Wrapper, diagnostic, logger, run_lifecycle, shared_copy
from ray_harness.extensions.types import (
    AgentBuildContext,
    AgentScope,
    ExtensionData,
    ExtensionError,
    LifecycleContext,
    MiddlewarePlacement,
    Placement,
    implemented,
)
from ray_harness.interrupts import InterruptException
from ray_harness.middleware.types import ExecuteToolContext, InvokeModelContext, ModelStopReason, ToolResultEvent
from ray_harness.tools.base import RawReturn
from ray_harness.tools.executors import ToolInterruptedMarker

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.agent.loop import Invocation

__all__ = ("SCOPE_KEY", "ExtensionChain", "assemble", "check_invariants", "model_stack", "tool_stack")

SCOPE_KEY = "__ray_harness_extension_scope__"
"""Invocation-state key by which an agent-as-tool marks its child's invocation as a sub-agent execution."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_LIFECYCLE = ("before_agent", "abefore_agent", "before_model", "abefore_model", "after_model", "aafter_model",
              "after_agent", "aafter_agent")
_ASYNC_WRAP = {Placement.MODEL_LOGICAL: "awrap_model_call", Placement.MODEL_PHYSICAL: "awrap_model_call",
               Placement.TOOL_VISIBLE: "awrap_tool_call", Placement.TOOL_RAW: "awrap_tool_call"}
_warned: set[tuple[type, str]] = set()  # (middleware class, hook or placement) already warned about
_CACHE_SIZE = 256
_resolved: dict[tuple[Any, ...], Resolution] = {}

# Host anchors of each stack, outer to inner, and where each placement goes relative to them.
RETRY, MODEL_STAGES, PROVIDER = "[retry layer]", "[add_middleware model stages]", "[provider]"
TOOL_PIPELINE, TOOL = "[interventions, tool hooks, tool stages, error wrapping, result conversion]", "[tool]"
# placement -> (primary anchor, side): a contribution goes just outside (before) its anchor. MODEL_LOGICAL falls
# back to the model stages when the retry layer is absent (retry_strategy=None).
ANCHORS: dict[Placement, tuple[str, str]] = {
    Placement.MODEL_LOGICAL: (RETRY, "outside"),
    Placement.MODEL_PHYSICAL: (PROVIDER, "outside"),
    Placement.TOOL_VISIBLE: (TOOL_PIPELINE, "outside"),
    Placement.TOOL_RAW: (TOOL, "outside"),
}


def assemble(agent: Agent, inv: Invocation) -> ExtensionChain | None:
    """The chain's contributions for this invocation, or None when there are none.

    Raises:
        ExtensionError: the final stack breaks an ordering invariant (names the extension).
    """
    subagent = inv.state.pop(SCOPE_KEY, None) is not None
    extensions = loading.installed()
    if not extensions:
        return None
    scope = AgentScope.SUBAGENT if subagent else AgentScope.LEAD
    ctx = AgentBuildContext(scope=scope, agent_name=agent.name, model_name=_model_name(agent),
                            policy={"limits": dict(inv.limits or {})})
    placed: list[tuple[int, int, str, MiddlewarePlacement]] = []
    for extension in list(extensions):
        for contributor in list(extension.contributors):
            owner = type(contributor).__name__
            try:
                items = _contributions(contributor.contribute_middlewares(loading.app_store, ctx))
            except Exception as error:
                diagnostic(extension.use, owner, "contribute_middlewares", error)
                continue
            for index, item in enumerate(items):
                if not isinstance(item, MiddlewarePlacement):
                    diagnostic(extension.use, owner, "contribute_middlewares",
                               f"item {index} is not a MiddlewarePlacement (got {type(item).__name__}); skipped")
                    continue
                if item.scope & scope:
                    placed.append((item.order, len(placed), extension.use, item))
    if not placed:
        return None
    retry = agent.retry_strategy is not None
    cached = _resolution(placed, retry)
    if not retry and cached.logical_wrappers:
        for use in dict.fromkeys(wrapper.use for wrapper in cached.logical_wrappers):
            logger.warning("Extension %s: placement MODEL_LOGICAL fell back to a secondary anchor (primary anchor "
                           "%s is absent from this stack: retry_strategy=None); it sits at the outermost model "
                           "position", use, RETRY)
    return ExtensionChain(agent, inv, cached)


def _contributions(returned: Any) -> list[Any]:
    """What a contributor returned, as a list (None: nothing).

    Raises:
        TypeError: not a sequence of placements (a lone placement, a string or a mapping is a mistake, not a list).
    """
    if isinstance(returned, MiddlewarePlacement | str | bytes | dict) or (
            returned is not None and not hasattr(returned, "__iter__")):
        raise TypeError(f"contribute_middlewares returns a sequence of MiddlewarePlacement (or None), got "
                        f"{type(returned).__name__}")
    return list(returned or ())


def _resolution(placed: list[tuple[int, int, str, MiddlewarePlacement]], retry: bool) -> Resolution:
    """The cached :class:`Resolution` of these placements (the same objects), else a new one, cached."""
    key = (retry, tuple((use, id(item)) for _, _, use, item in placed))
    cached = _resolved.get(key)
    if cached is None or any(a is not b for a, b in zip(cached.items, (entry[3] for entry in placed), strict=True)):
        cached = _resolved[key] = Resolution(placed, retry)
        if len(_resolved) > _CACHE_SIZE:
            _resolved.pop(next(iter(_resolved)))
    return cached


class Resolution:
    """Contributions resolved onto the stacks and checked.

    Pure in its inputs, so reused while they repeat (contributors usually return the same placements every
    time).
    """

    def __init__(self, placed: list[tuple[int, int, str, MiddlewarePlacement]], retry: bool) -> None:
        self.items = tuple(entry[3] for entry in placed)
        placed = sorted(placed, key=lambda entry: (entry[0], entry[1]))  # lower order outer; then registration
        counts: dict[type, int] = {}
        names: set[str] = set()
        self.by_placement: dict[Placement, list[Wrapper]] = {}
        for order, _, use, item in placed:
            kind = type(item.middleware)
            number = counts.get(kind, 0)
            name = _UNSAFE.sub("_", f"extension_{use}_{kind.__name__}_{number}")
            while name in names:  # two in-code installs of one module:qualname with classes of one name
                number += 1
                name = _UNSAFE.sub("_", f"extension_{use}_{kind.__name__}_{number}")
            counts[kind] = number + 1
            names.add(name)
            self.by_placement.setdefault(item.placement, []).append(Wrapper(use, item.middleware, item.placement,
                                                                            order, name))
        check_invariants(model_stack(self.by_placement, retry=retry), "model")
        check_invariants(tool_stack(self.by_placement), "tool")
        self.logical_wrappers = self._active(Placement.MODEL_LOGICAL)
        self.physical_wrappers = self._active(Placement.MODEL_PHYSICAL)
        self.visible_wrappers = self._active(Placement.TOOL_VISIBLE)
        self.raw_wrappers = self._active(Placement.TOOL_RAW)
        self.standard = []
        for wrapper in self.by_placement.get(Placement.STANDARD, []):
            if any(implemented(wrapper.middleware, hook) for hook in _LIFECYCLE):
                self.standard.append(wrapper)
            else:
                _warn_inert(wrapper, "before_agent/before_model/after_model/after_agent")
        self.model_names = [wrapper.name for wrapper in self.logical_wrappers + self.physical_wrappers]
        self.tool_names = [wrapper.name for wrapper in self.visible_wrappers + self.raw_wrappers]
        (self.logical_layers, self.physical_layers, self.visible_layers, self.raw_layers,
         self.raw_fallback_layers) = _layers(self)

    def _active(self, placement: Placement) -> list[Wrapper]:
        """Wrappers whose async wrap hook exists; a sync-only one is a pass-through on the async path."""
        hook = _ASYNC_WRAP[placement]
        active = []
        for wrapper in self.by_placement.get(placement, []):
            if implemented(wrapper.middleware, hook):
                active.append(wrapper)
            elif implemented(wrapper.middleware, hook[1:]):
                _warn_once(wrapper, hook, "Extension %s: %s implements only %s; invocations take the async path, "
                           "where it is passed through (implement %s to observe calls)",
                           type(wrapper.middleware).__name__, hook[1:], hook)
            else:
                _warn_inert(wrapper, hook[1:])
        return active


def _warn_once(wrapper: Wrapper, key: str, message: str, *args: Any) -> None:
    """Log ``message`` (after the extension's name) once per process for this middleware class and ``key``."""
    if (type(wrapper.middleware), key) not in _warned:
        _warned.add((type(wrapper.middleware), key))
        logger.warning(message, wrapper.use, *args)


def _warn_inert(wrapper: Wrapper, hooks: str) -> None:
    """A contribution without any hook that acts at its placement observes nothing: say so rather than stay silent.

    Model wraps act only at model placements, tool wraps only at tool placements, lifecycle hooks only at STANDARD.
    """
    placement = wrapper.placement.name
    _warn_once(wrapper, placement, "Extension %s: %s at %s implements none of the hooks that act there (%s, sync "
               "or async); it observes nothing (model wraps act only at MODEL_* placements, tool wraps only at TOOL_* "
               "placements, lifecycle hooks only at STANDARD)", type(wrapper.middleware).__name__, placement, hooks)


def _layers(resolution: Resolution) -> tuple[Layers, Layers, Layers, Layers, Layers]:
    """Each placement's hooks, composed once per resolution (shared by every chain that resolves alike).

    In stack order: logical, physical, visible, raw, and raw for a tool without a raw call (around its stream).
    """
    from ray_harness.agent._tool_phase import _ToolDone, _ToolInterrupted

    return (Layers(resolution.logical_wrappers, "awrap_model_call", _model_view, ModelStopReason, _same, _stop_view),
            Layers(resolution.physical_wrappers, "awrap_model_call", _model_view, ModelStopReason, _same, _stop_view),
            Layers(resolution.visible_wrappers, "awrap_tool_call", _tool_view, (_ToolDone, _ToolInterrupted),
                   _visible_result, _shared_copy),
            Layers(resolution.raw_wrappers, "awrap_tool_call", _tool_view, RawReturn, _raw_value, _shared_copy),
            Layers(resolution.raw_wrappers, "awrap_tool_call", _tool_view, ToolResultEvent, _tool_result,
                   _shared_copy))


def model_stack(by_placement: dict[Placement, list[Wrapper]], *, retry: bool) -> list[Any]:
    """The final model stack, outer to inner: wrappers and host anchors (strings)."""
    stack: list[Any] = ([RETRY] if retry else []) + [MODEL_STAGES, PROVIDER]
    logical = by_placement.get(Placement.MODEL_LOGICAL, [])
    stack = _insert(stack, logical, ANCHORS[Placement.MODEL_LOGICAL][0] if retry else MODEL_STAGES)
    return _insert(stack, by_placement.get(Placement.MODEL_PHYSICAL, []), ANCHORS[Placement.MODEL_PHYSICAL][0])


def tool_stack(by_placement: dict[Placement, list[Wrapper]]) -> list[Any]:
    stack: list[Any] = [TOOL_PIPELINE, TOOL]
    stack = _insert(stack, by_placement.get(Placement.TOOL_VISIBLE, []), ANCHORS[Placement.TOOL_VISIBLE][0])
    return _insert(stack, by_placement.get(Placement.TOOL_RAW, []), ANCHORS[Placement.TOOL_RAW][0])


def _insert(stack: list[Any], wrappers: list[Wrapper], anchor: str) -> list[Any]:
    at = stack.index(anchor)
    return stack[:at] + list(wrappers) + stack[at:]


def check_invariants(stack: list[Any], axis: str) -> None:
    """The host's ordering invariants on a final stack; a violation names the responsible extension.

    Host anchors keep their order; ``MODEL_LOGICAL`` is outside the retry layer and the model stages,
    ``MODEL_PHYSICAL`` inside the model stages, ``TOOL_VISIBLE`` outside the tool pipeline, ``TOOL_RAW``
    inside it; the provider / tool is innermost; wrapper names are unique.

    Raises:
        ExtensionError: naming the extension, its wrapper and the broken invariant.
    """
    anchors = [entry for entry in stack if isinstance(entry, str)]
    expected = [RETRY, MODEL_STAGES, PROVIDER] if axis == "model" else [TOOL_PIPELINE, TOOL]
    if [entry for entry in expected if entry in anchors] != anchors or stack[-1] != expected[-1]:
        raise ExtensionError(f"the host's {axis} stack is out of order: {stack}")
    position = {entry: index for index, entry in enumerate(stack) if isinstance(entry, str)}
    rules: dict[Placement, tuple[str, str]] = {
        Placement.MODEL_LOGICAL: (RETRY if RETRY in position else MODEL_STAGES, "outside"),
        Placement.MODEL_PHYSICAL: (MODEL_STAGES, "inside"),
        Placement.TOOL_VISIBLE: (TOOL_PIPELINE, "outside"),
        Placement.TOOL_RAW: (TOOL_PIPELINE, "inside"),
    }
    seen: set[str] = set()
    for index, entry in enumerate(stack):
        if isinstance(entry, str):
            continue
        if entry.name in seen:
            raise ExtensionError(f"extension {entry.use!r}: wrapper name {entry.name} is not unique in the {axis} "
                                 "stack")
        seen.add(entry.name)
        anchor, side = rules[entry.placement]
        ok = index < position[anchor] if side == "outside" else index > position[anchor]
        if not ok:
            raise ExtensionError(f"extension {entry.use!r}: {entry.name} at {entry.placement.name} must sit {side} "
                                 f"{anchor}, but the final {axis} stack is {stack}")


class ExtensionChain:
    """The resolved contributions of one chain, its task store, and the layers the loop runs."""

    def __init__(self, agent: Agent, inv: Invocation, resolution: Resolution) -> None:
        self.store = ExtensionData()
        self.by_placement = resolution.by_placement
        self.logical_wrappers = resolution.logical_wrappers
        self.physical_wrappers = resolution.physical_wrappers
        self.visible_wrappers = resolution.visible_wrappers
        self.raw_wrappers = resolution.raw_wrappers
        self.standard = resolution.standard
        self.model_names = resolution.model_names
        self.tool_names = resolution.tool_names
        self._resolution = resolution
        self._agent = agent
        self._inv = inv
        self._raw_fallback_warned: set[str] = set()
        self._retry_layer: tuple[Any, Callable[[Any], AsyncGenerator[Any, None]]] | None = None
        self._run_one: tuple[Any, Callable[[Any], Any]] | None = None
        self._interrupted = partial(_wait_interrupted, inv)

    # -- lifecycle (STANDARD) -----------------------------------------------------------------------------

    async def lifecycle(self, hook: str, result: Any = None) -> None:
        """Run the ``STANDARD`` contributions' lifecycle ``hook`` (``before_*`` in order, ``after_*`` reversed)."""
        if self.standard:
            ctx = LifecycleContext(agent=self._agent, invocation_state=self._inv.state, result=result)
            wrappers = self.standard if hook.startswith("before") else list(reversed(self.standard))
            await run_lifecycle(wrappers, hook, ctx, self.store)

    # -- model axis ---------------------------------------------------------------------------------------

    def model_call(self, call_model: Callable[[Agent, Invocation], AsyncGenerator[Any, None]]
                   ) -> AsyncGenerator[Any, None]:
        """The logical model call: ``before_model``, the ``MODEL_LOGICAL`` layers around the retry loop, ``after_model``."""
        if self.standard:
            return self._logical_call(call_model)
        if not self.logical_wrappers:
            return call_model(self._agent, self._inv)
        return self._logical(call_model)

    def _logical(self, call_model: Callable[[Agent, Invocation], AsyncGenerator[Any, None]]
                 ) -> AsyncGenerator[Any, None]:
        """The ``MODEL_LOGICAL`` layers around one run of the retry layer."""
        agent, inv = self._agent, self._inv
        if self._retry_layer is None or self._retry_layer[0] is not call_model:

            def retry_layer(_: Any) -> AsyncGenerator[Any, None]:
                return call_model(agent, inv)

            self._retry_layer = (call_model, retry_layer)
        # the decision's request as the model stage builds it: a pending structured output adds its tool, and
        # on the forced turn its tool_choice
        specs = list(agent.tool_registry.get_all_specs())
        tool_choice = None
        structured = inv.structured
        if structured is not None and structured.value is None:
            specs.append(structured.spec)
            tool_choice = structured.tool_choice()
        request = InvokeModelContext(agent, agent.messages, agent.system_prompt, specs, tool_choice, inv.state)
        return self._resolution.logical_layers.run(self._retry_layer[1], request, self.store, self._interrupted)

    async def _logical_call(self, call_model: Callable[[Agent, Invocation], AsyncGenerator[Any, None]]
                            ) -> AsyncGenerator[Any, None]:
        if self.standard:
            await self.lifecycle("before_model")
        stop = None
        events = self._logical(call_model) if self.logical_wrappers else call_model(self._agent, self._inv)
        try:
            async for event in events:
                if isinstance(event, ModelStopReason):
                    stop = event
                yield event
        finally:
            await events.aclose()  # closed mid-call: the layers inside end before the agent is released
        if self.standard:
            await self.lifecycle("after_model", stop)

    def physical(self, terminal: Callable[[Any], AsyncGenerator[Any, None]]) -> Callable[[Any], Any]:
        """The provider terminal wrapped in the ``MODEL_PHYSICAL`` layers (unchanged without any)."""
        if not self.physical_wrappers:
            return terminal
        return partial(self._resolution.physical_layers.run, terminal, store=self.store, interrupted=self._interrupted)

    # -- tool axis ----------------------------------------------------------------------------------------

    def tool_runner(self, execute_tool: Callable[..., AsyncGenerator[Any, None]]) -> Callable[[Any], Any]:
        """``run_one(tool_use)`` for the executor: the tool call inside the ``TOOL_VISIBLE`` layers."""
        agent, inv = self._agent, self._inv
        if not self.visible_wrappers:
            return lambda tool_use: execute_tool(agent, inv, tool_use)
        if self._run_one is not None and self._run_one[0] is execute_tool:
            return self._run_one[1]

        def pipeline(request: ExecuteToolContext) -> AsyncGenerator[Any, None]:
            return execute_tool(agent, inv, request.tool_use)

        run, store, get = self._resolution.visible_layers.run, self.store, agent.tool_registry.get
        interrupted = self._interrupted

        def run_one(tool_use: Any) -> AsyncGenerator[Any, None]:
            return run(pipeline, ExecuteToolContext(agent, get(tool_use.get("name", "")), tool_use, inv.state,
                                                    inv.cancel_signal), store, interrupted)

        self._run_one = (execute_tool, run_one)
        return run_one

    def raw_stream(self, tool: Any, ctx: ExecuteToolContext, context: Any) -> AsyncGenerator[Any, None]:
        """``tool.stream(...)`` with the ``TOOL_RAW`` layers at the tool's raw call (or around the stream)."""
        if not self.raw_wrappers:
            return tool.stream(ctx.tool_use, context)  # type: ignore[no-any-return]
        request = ExecuteToolContext(ctx.agent, tool, ctx.tool_use, ctx.invocation_state, ctx.cancel_signal)
        if getattr(tool, "exposes_raw_call", False):
            run, store, interrupted = self._resolution.raw_layers.run, self.store, self._interrupted

            def observe(produce: Callable[[], AsyncGenerator[Any, None]]) -> AsyncGenerator[Any, None]:
                return run(lambda _: produce(), request, store, interrupted)

            context._raw_observer = observe
            return tool.stream(ctx.tool_use, context)  # type: ignore[no-any-return]
        name = getattr(tool, "tool_name", type(tool).__name__)
        if name not in self._raw_fallback_warned:
            self._raw_fallback_warned.add(name)
            for use in dict.fromkeys(wrapper.use for wrapper in self.raw_wrappers):
                logger.warning("Extension %s: placement TOOL_RAW fell back to a secondary anchor (primary anchor, the "
                               "raw call of tool %r, is absent from this stack: %s exposes none); it wraps the "
                               "tool's stream and sees its ToolResult", use, name, type(tool).__name__)
        return self._resolution.raw_fallback_layers.run(lambda _: tool.stream(ctx.tool_use, context), request, self.store,
                                                        self._interrupted)


class _PausedTool(InterruptException):
    """What ``handler`` raises at ``TOOL_VISIBLE`` when the tool paused for a human; the pause always propagates."""

    def __init__(self, interrupts: list[Any]) -> None:
        super().__init__(interrupts[0])
        self.interrupts = interrupts


def _detach(value: Any) -> Any:
    """A deep copy of ``value`` that shares nothing mutable with it; an immutable scalar is returned as it is.

    JSON-shaped data (what requests, messages and tool results are) goes through ``marshal``, which copies in C:
    a long history in tens of microseconds. Anything else is ``copy.deepcopy``'d; what cannot be copied at all is
    handed out as it is.
    """
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is dict or kind is list:
        try:
            return _loads(_dumps(value))
        except ValueError:  # an object marshal does not know (or nesting too deep): the general copy
            pass
    try:
        return copy.deepcopy(value)
    except Exception:
        return value


_IMMUTABLE = frozenset({str, int, float, bool, bytes, type(None)})
_dumps, _loads = marshal.dumps, marshal.loads


class _Copied:
    """A view's field whose value is detached (see :func:`_detach`) from the live one when the hook first reads it.

    A hook that never reads it costs nothing; one that reads it gets a copy of its own, kept for later reads. An
    assignment replaces the view's value only.
    """

    __slots__ = ("live", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.live = "_live_" + name

    def __get__(self, view: Any, owner: Any = None) -> Any:
        if view is None:
            return self
        values = view.__dict__
        try:
            return values[self.name]
        except KeyError:
            value = values[self.name] = _detach(values[self.live])
            return value

    def __set__(self, view: Any, value: Any) -> None:
        view.__dict__[self.name] = value


class _ModelView(InvokeModelContext):
    """What a model wrap hook gets: an ``InvokeModelContext`` whose messages, prompt, specs and choice are copies."""

    messages = _Copied("messages")
    system_prompt = _Copied("system_prompt")
    tool_specs = _Copied("tool_specs")
    tool_choice = _Copied("tool_choice")


class _ToolView(ExecuteToolContext):
    """What a tool wrap hook gets: an ``ExecuteToolContext`` whose ``tool_use`` is a copy."""

    tool_use = _Copied("tool_use")


def _model_view(request: InvokeModelContext) -> InvokeModelContext:
    # The history can be long: it is copied only if the hook reads it (see _Copied). Built field by field (see
    # _VIEW_FIELDS) rather than through the dataclass __init__: no Python call per field.
    view: Any = _new(_ModelView)
    view.agent = request.agent
    view._live_messages = request.messages
    view._live_system_prompt = request.system_prompt
    view._live_tool_specs = request.tool_specs
    view._live_tool_choice = request.tool_choice
    view.invocation_state = request.invocation_state
    return view  # type: ignore[no-any-return]


def _tool_view(request: ExecuteToolContext) -> ExecuteToolContext:
    view: Any = _new(_ToolView)
    view.agent = request.agent
    view.tool = request.tool
    view._live_tool_use = request.tool_use
    view.invocation_state = request.invocation_state
    view.cancel_signal = request.cancel_signal
    return view  # type: ignore[no-any-return]


_new = object.__new__
_VIEW_FIELDS = {InvokeModelContext: ("agent", "messages", "system_prompt", "tool_specs", "tool_choice",
                                     "invocation_state"),
                ExecuteToolContext: ("agent", "tool", "tool_use", "invocation_state", "cancel_signal")}
"""The fields each view sets: exactly the dataclass's fields (a unit test holds them equal), none with a __post_init__."""


class _StopView(ModelStopReason):
    """What ``handler`` returns to a model wrap hook: the ``ModelStopReason``, parts copied when first read.

    Its message, usage and metrics are copied (see :class:`_Copied`).
    """

    message = _Copied("message")
    usage = _Copied("usage")
    metrics = _Copied("metrics")


def _stop_view(run: Any) -> Any:
    stop = run.result
    if type(stop) is not ModelStopReason:
        return _detach(stop)
    view: Any = _new(_StopView)
    view.stop_reason = stop.stop_reason
    view._live_message = stop.message
    view._live_usage = stop.usage
    view._live_metrics = stop.metrics
    return view


_shared_copy = shared_copy(_detach)


def _visible_result(event: Any) -> Any:
    """The real result at ``TOOL_VISIBLE``: the ``ToolResult`` the model receives; a paused tool raises."""
    if isinstance(event, ToolInterruptedMarker):
        raise _PausedTool(event.interrupts)  # type: ignore[attr-defined]
    return event.result


def _same(event: Any) -> Any:
    return event


def _raw_value(event: Any) -> Any:
    return event.value


def _tool_result(event: Any) -> Any:
    return event.tool_result


def _wait_interrupted(inv: Invocation) -> bool:
    """Whether a cancel of the invocation's task now is the agent's interrupt of a wait (``agent.cancel()``)."""
    return inv.wait_interrupted and inv.interruptible_wait


def _model_name(agent: Agent) -> str:
    try:
        return str(agent.model.model_id)
    except Exception:  # a custom model without config
        return type(agent.model).__name__
