"""``ModelRouter``: a ``Model`` that serves each request on one of several candidate models.

Its ``RoutingStrategy`` makes every decision; the router resolves the answer to a model, calls it and keeps the
request's routing session. As in Strands, the strategy is asked once per request, and again after a candidate
failed: a failure round (the failures since the last success) uses each candidate once, a success starts a new
round on the candidate that succeeded, and ``max_switches`` caps the switches of a session.

Unlike Strands' router (a plugin steering the agent's model calls), this one is a ``Model``: ``agent.model`` is
the router, so everything that calls the model routes — the agent loop, structured output, ``Agent.structured_output``,
``model.structured_output`` — and it ships to a Ray host inside its agent. A routing session spans the model calls
that answer one request: it opens when the history ends with a user message that is not only tool results, and
the calls of the tool loop that follow continue it on the same candidate.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import hashlib
import inspect
import json
import logging
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from typing_extensions import override

from ray_harness.models.base import Model, ModelPrices, estimate_tokens
from ray_harness.models.rate_limit import rate_limited
from ray_harness.models.routing.fallback_strategy import FallbackStrategy
from ray_harness.models.routing.strategy import RoutingAttempt, RoutingContext, RoutingStrategy
from ray_harness.types.content import Messages, SystemPrompt
from ray_harness.types.exceptions import ContextWindowOverflowException
from ray_harness.types.streaming import StreamEvent
from ray_harness.types.tools import ToolChoice, ToolSpec

__all__ = ("CandidateInput", "ModelRouter", "RoutingCandidate")

logger = logging.getLogger(__name__)

JSONValue: TypeAlias = str | int | float | bool | list["JSONValue"] | dict[str, "JSONValue"] | None

# The concrete model that served (or is serving) the latest routed call of this task: ``prices`` and ``model_id``
# name it, so the agent prices the call at the rate of the model that made it. A context variable, not an
# attribute, so agents sharing one router in one process each see their own call.
_SERVED: contextvars.ContextVar[Model | None] = contextvars.ContextVar("ray_harness_routed_model", default=None)

# Sessions kept per router: enough for the agents one process runs on it at once; the oldest goes first.
_MAX_SESSIONS = 64


@dataclass(frozen=True)
class RoutingCandidate:
    """A model (or a nested ``ModelRouter``) with what a classifier may know about it.

    A nested router is one candidate: its strategy picks among its own candidates, and it does no failover of its
    own. ``metadata`` must be JSON-serializable and free of secrets (``ClassifierStrategy`` sends it to its
    classifier model); it is kept as given, so do not change it afterwards.

    Raises:
        TypeError: ``metadata`` is not a mapping with string keys.
        ValueError: ``metadata`` is not JSON-serializable.
    """

    model: Model
    name: str | None = None
    description: str | None = None
    metadata: Mapping[str, JSONValue] | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if self.metadata is None:
            return
        if not isinstance(self.metadata, Mapping):
            raise TypeError(f"RoutingCandidate metadata must be a mapping, got {type(self.metadata).__name__}")
        if not all(isinstance(key, str) for key in self.metadata):
            raise TypeError("RoutingCandidate metadata keys must be strings")
        try:
            json.dumps(self.metadata, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"RoutingCandidate metadata must be JSON-serializable: {error}") from error


CandidateInput: TypeAlias = Model | RoutingCandidate
"""What each entry of ``ModelRouter(models=...)`` may be: a ``Model`` (a ``ModelRouter`` too) or a ``RoutingCandidate``."""


@dataclass
class _Session:
    """One request's routing: the candidate in use and the record the strategy reads.

    ``used`` holds the candidates this failure round has used (their ids): what bounds the round. A success resets
    it to the candidate that succeeded, which opens the next round.
    """

    candidate: RoutingCandidate
    model: Model
    attempts: list[RoutingAttempt] = field(default_factory=list)
    used: set[int] = field(default_factory=set)
    switches: int = 0


class ModelRouter(Model):
    """A ``Model`` that serves each request on the candidate its strategy picks, failing over on errors.

    Args:
        models: The candidates, in order: each a ``Model``, a nested ``ModelRouter`` or a ``RoutingCandidate``. The
            first is the default model, served when the strategy declines the opening choice.
        strategy: Picks the candidate (an object with an async ``select(context)``); default ``FallbackStrategy``:
            ordered failover, preferring the candidates that failed least.
        max_switches: At most this many switches per request; then the model's error is raised. ``None``: the
            strategy decides when to stop.

    A call fails over only when its candidate failed before streaming anything: an answer already half streamed
    cannot be taken back, so that error is raised (and the agent's retry strategy may call again). An error that
    is raised ends the request's session: the next call (an agent retry) opens a new one. A context-window
    overflow is not a failure of the model (the agent shortens the history and calls again) and does not fail over.

    Raises:
        TypeError: ``models`` is not a sequence, a candidate is not a ``Model``, or ``strategy`` has no async
            ``select``.
        ValueError: No candidates, colliding candidate names, one model reachable twice (also through a nested
            router), a stateful candidate, or a negative ``max_switches``.
    """

    def __init__(self, models: Sequence[CandidateInput], *, strategy: RoutingStrategy | None = None,
                 max_switches: int | None = None) -> None:
        if strategy is not None and not inspect.iscoroutinefunction(getattr(strategy, "select", None)):
            raise TypeError(f"ModelRouter strategy must have an async select(context) method, got {strategy!r}")
        if max_switches is not None and (isinstance(max_switches, bool) or not isinstance(max_switches, int)
                                         or max_switches < 0):
            raise ValueError(f"ModelRouter max_switches must be an int >= 0 or None, got {max_switches!r}")
        candidates = _normalize(models)
        if not candidates:
            raise ValueError("ModelRouter models must hold at least one candidate model")
        _reject_stateful(candidates)
        _reject_duplicates(candidates)
        self._candidates = candidates
        self._strategy: RoutingStrategy = strategy if strategy is not None else FallbackStrategy()
        self._max_switches = max_switches
        self._sessions: dict[str, _Session] = {}
        self._prices: ModelPrices | None = None

    # -- configuration ----------------------------------------------------------------------------

    @property
    def candidates(self) -> tuple[RoutingCandidate, ...]:
        """The candidates, in declaration order."""
        return self._candidates

    @property
    def strategy(self) -> RoutingStrategy:
        """The routing strategy."""
        return self._strategy

    @property
    def max_switches(self) -> int | None:
        """The cap on switches per request (``None``: none)."""
        return self._max_switches

    @property
    def default_model(self) -> Model:
        """The first candidate as a concrete model (a nested router's default), without asking any strategy."""
        model = self._candidates[0].model
        return model.default_model if isinstance(model, ModelRouter) else model

    @override
    def update_config(self, **model_config: Any) -> None:
        """A router has no model settings of its own: configure its candidate models.

        Raises:
            TypeError: always.
        """
        raise TypeError("ModelRouter has no model configuration of its own; call update_config() on its "
                        "candidate models (router.candidates[i].model)")

    @override
    def get_config(self) -> dict[str, Any]:
        """``model_id`` (the default model's), the candidates' labels, the strategy and ``max_switches``."""
        return {"model_id": self.default_model.model_id,
                "candidates": [_candidate_label(candidate) for candidate in self._candidates],
                "strategy": type(self._strategy).__name__, "max_switches": self._max_switches}

    @property
    @override
    def model_id(self) -> str:
        """The id of the model that served this task's latest routed call; before any, the default model's."""
        return self._served().model_id

    @property
    def prices(self) -> ModelPrices | None:
        """The prices of the model that served this task's latest routed call (before any, the default model's).

        Set, it prices every call at one rate instead.
        """
        if self._prices is not None:
            return self._prices
        return getattr(self._served(), "prices", None)

    @prices.setter
    def prices(self, value: ModelPrices | None) -> None:
        self._prices = value

    @property
    @override
    def context_window_limit(self) -> int | None:
        """The smallest window among the candidates that know theirs, so a history compressed for it fits any."""
        if self.context_window is not None:
            return self.context_window
        windows = [window for model in self._models() if (window := model.context_window_limit) is not None]
        return min(windows) if windows else None

    @property
    @override
    def stateful(self) -> bool:
        return False

    @override
    async def count_tokens(self, messages: Messages, tool_specs: list[ToolSpec] | None = None,
                           system_prompt: SystemPrompt | None = None,
                           system_prompt_content: SystemPrompt | None = None) -> int:
        """The default model's count (the request is not routed yet when the agent counts it)."""
        return await self.default_model.count_tokens(messages, tool_specs, system_prompt, system_prompt_content)

    # -- state (AgentSnapshot.model_state) ----------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """The candidates' own states (``get_state()``; ``None`` for one that keeps none), in declaration order.

        Their states as the candidates return them, not copies: treat them as read-only.

        Routing sessions are not part of it: a restored agent's next request opens a new one.
        """
        return {"candidates": [_state_of(candidate.model) for candidate in self._candidates]}

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back what :meth:`get_state` returned (``{}``: nothing); drops the routing sessions.

        Raises:
            ValueError: ``state`` is not a dict, or its ``candidates`` is not a list with one entry per candidate.
        """
        if not isinstance(state, dict):
            raise ValueError(f"ModelRouter state must be a dict, got {type(state).__name__}")
        states = state.get("candidates")
        if states is not None:
            if not isinstance(states, list) or len(states) != len(self._candidates):
                raise ValueError(f"ModelRouter state field 'candidates' must be a list of {len(self._candidates)} "
                                 f"entries (one per candidate), got {states!r:.200}")
            for candidate, candidate_state in zip(self._candidates, states, strict=True):
                set_state = getattr(candidate.model, "set_state", None)
                if candidate_state is not None and callable(set_state):
                    set_state(candidate_state)
        self._sessions.clear()

    def __getstate__(self) -> dict[str, Any]:
        # Sessions are live per-request bookkeeping (their attempts hold exceptions): a copy starts without.
        state = self.__dict__.copy()
        state["_sessions"] = {}
        return state

    # -- the call ----------------------------------------------------------------------------------

    @override
    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: SystemPrompt | None = None,
        *,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream the answer of the request's candidate, failing over to the strategy's next on an early error."""
        key, opening = _session_key(messages, kwargs.get("agent_metadata"))
        session = None if opening else self._sessions.get(key)
        if session is None:
            candidate, model = await self._open(self._context(messages, system_prompt, tool_specs))
            session = _Session(candidate=candidate, model=model, used={id(candidate)})
            self._remember(key, session)
        while True:
            model = session.model
            _SERVED.set(model)
            stream = model.stream(messages, tool_specs, system_prompt, tool_choice=tool_choice,
                                  **_accepted(model, kwargs))
            stream = rate_limited(model, stream, lambda: estimate_tokens(messages, system_prompt, tool_specs))
            started = False
            try:
                async for event in stream:
                    started = True
                    yield event
            except ContextWindowOverflowException:
                raise  # the history is too long, not the model unwell: the agent shortens it and calls again
            except Exception as error:
                session.attempts.append(RoutingAttempt(candidate=session.candidate, exception=error))
                if started or not await self._advance(session, error, messages, system_prompt, tool_specs):
                    self._forget(key, session)
                    raise
                continue
            finally:
                with contextlib.suppress(Exception):  # a provider failing to close does not fail the call
                    await stream.aclose()
            session.attempts.append(RoutingAttempt(candidate=session.candidate))
            session.used = {id(session.candidate)}  # the candidate that succeeded opens the next round
            return

    # -- asking the strategy -------------------------------------------------------------------------

    async def _ask(self, context: RoutingContext) -> RoutingCandidate | None:
        return self._checked(await self._strategy.select(context), context)

    def _checked(self, candidate: object, context: RoutingContext) -> RoutingCandidate | None:
        if candidate is None:
            return None
        if not isinstance(candidate, RoutingCandidate):
            raise TypeError(f"{type(self._strategy).__name__}.select must return a RoutingCandidate or None, "
                            f"got {type(candidate).__name__}")
        if not any(candidate is known for known in context.candidates):
            raise ValueError(f"{type(self._strategy).__name__}.select must return one of context.candidates "
                             "(the same instance), not a new RoutingCandidate")
        return candidate

    async def _open(self, context: RoutingContext) -> tuple[RoutingCandidate, Model]:
        """The candidate a request starts on; the strategy raising, or a candidate that cannot resolve, propagates."""
        candidate = await self._ask(context)
        if candidate is None:
            candidate, model = self._candidates[0], self.default_model
            logger.info("strategy=<%s>, model=<%s> | strategy declined the opening choice, using the default model",
                        type(self._strategy).__name__, _model_label(model))
            return candidate, model
        model = await self._resolve(candidate, context)
        logger.info("strategy=<%s>, candidate=<%s>, model=<%s> | candidate selected", type(self._strategy).__name__,
                    _candidate_label(candidate), _model_label(model))
        return candidate, model

    async def _resolve(self, candidate: RoutingCandidate, context: RoutingContext) -> Model:
        """The concrete model of ``candidate``: a nested router asks its strategy (its candidates, no attempts)."""
        model = candidate.model
        if isinstance(model, ModelRouter):
            return await model._select(replace(context, candidates=model.candidates, attempts=()))
        return model

    async def _select(self, context: RoutingContext) -> Model:
        candidate = await self._ask(context)
        return self.default_model if candidate is None else await self._resolve(candidate, context)

    async def _advance(self, session: _Session, error: Exception, messages: Messages,
                       system_prompt: SystemPrompt | None, tool_specs: list[ToolSpec] | None) -> bool:
        """Switch ``session`` to the strategy's next candidate; False when routing ends and ``error`` is raised.

        A candidate that cannot resolve takes its slot in the round and the strategy is asked again, so every pass
        switches or uses up a candidate and the round ends.
        """
        if self._max_switches is not None and session.switches >= self._max_switches:
            logger.warning("max_switches=<%d> | switch cap reached, raising the model's error", self._max_switches)
            return False
        while True:
            context = self._context(messages, system_prompt, tool_specs, session.attempts)
            try:
                # Checked inside the try: the model's error is the one to raise, not a broken answer's.
                candidate = self._checked(await self._strategy.select(context), context)
            except Exception as failure:
                logger.warning("strategy=<%s>, error=<%s> | routing failed, raising the model's error",
                               type(self._strategy).__name__, failure)
                return False
            if candidate is None:
                return False
            if id(candidate) in session.used:  # else a cycling strategy could retry forever
                logger.info("candidate=<%s> | already used this round, raising the model's error",
                            _candidate_label(candidate))
                return False
            try:
                model = await self._resolve(candidate, context)
            except Exception as failure:
                logger.warning("candidate=<%s>, error=<%s> | candidate could not be resolved, asking again",
                               _candidate_label(candidate), failure)
                session.attempts.append(RoutingAttempt(candidate=candidate, exception=failure))
                session.used.add(id(candidate))
                continue
            logger.info("from_candidate=<%s>, to_candidate=<%s>, error=<%s> | model call failed, switching candidate",
                        _candidate_label(session.candidate), _candidate_label(candidate), type(error).__name__)
            session.candidate, session.model = candidate, model
            session.used.add(id(candidate))
            session.switches += 1
            return True

    def _context(self, messages: Messages, system_prompt: SystemPrompt | None, tool_specs: list[ToolSpec] | None,
                 attempts: Sequence[RoutingAttempt] = ()) -> RoutingContext:
        # Copies: a strategy may change what it is shown without changing the request.
        return RoutingContext(messages=copy.deepcopy(messages), system_prompt=copy.deepcopy(system_prompt),
                              tool_specs=copy.deepcopy(list(tool_specs or [])), candidates=self._candidates,
                              attempts=tuple(attempts))

    # -- sessions ----------------------------------------------------------------------------------

    def _remember(self, key: str, session: _Session) -> None:
        sessions = self._sessions
        sessions.pop(key, None)
        sessions[key] = session
        while len(sessions) > _MAX_SESSIONS:
            try:
                del sessions[next(iter(sessions))]
            except (KeyError, StopIteration, RuntimeError):  # another thread took it meanwhile
                break

    def _forget(self, key: str, session: _Session) -> None:
        if self._sessions.get(key) is session:
            self._sessions.pop(key, None)

    def _served(self) -> Model:
        served = _SERVED.get()
        if served is not None and any(served is model for model in self._models()):
            return served
        return self.default_model

    def _models(self) -> Iterator[Model]:
        for candidate in self._candidates:
            yield from _reachable_models(candidate)


# ---- helpers ----------------------------------------------------------------------------------------


def _session_key(messages: Messages, agent_metadata: Any) -> tuple[str, bool]:
    """The key of the request ``messages`` answer, and whether this call opens it (the request is the last message).

    The request is the latest user message that is not only tool results; the key is a digest of it (stable across
    processes, unlike ``hash``) and of the agent's session id.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message["role"] == "user" and any("toolResult" not in block for block in message["content"]):
            session_id = getattr(agent_metadata, "session_id", None)
            text = json.dumps([session_id, message["content"]], sort_keys=True, default=str)
            return hashlib.sha256(text.encode()).hexdigest(), index == len(messages) - 1
    return "", True


def _accepted(model: Model, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords of ``kwargs`` the candidate's ``stream`` takes (all when it takes ``**kwargs``)."""
    if not kwargs:
        return kwargs
    names = _keywords(type(model).stream)
    return kwargs if names is None else {key: value for key, value in kwargs.items() if key in names}


@functools.lru_cache(maxsize=256)
def _keywords(function: Callable[..., Any]) -> frozenset[str] | None:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return frozenset()
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        return None
    return frozenset(parameter.name for parameter in parameters if parameter.kind in (
        inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD))


def _state_of(model: Model) -> Any:
    # Not copied: the snapshot copies what it keeps (the runtime's journal, which pickles it at once, does not).
    get_state = getattr(model, "get_state", None)
    return get_state() if callable(get_state) else None


def _model_label(model: Model) -> str:
    """The provider and model id, without risking the call (labels are log arguments)."""
    provider = type(model).__name__
    try:
        model_id = model.get_config().get("model_id")
    except Exception:
        return provider
    return f"{provider}/{model_id}" if model_id else provider


def _candidate_label(candidate: RoutingCandidate) -> str:
    if candidate.name:
        return candidate.name
    return type(candidate.model).__name__ if isinstance(candidate.model, ModelRouter) else _model_label(candidate.model)


def _normalize(models: object) -> tuple[RoutingCandidate, ...]:
    if isinstance(models, str | bytes | Mapping) or not isinstance(models, Sequence):
        raise TypeError(f"ModelRouter models must be a sequence of candidates, got {type(models).__name__}")
    candidates = []
    for index, item in enumerate(models):
        candidate = item if isinstance(item, RoutingCandidate) else RoutingCandidate(model=item)
        if not isinstance(candidate.model, Model):
            raise TypeError(f"ModelRouter models[{index}] must be a Model, a ModelRouter or a RoutingCandidate, "
                            f"got {type(candidate.model).__name__}")
        candidates.append(candidate)
    return tuple(candidates)


def _reachable_models(candidate: RoutingCandidate) -> Iterator[Model]:
    model = candidate.model
    if isinstance(model, ModelRouter):
        for nested in model.candidates:
            yield from _reachable_models(nested)
    else:
        yield model


def _reject_stateful(candidates: tuple[RoutingCandidate, ...]) -> None:
    for candidate in candidates:
        if not isinstance(candidate.model, ModelRouter) and candidate.model.stateful:
            raise ValueError(f"ModelRouter candidate {_candidate_label(candidate)!r} is stateful (keeps the "
                             "conversation server-side); routing among stateful models is not supported")


def _reject_duplicates(candidates: tuple[RoutingCandidate, ...]) -> None:
    """One model behind two candidates would have two failure records and never be demoted: refused."""
    seen_candidates: set[int] = set()
    seen_models: set[int] = set()
    seen_names: set[str] = set()
    for candidate in candidates:
        if id(candidate) in seen_candidates:
            raise ValueError("ModelRouter models holds the same RoutingCandidate twice")
        seen_candidates.add(id(candidate))
        for model in _reachable_models(candidate):
            if id(model) in seen_models:
                raise ValueError(f"ModelRouter candidate {_candidate_label(candidate)!r} repeats a model already "
                                 "routed to; construct a separate instance so each candidate has its own health")
            seen_models.add(id(model))
        if candidate.name is not None:
            if candidate.name in seen_names:
                raise ValueError(f"ModelRouter candidate name {candidate.name!r} is used twice")
            seen_names.add(candidate.name)
