"""``Agent``: configuration and entry points. The loop itself lives in :mod:`ray_harness.agent.loop`."""

from __future__ import annotations

import asyncio
import copy
import threading
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ray_harness._signal import Signal
from ray_harness.agent._arguments import (
    check_arguments,
    check_identity,
    check_system_prompt,
    checked_baggage,
    checked_sandbox,
    checked_storage,
    default_conversation_manager,
    default_sandbox,
    resolve_aux_model,
    resolve_model,
)
from ray_harness.agent._sync import run_sync
from ray_harness.agent.conversation_manager.base import ConversationManager
from ray_harness.agent.limits import Limits
from ray_harness.agent.result import AgentResult, EventLoopMetrics
from ray_harness.agent.retry import ModelRetryStrategy
from ray_harness.agent.state import AgentState
from ray_harness.agent.tool_caller import ToolCaller
from ray_harness.hooks.events import AgentInitializedEvent, MessageAddedEvent
from ray_harness.hooks.registry import (
    BaseHookEvent,
    HookOrder,
    HookProvider,
    HookRegistry,
    infer_event_type,
    is_hook_provider,
)
from ray_harness.interrupts import InterruptState
from ray_harness.middleware.registry import MiddlewareRegistry
from ray_harness.models.base import Model
from ray_harness.tools.executors import ConcurrentToolExecutor, ToolExecutor
from ray_harness.tools.registry import ToolRegistry
from ray_harness.types.content import Message, SystemContentBlock
from ray_harness.types.exceptions import ConcurrencyException
from ray_harness.types.validation import validate_messages

if TYPE_CHECKING:
    from ray_harness.agent._idempotency import Inflight
    from ray_harness.agent.field_snapshot import Snapshot
    from ray_harness.agent.snapshot import AgentSnapshot, SnapshotDelta
    from ray_harness.background_tasks import BackgroundTasksConfig
    from ray_harness.plugins import Plugin

__all__ = ("Agent", "run_sync")  # run_sync: imported from here by the packages that drive agents

_DEFAULT_RETRY = object()
_CHECKED_FIELDS = ("model", "system_prompt", "state")  # properties whose setters check the value
class Agent:
    """A model-driven agent loop with tools, hooks, middleware, interventions and interrupts."""

    # Class-level defaults: most agents have neither, and an agent pickled before they existed still reads them.
    structured_output_model: type | None = None
    """The pydantic model every invocation's answer fills unless the call names another (as in Strands)."""
    callback_handler: Callable[..., Any] | None = None
    """Called with every stream event's fields as keyword arguments (Strands' ``callback_handler``)."""
    structured_output_prompt: str | None = None
    """The user message that asks for the structured output when the model answered without it (None: Strands')."""
    _session_id: str | None = None  # made on first read of ``session_id`` when no session manager has one
    memory_manager: Any = None
    """The agent's :class:`~ray_harness.memory.MemoryManager` (``memory_manager=``), or ``None``."""
    _background_tasks: Any = None  # background_tasks=: the plugin that runs tool calls in the background
    _aux_model: Model | None = None  # aux_model=; the agent's model answers side calls without one
    _storage: Any = None  # storage=
    _baggage_attributes: dict[str, str] | None = None  # baggage_attributes=; a dict is made on first read only
    _inflight: Inflight | None = None  # the running invocation's idempotency_token (see _idempotency)

    def __init__(
        self,
        model: Model | str | None = None,
        messages: list[Message] | None = None,
        tools: list[Any] | None = None,
        system_prompt: str | list[SystemContentBlock] | None = None,
        *,
        name: str = "agent",
        agent_id: str = "default",
        description: str | None = None,
        state: AgentState | dict[str, Any] | None = None,
        hooks: list[HookProvider | Callable[..., Any]] | None = None,
        plugins: list[Plugin] | None = None,
        interventions: list[Any] | None = None,
        conversation_manager: ConversationManager | None = None,
        session_manager: Any = None,
        sandbox: Any = None,
        tool_executor: ToolExecutor | None = None,
        retry_strategy: ModelRetryStrategy | Any | None = _DEFAULT_RETRY,
        checkpointing: bool = False,
        trace_attributes: dict[str, Any] | None = None,
        record_direct_tool_call: bool = True,
        max_guide_retries: int = 3,
        structured_output_model: type | None = None,
        callback_handler: Callable[..., Any] | None = None,
        structured_output_prompt: str | None = None,
        concurrent_invocation_mode: str = "throw",
        memory_manager: Any = None,
        background_tasks: bool | BackgroundTasksConfig | None = None,
        aux_model: Model | str | None = None,
        storage: Any = None,
        baggage_attributes: Mapping[str, str] | None = None,
    ) -> None:
        """Configure an agent as in Strands; every argument is checked here, and a wrong one is named.

        ``system_prompt`` is a string or a list of ``{"text": ...}`` / ``{"cachePoint": {...}}`` blocks (cache
        points reach Bedrock and Anthropic; other providers get the texts, one per line).
        ``structured_output_model`` is the pydantic model every invocation's answer fills unless the call names
        another; ``structured_output_prompt`` replaces the message that asks for it when the model answered
        without it. ``callback_handler`` is called with each stream event's fields as keyword arguments, for
        ``agent(...)`` and ``invoke_async`` too; ``None`` (the default) prints nothing, where Strands' default
        prints the answer. ``concurrent_invocation_mode`` takes only Strands' default ``"throw"``: a second
        invocation while one runs raises ``ConcurrencyException`` — unless it names the running one's
        ``idempotency_token`` (see :meth:`invoke_async`). ``plugins`` are
        :class:`~ray_harness.plugins.Plugin` objects: each one's ``init_agent`` runs, then its ``@hook`` and
        ``@tool`` methods join this agent's hooks and tools (after ``hooks`` and before
        ``AgentInitializedEvent``, as in Strands); two plugins may not share a name. ``memory_manager`` is a
        :class:`~ray_harness.memory.MemoryManager` or a ``MemoryManagerConfig`` dict, registered after ``plugins``;
        ``agent(...)`` waits for the background saves it started before returning. ``background_tasks``
        (``True`` or a :class:`~ray_harness.background_tasks.BackgroundTasksConfig`) lets the model run tools in
        the background and get their results when they finish (see :mod:`ray_harness.background_tasks`).

        ``aux_model`` answers the side calls made outside the agent loop — the summarizing conversation
        manager's summary, memory extraction, the HITL risk classifier, the goal judge — each of which uses its
        own ``model=`` first, then ``aux_model``, then the agent's model (as in Strands). It is a ``Model`` or a
        model string resolved as ``model=``'s is (``"anthropic:<id>"``, ...; not Strands' bare Bedrock id); a
        ``ModelRouter`` is refused. ``storage`` (a :mod:`ray_harness.storage` ``Storage``) is the default of
        subsystems without their own: a ``ContextOffloader()`` keeps its blocks there, under ``offloader/``.
        ``baggage_attributes`` are OpenTelemetry baggage (string keys and values) current during each
        invocation: span processors and the processes the invocation calls (with the trace context) see them.
        """
        check_arguments(description=description, conversation_manager=conversation_manager,
                        session_manager=session_manager, tool_executor=tool_executor,
                        retry_strategy=None if retry_strategy is _DEFAULT_RETRY else retry_strategy,
                        checkpointing=checkpointing, max_guide_retries=max_guide_retries, tools=tools,
                        callback_handler=callback_handler, structured_output_model=structured_output_model,
                        structured_output_prompt=structured_output_prompt,
                        concurrent_invocation_mode=concurrent_invocation_mode)
        self.model = model
        # A fresh agent (one per node per evaluation row) skips copying and validating an empty history.
        self.messages: list[Message] = validate_messages(copy.deepcopy(messages), "messages") if messages else []
        self.system_prompt = system_prompt
        self.name, self.agent_id = check_identity(name, agent_id)
        self.description = description
        self.state = state  # the setter takes a dict too
        self.trace_attributes = dict(trace_attributes or {})
        self.record_direct_tool_call = record_direct_tool_call
        self.checkpointing = checkpointing
        self.max_guide_retries = max_guide_retries
        if structured_output_model is not None:
            self.structured_output_model = structured_output_model
        if callback_handler is not None:
            self.callback_handler = callback_handler
        if structured_output_prompt is not None:
            self.structured_output_prompt = structured_output_prompt
        self.retry_strategy: ModelRetryStrategy | None = (
            ModelRetryStrategy() if retry_strategy is _DEFAULT_RETRY else retry_strategy
        )
        self.tool_executor: ToolExecutor = tool_executor or ConcurrentToolExecutor()
        self.hooks = HookRegistry()
        self._middleware = MiddlewareRegistry()
        self._interrupt_state = InterruptState()
        self.event_loop_metrics = EventLoopMetrics()
        self.tool_registry = ToolRegistry()
        self.tool_registry.process_tools(tools)
        self.conversation_manager = conversation_manager or default_conversation_manager()
        self.session_manager = session_manager
        # The default environment is reachable as agent.sandbox, but only an explicit sandbox vends
        # shell/file tools below: an agent must never silently get a shell on this machine.
        self._sandbox = checked_sandbox(sandbox)  # the default one is made on first access (agents per dataset row)
        self._checkpoint_resume: Any = None
        self._init_runtime_fields()
        # Only with handlers: the registry points back at the agent, and that cycle would leave every agent
        # to the cyclic garbage collector instead of reference counting.
        self._interventions: Any = None
        if interventions:
            from ray_harness.interventions.registry import InterventionRegistry

            self._interventions = InterventionRegistry(self, interventions)
        if sandbox is not None:
            for vended in sandbox.get_tools():
                self.tool_registry.add_default(vended)
        for hook in hooks or []:
            self._register_hook(hook)
        for provider in (self.conversation_manager, session_manager):
            if provider is not None and is_hook_provider(provider):
                provider.register_hooks(self.hooks, agent=self)
        # Only when one is given: the class-level defaults stand otherwise (agents are built per row).
        if (plugins is not None or memory_manager is not None or background_tasks is not None
                or aux_model is not None or storage is not None or baggage_attributes is not None):
            self._set_side_arguments(aux_model, storage, baggage_attributes)  # before the plugins: they may read them
            self._register_plugins(plugins, memory_manager, background_tasks)
        if self.hooks.has_callbacks(AgentInitializedEvent):  # agents are built per row: no event nobody hears
            self.hooks.invoke_callbacks(AgentInitializedEvent(agent=self))

    def _set_side_arguments(self, aux_model: Model | str | None, storage: Any,
                            baggage_attributes: Mapping[str, str] | None) -> None:
        """``aux_model``, ``storage`` and ``baggage_attributes`` where given (before plugins, which may read them)."""
        if aux_model is not None:
            self._aux_model = resolve_aux_model(aux_model)
        if storage is not None:
            self._storage = checked_storage(storage)
        if baggage_attributes is not None:
            self._baggage_attributes = checked_baggage(baggage_attributes) or None

    def _register_plugins(self, plugins: list[Plugin] | None, memory_manager: Any, background_tasks: Any = None
                          ) -> None:
        """``plugins``, the memory manager, then background tasks (plugins too); each package loads only when used."""
        if plugins is not None:
            from ray_harness.plugins.registry import register_plugins

            self._plugin_registry = register_plugins(self, plugins)
        if memory_manager is not None:
            from ray_harness.memory.memory_manager import attach_memory_manager

            self.memory_manager = attach_memory_manager(self, memory_manager)
        if background_tasks is not None and background_tasks is not False:  # after the plugins, as in Strands
            from ray_harness.background_tasks._plugin import attach_background_tasks

            self._background_tasks = attach_background_tasks(self, background_tasks)

    def _init_runtime_fields(self) -> None:
        self._lock = threading.Lock()
        self._cancel_message: str | None = None
        self._cancel_after_tools = False
        self._invocation: Any = None

    # Checked on assignment too, so a wrong value is named where it is set, not at the next model call.

    @property
    def model(self) -> Model:
        """The model of the next call; assign a ``Model`` or a model string (resolved as ``Agent(model=...)``)."""
        return self._model

    @model.setter
    def model(self, value: Model | str | None) -> None:
        self._model = resolve_model(value)

    @property
    def aux_model(self) -> Model:
        """The model of side calls (summaries, memory extraction, classifiers, judges): ``aux_model=``, else ``model``.

        Assign a ``Model`` or a model string; ``None`` makes side calls follow ``model`` again.
        """
        aux = self._aux_model
        return aux if aux is not None else self._model

    @aux_model.setter
    def aux_model(self, value: Model | str | None) -> None:
        self._aux_model = resolve_aux_model(value)

    @property
    def storage(self) -> Any:
        """The default :mod:`ray_harness.storage` ``Storage`` of subsystems without their own (``storage=``), or None."""
        return self._storage

    @property
    def baggage_attributes(self) -> dict[str, str]:
        """The OpenTelemetry baggage each invocation sets (``baggage_attributes=``); change it between invocations."""
        baggage = self._baggage_attributes
        if baggage is None:
            baggage = self._baggage_attributes = {}
        return baggage

    @baggage_attributes.setter
    def baggage_attributes(self, value: Mapping[str, str] | None) -> None:
        self._baggage_attributes = checked_baggage(value) or None if value is not None else None

    @property
    def system_prompt(self) -> str | list[SystemContentBlock] | None:
        """The system prompt as given: a string, a list of system content blocks, or None."""
        return self._system_prompt

    @system_prompt.setter
    def system_prompt(self, value: str | list[SystemContentBlock] | None) -> None:
        self._system_prompt = check_system_prompt(value)

    @property
    def system_prompt_content(self) -> list[SystemContentBlock] | None:
        """The system prompt as content blocks (a string is one text block), or None (Strands' property)."""
        prompt = self._system_prompt
        return [{"text": prompt}] if isinstance(prompt, str) else None if prompt is None else list(prompt)

    @property
    def state(self) -> AgentState:
        """The agent's JSON key-value state; assign an ``AgentState`` or a dict of JSON values."""
        return self._state

    @state.setter
    def state(self, value: AgentState | dict[str, Any] | None) -> None:
        self._state = value if isinstance(value, AgentState) else AgentState(value)

    @property
    def sandbox(self) -> Any:
        """Where this agent's shell and file tools run (a ``LocalEnvironment`` unless one was given)."""
        if self._sandbox is None:
            self._sandbox = default_sandbox()
        return self._sandbox

    @sandbox.setter
    def sandbox(self, value: Any) -> None:
        # The tools the old sandbox vended go with it (a user's tool of the same name stays): a shell tool
        # must never keep running commands in a sandbox the agent no longer has.
        value, old = checked_sandbox(value), self._sandbox
        if old is not None:
            for name, vended in list(self.tool_registry.registry.items()):
                if getattr(vended, "sandbox", None) is old:
                    self.tool_registry.remove(name)
        self._sandbox = value
        if value is not None:
            for vended in value.get_tools():
                self.tool_registry.add_default(vended)

    # -- pickling (agents ship into Ray actors) -------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_lock", "_invocation", "_inflight"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in _CHECKED_FIELDS:  # an agent pickled when these were plain attributes
            if name in state:
                state[f"_{name}"] = state.pop(name)
        self.__dict__.update(state)
        self._init_runtime_fields()

    # -- configuration ----------------------------------------------------------------------------------

    def _register_hook(self, hook: HookProvider | Callable[..., Any]) -> None:
        if is_hook_provider(hook):
            hook.register_hooks(self.hooks)
        elif callable(hook):
            self.add_hook(hook)
        else:
            raise TypeError(f"hooks entries must be HookProviders or callbacks, got {hook!r}")

    def add_hook(self, callback: Callable[..., Any],
                 event_type: type[BaseHookEvent] | list[type[BaseHookEvent]] | None = None,
                 order: float = HookOrder.DEFAULT) -> None:
        """Register ``callback``; its event type is inferred from the annotation when not given."""
        if is_hook_provider(callback) and event_type is None:
            callback.register_hooks(self.hooks)
            return
        self.hooks.add_callback(event_type or infer_event_type(callback), callback, order)

    def add_middleware(self, stage_or_phase: Any, handler: Callable[..., Any]) -> None:
        """Register middleware for ``InvokeModelStage``/``ExecuteToolStage`` (or their ``.Input``/``.Output``)."""
        self._middleware.add_middleware(stage_or_phase, handler)

    def as_tool(self, name: str | None = None, description: str | None = None, preserve_context: bool = False,
                delegate: bool = False) -> Any:
        """This agent as a tool of another agent (see :mod:`ray_harness.agent.as_tool`)."""
        from ray_harness.agent.as_tool import AgentAsTool

        return AgentAsTool(self, name=name, description=description, preserve_context=preserve_context,
                           delegate=delegate)

    def cleanup(self) -> None:
        """Close the agent's tool providers (an MCP server's session ends), as Strands' ``cleanup()``.

        Idempotent; the agent stays usable: a later invocation that calls a provider's tool reconnects it.
        ``with Agent(...) as agent:`` calls this at the end of the block.
        """
        for provider in self.tool_registry.providers:
            provider.close()

    def shutdown(self) -> None:
        """End of the agent's life (Strands' name): :meth:`cleanup`, after the memory manager's saves (``flush``).

        Safe to call more than once. Background tasks (``background_tasks=``) are cancelled and their thread ends.
        """
        if self._background_tasks is not None:
            self._background_tasks.shutdown()
        if self.memory_manager is not None:
            run_sync(self.memory_manager.flush())
        self.cleanup()

    async def shutdown_async(self) -> None:
        """:meth:`shutdown` for async code."""
        if self._background_tasks is not None:
            await asyncio.to_thread(self._background_tasks.shutdown)  # joins the runner thread: not on this loop
        if self.memory_manager is not None:
            await self.memory_manager.flush()
        self.cleanup()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown_async()

    @property
    def session_id(self) -> str:
        """The session manager's session id; without one, a random id made for this agent (Strands' property)."""
        session_id = getattr(self.session_manager, "session_id", None)
        if isinstance(session_id, str):
            return session_id
        if self._session_id is None:
            self._session_id = uuid.uuid4().hex[:8]
        return self._session_id

    @property
    def cancel_signal(self) -> threading.Event:
        """The running invocation's cancel signal (what ``tool_context.cancel_signal`` is); unset when idle.

        Read-only: call :meth:`cancel` to cancel. Hooks may check ``event.agent.cancel_signal.is_set()``.
        """
        invocation = self._invocation
        return invocation.cancel_signal if invocation is not None else Signal()

    @property
    def sandbox_id(self) -> str | None:
        """The identity of the sandbox given to this agent (or made by a first use of ``sandbox``); ``None`` before.

        Reading it never creates the default sandbox; a runtime places agents that share one by it.
        """
        return None if self._sandbox is None else getattr(self._sandbox, "sandbox_id", None)

    @property
    def tool_names(self) -> list[str]:
        """The names of the agent's tools, in registration order."""
        return self.tool_registry.names

    @property
    def tool(self) -> ToolCaller:
        """Direct tool calls: ``agent.tool.name(**kwargs)``."""
        return ToolCaller(self)

    # -- cancel -----------------------------------------------------------------------------------------

    def cancel(self, *, message: str | None = None, after_current_tools: bool = False) -> None:
        """Stop the running invocation at the next safe point (thread-safe, idempotent).

        On an idle agent this does nothing: the next invocation starts clean (differs from Strands).
        ``message`` ends the history with that assistant text; ``after_current_tools`` lets the
        running tool batch finish first. Background tasks (``background_tasks=``) are cancelled, also when idle.
        """
        if self._background_tasks is not None:
            self._background_tasks.cancel_all()
        invocation = self._invocation
        if invocation is None:
            return
        self._cancel_message = message
        self._cancel_after_tools = after_current_tools
        invocation.request_cancel(model_too=not after_current_tools)

    # -- entry points -------------------------------------------------------------------------------------

    def __call__(self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None,
                 limits: Limits | None = None, structured_output_model: type | None = None,
                 structured_output_prompt: str | None = None, cancel_signal: threading.Event | None = None,
                 idempotency_token: Any = None, **kwargs: Any) -> AgentResult:
        """Invoke synchronously (from a thread with no running event loop, or from any thread); see :meth:`invoke_async`."""
        coroutine = self.invoke_async(prompt, invocation_state=invocation_state, limits=limits,
                                      structured_output_model=structured_output_model,
                                      structured_output_prompt=structured_output_prompt,
                                      cancel_signal=cancel_signal, idempotency_token=idempotency_token, **kwargs)
        if self.memory_manager is not None:  # this call's event loop ends with it and would cancel pending saves
            coroutine = _settled(coroutine, self.memory_manager)
        result: AgentResult = run_sync(coroutine)
        return result

    async def invoke_async(self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None,
                           limits: Limits | None = None, structured_output_model: type | None = None,
                           structured_output_prompt: str | None = None, cancel_signal: threading.Event | None = None,
                           idempotency_token: Any = None, **kwargs: Any) -> AgentResult:
        """Run one invocation to the end and return its result (stream events are not collected).

        Args:
            prompt: Text, content blocks, messages, or interrupt responses; ``None`` continues the conversation.
            invocation_state: State shared with hooks, tools and middleware for this invocation.
            limits: Per-invocation limits (turns, tokens, cost) on top of the agent's own.
            structured_output_model: A pydantic model the final answer must fill (``result.structured_output``).
            structured_output_prompt: The message that asks for the structured output when the model answered
                without it, for this call (default: the agent's ``structured_output_prompt``).
            cancel_signal: An event that cancels the invocation when set. A call waiting on an
                ``idempotency_token`` does not observe it; only the invocation it waits on does.
            idempotency_token: Any object comparable with ``==`` (it need not be hashable) that names this
                request, so a retry of it does not run the agent twice (as Strands'). A call whose token equals
                the running invocation's does not raise ``ConcurrencyException``: it waits for that invocation
                and returns the same ``AgentResult`` (the callback handler hears only that result), or raises
                the exception that invocation raised. ``None`` (the default): no deduplication.
            **kwargs: More invocation state.

        Returns:
            The ``AgentResult``; ``stop_reason`` says why it ended (``end_turn``, ``interrupt``, ``cancelled``,
            a ``limit_*``, ...).

        Raises:
            ConcurrencyException: Another invocation of this agent is running (with another token, or none).
            IdempotencyAbortedError: The invocation this call's token waited on was stopped without a result
                (its task cancelled, its stream closed early); ``agent.cancel()`` gives it one
                (``stop_reason="cancelled"``).
        """
        if idempotency_token is not None:  # the only cost to a call without one
            from ray_harness.agent._idempotency import invoke_once

            return await invoke_once(self, idempotency_token, lambda: self.invoke_async(
                prompt, invocation_state=invocation_state, limits=limits,
                structured_output_model=structured_output_model, structured_output_prompt=structured_output_prompt,
                cancel_signal=cancel_signal, **kwargs))
        kwargs["structured_output_prompt"] = structured_output_prompt
        if self.callback_handler is not None:  # it hears every event: the streamed invocation, ending with the result
            events = self._stream(prompt, invocation_state, limits, structured_output_model, cancel_signal, kwargs,
                                  quiet=True)
            result: AgentResult = [event async for event in events if event.get("type") == "result"][-1]["result"]
            return result
        # Nobody hears the events: the invocation runs as plain coroutines (see _quiet_invocation).
        from ray_harness.agent._quiet_invocation import invoke_quietly

        return await invoke_quietly(self, prompt, invocation_state, limits, structured_output_model, cancel_signal,
                                    kwargs)

    def stream_async(self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None,
                     limits: Limits | None = None, structured_output_model: type | None = None,
                     structured_output_prompt: str | None = None, cancel_signal: threading.Event | None = None,
                     idempotency_token: Any = None, **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        """Run one invocation, yielding typed events; the last is ``{"type": "result", "result": AgentResult}``.

        The arguments are :meth:`invoke_async`'s. A call waiting on the running invocation of its
        ``idempotency_token`` yields only that invocation's result event.
        """
        if idempotency_token is not None:  # the only cost to a call without one
            from ray_harness.agent._idempotency import stream_once

            return stream_once(self, idempotency_token, lambda: self.stream_async(
                prompt, invocation_state=invocation_state, limits=limits,
                structured_output_model=structured_output_model, structured_output_prompt=structured_output_prompt,
                cancel_signal=cancel_signal, **kwargs))
        kwargs["structured_output_prompt"] = structured_output_prompt
        return self._stream(prompt, invocation_state, limits, structured_output_model, cancel_signal, kwargs,
                            quiet=False)

    def _quiet_stream(self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None,
                      limits: Limits | None = None, structured_output_model: type | None = None,
                      cancel_signal: threading.Event | None = None, **kwargs: Any
                      ) -> AsyncGenerator[dict[str, Any], None]:
        """``stream_async`` for callers that want only the result (actors' invoke paths): see :meth:`_stream`."""
        return self._stream(prompt, invocation_state, limits, structured_output_model, cancel_signal, kwargs,
                            quiet=True)

    async def _stream(self, prompt: Any, invocation_state: dict[str, Any] | None, limits: Limits | None,
                      structured_output_model: type | None, cancel_signal: threading.Event | None,
                      kwargs: dict[str, Any], *, quiet: bool) -> AsyncGenerator[dict[str, Any], None]:
        """The invocation behind ``stream_async`` (and ``invoke_async`` when a callback handler hears the events).

        ``quiet=True`` (for callers that only want the result) skips the per-chunk events — model
        events, deltas, ``message``, ``tool_start``, tool stream events — which otherwise travel up
        through every layer of the loop; ``tool_result``, ``interrupt`` and ``result`` still come.
        Hooks and middleware see exactly the same events either way.
        """
        from ray_harness.agent.loop import begin_invocation, end_invocation, run_invocation

        handler = self.callback_handler
        if handler is not None:
            quiet = False  # the handler hears every event, as in Strands
        invocation = begin_invocation(self, invocation_state, limits, structured_output_model, cancel_signal, kwargs,
                                      quiet=quiet)
        try:
            generator = run_invocation(self, prompt, invocation)
            try:
                async for event in generator:
                    if handler is not None:
                        handler(**event)
                    yield event
            finally:
                await generator.aclose()
        finally:
            end_invocation(self)

    def structured_output(self, output_model: type, prompt: Any = None) -> Any:
        """The model's answer to the history plus ``prompt`` as an ``output_model`` instance (deprecated, as in Strands).

        One model call offered only the output model; nothing is added to the history. Prefer
        ``agent(prompt, structured_output_model=output_model).structured_output``: a full invocation, with tools.

        Raises:
            ValueError: No prompt and no history (nothing is asked).
            RuntimeError: The agent waits for interrupt responses.
            StructuredOutputException: The model's answer does not fill ``output_model``.
        """
        from ray_harness.agent._structured_call import prepare, structured_output, warn_deprecated

        messages = prepare(self, prompt)
        warn_deprecated()
        return run_sync(structured_output(self, output_model, messages))

    async def structured_output_async(self, output_model: type, prompt: Any = None) -> Any:
        """:meth:`structured_output` for async code (deprecated, as in Strands)."""
        from ray_harness.agent._structured_call import prepare, structured_output, warn_deprecated

        messages = prepare(self, prompt)
        warn_deprecated()
        return await structured_output(self, output_model, messages)

    # -- state ------------------------------------------------------------------------------------------

    def snapshot(self) -> AgentSnapshot:
        """This agent's state as a frozen, versioned :class:`~ray_harness.agent.AgentSnapshot`.

        Messages, agent state, interrupt state, conversation manager state, metrics and (when the model
        implements ``get_state()``) the model's state; copies, so later changes to the agent do not show.
        """
        from ray_harness.agent.snapshot import take_snapshot  # pydantic models: loaded on first use

        return take_snapshot(self)

    def restore(self, snapshot: AgentSnapshot | SnapshotDelta) -> None:
        """Replace exactly the state a snapshot holds (configuration such as tools and hooks stays).

        A :class:`~ray_harness.agent.SnapshotDelta` keeps this agent's first ``base_messages`` messages, appends
        the delta's and replaces the rest of the state.

        Raises:
            ValueError: the snapshot is of another ``agent_id``, or of a newer ``schema_version``; a delta whose
                ``base_messages`` is not this agent's number of messages.
            ConcurrencyException: the agent is running an invocation.

        A failed restore leaves the agent unchanged.
        """
        if self._lock.locked():
            raise ConcurrencyException(f"agent {self.name!r} is running an invocation; restore it when idle")
        from ray_harness.agent.snapshot import restore_snapshot

        restore_snapshot(self, snapshot)

    def take_snapshot(self, *, preset: str | None = None, include: list[str] | None = None,
                      exclude: list[str] | None = None, app_data: dict[str, Any] | None = None) -> Snapshot:
        """Strands' snapshot: a JSON-compatible copy of chosen fields (see :class:`~ray_harness.agent.field_snapshot.Snapshot`).

        Args:
            preset: ``"session"``: messages, state, conversation manager state, interrupt state and model state.
            include: Fields added to the preset's (``messages``, ``state``, ``conversation_manager_state``,
                ``interrupt_state``, ``system_prompt``, ``model_state``).
            exclude: Fields removed after that.
            app_data: Your own JSON, stored as given.

        Raises:
            SnapshotException: an unknown preset or field, or no field left.

        :meth:`snapshot` is ray_harness's typed, whole-state form (what the runtime and sessions use).
        """
        from ray_harness.agent.field_snapshot import take_snapshot

        return take_snapshot(self, preset=preset, include=include, exclude=exclude, app_data=app_data)

    def load_snapshot(self, snapshot: Snapshot) -> None:
        """Restore the fields a :meth:`take_snapshot` snapshot holds; the others stay as they are.

        Raises:
            SnapshotException: another schema version or scope, or unknown fields.
            ConcurrencyException: the agent is running an invocation.

        A snapshot with a bad field leaves the agent unchanged.
        """
        from ray_harness.agent.field_snapshot import load_snapshot

        load_snapshot(self, snapshot)

    @property
    def interrupt_state(self) -> InterruptState:
        """The interrupts this agent raised and what it needs to resume them.

        Hooks, tools and middleware raise and answer through it; :meth:`snapshot` captures it.
        """
        return self._interrupt_state

    # -- history ----------------------------------------------------------------------------------------

    async def _append_message(self, message: Message, invocation_state: dict[str, Any] | None = None) -> None:
        self.messages.append(message)
        invocation = self._invocation
        if invocation is not None and invocation.first_appended is None:
            invocation.first_appended = message  # where a failed invocation rolls back to
        if self.hooks.has_callbacks(MessageAddedEvent):
            await self.hooks.invoke_callbacks_async(
                MessageAddedEvent(agent=self, message=message, invocation_state=invocation_state or {})
            )

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, agent_id={self.agent_id!r}, tools={self.tool_names})"


async def _settled(coroutine: Any, memory_manager: Any) -> Any:
    """Run ``coroutine``, then wait for the memory saves it started (also when it raised)."""
    try:
        return await coroutine
    finally:
        await memory_manager.settle()
