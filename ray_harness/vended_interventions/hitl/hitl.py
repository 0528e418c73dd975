"""``HumanInTheLoop``: a human approves tool calls before they run (Strands' HITL intervention).

By default the approval is an interrupt: the agent stops with ``stop_reason="interrupt"`` and the caller
resumes it with ``interruptResponse`` blocks (works on a Ray host and across processes, as the state is the
agent's). ``ask="stdio"`` or an ``ask`` callable collects the answer inline instead.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ray_harness.interrupts import interrupt_id
from ray_harness.interventions.actions import Confirm, Deny, InterventionAction, Proceed, default_evaluate
from ray_harness.interventions.handler import InterventionHandler
from ray_harness.vended_interventions.hitl.classifier import (
    ClassifierResult,
    HumanInTheLoopClassifier,
    LLMClassifierConfig,
    LLMRiskClassifier,
)

if TYPE_CHECKING:
    from ray_harness.hooks.events import BeforeToolCallEvent

__all__ = ("TRUSTED_TOOLS_KEY", "AskCallback", "EvaluateCallback", "HumanInTheLoop", "StdioAsk",
           "is_trust_response")

logger = logging.getLogger(__name__)

TRUSTED_TOOLS_KEY = "hitl:trusted_tools"
"""The ``agent.state`` key listing the tools a human trusted for the session (Strands' key)."""

_TRUST_RESPONSES = frozenset({"t", "trust"})

# Plain one-argument functions: Strands' protocols declare ``**kwargs``, which a checker requires of them.
_PlainClassifier = Callable[["BeforeToolCallEvent"], ClassifierResult | Awaitable[ClassifierResult]]


@runtime_checkable
class AskCallback(Protocol):
    """Asks a human ``prompt`` and returns the answer, directly or as an awaitable."""

    def __call__(self, prompt: str, **kwargs: Any) -> Any | Awaitable[Any]:
        """Return the human's answer to ``prompt``."""
        ...


@runtime_checkable
class EvaluateCallback(Protocol):
    """Decides whether an answer approves (or, for ``evaluate_trust``, trusts) the call."""

    def __call__(self, response: Any, **kwargs: Any) -> bool:
        """Return whether ``response`` approves (or trusts)."""
        ...


def is_trust_response(response: Any) -> bool:
    """``"t"`` or ``"trust"`` (case-insensitive, stripped) trust the tool; anything else does not."""
    return isinstance(response, str) and response.strip().lower() in _TRUST_RESPONSES


class StdioAsk:
    """``ask="stdio"``: the question on the terminal, the answer read from stdin in a worker thread.

    One lock per handler keeps concurrent tool calls from reading each other's answers; it is a threading lock
    because each synchronous ``agent(...)`` call runs its own event loop. A thread blocked in ``input()``
    cannot be cancelled, so this is for interactive sessions, not for runs that may be cancelled mid-prompt;
    on a Ray host stdin is not the user's terminal, use the interrupt mode there.

    Args:
        include_trust: Offer ``t`` (trust) in the options.
    """

    def __init__(self, include_trust: bool = False) -> None:
        self.options = "(y/n/t)" if include_trust else "(y/n)"
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}  # a lock does not pickle; each copy guards its own stdin

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.options = state["options"]
        self._lock = threading.Lock()

    def _read(self, prompt: str) -> str:
        with self._lock:
            return input(f"{prompt} {self.options}: ").strip()

    async def __call__(self, prompt: str, **kwargs: Any) -> str:
        """Print ``prompt`` with the options and return the stripped answer."""
        return await asyncio.to_thread(self._read, prompt)


class HumanInTheLoop(InterventionHandler):
    """Pause before tool calls so that a human approves or refuses them.

    Every tool needs approval unless ``allowed_tools`` lets it run. Whether a call needs approval is decided
    in this order: ``!name`` in ``allowed_tools`` (always asks, cannot be trusted), trusted in this session
    (``agent.state["hitl:trusted_tools"]``), ``"*"``, listed, the classifier's verdict, and else ask.

    Args:
        allowed_tools: Tools that run without approval; ``"*"`` allows all, ``"!name"`` excludes one from
            ``"*"``. A single string is refused (it is not a list of names).
        classifier: For calls ``allowed_tools`` does not settle: ``None``/``False`` always ask; ``True`` the
            built-in LLM risk classifier; an :class:`LLMClassifierConfig` the built-in one with its settings;
            or a callable (sync or async) returning a ``ClassifierResult``. A classifier that raises or returns
            something else counts as "ask". A call the human was asked about is not classified again when
            resumed; one that passed and is run again (another handler paused it) is classified again.
        enable_trust: A trust answer (``evaluate_trust``) approves the call and lets the tool run without asking
            for the rest of the session.
        evaluate_trust: Whether an answer trusts; default ``"t"``/``"trust"``.
        evaluate: Whether an answer approves; default ``True``, ``"y"``, ``"yes"``.
        ask: ``None`` (default) pause through an interrupt; ``"stdio"`` ask on the terminal; or a callable
            (sync or async) taking the prompt and returning the answer. An ``ask`` that returns ``None`` denies;
            one that raises ends the run.

    Raises:
        ValueError: ``allowed_tools`` is a string, or ``ask`` is a string other than ``"stdio"``.
        TypeError: An argument has the wrong type (the message names it).
    """

    name = "strands:human-in-the-loop"  # Strands' name, so interrupts and handler names stay the same

    def __init__(
        self,
        *,
        allowed_tools: list[str] | None = None,
        classifier: bool | LLMClassifierConfig | HumanInTheLoopClassifier | _PlainClassifier | None = None,
        enable_trust: bool = False,
        evaluate_trust: EvaluateCallback | Callable[[Any], bool] | None = None,
        evaluate: EvaluateCallback | Callable[[Any], bool] | None = None,
        ask: AskCallback | Callable[[str], Any] | Literal["stdio"] | None = None,
    ) -> None:
        self._allowed_tools = _checked_tools(allowed_tools)
        self._classifier = _resolve_classifier(classifier)
        if self._classifier is not None and "*" in self._allowed_tools:
            logger.warning("classifier has no effect when allowed_tools contains '*': every tool is allowed")
        self._enable_trust = _checked_bool("enable_trust", enable_trust)
        self._evaluate_trust = _checked_callable("evaluate_trust", evaluate_trust) or is_trust_response
        self._evaluate = _checked_callable("evaluate", evaluate) or default_evaluate
        self._ask = _resolve_ask(ask, self._enable_trust)

    async def before_tool_call(self, event: BeforeToolCallEvent, **kwargs: Any) -> InterventionAction:
        """``Proceed`` when the call needs no approval or was approved inline, else ``Confirm`` (or ``Deny``)."""
        tool_name = event.tool_use["name"]
        verdict = await self._requires_approval(event)
        if not verdict.requires_human_in_the_loop:
            return Proceed()
        because = f" — {verdict.reason}" if verdict.reason else ""
        prompt = f'Approve "{tool_name}"{because}?\n  Input: {json.dumps(event.tool_use["input"], default=str)}'
        trustable = self._enable_trust and f"!{tool_name}" not in self._allowed_tools
        if self._ask is None:
            # The answer arrives on resume: evaluate (and trust) then, not now.
            def evaluate(response: Any) -> bool:
                if trustable and self._evaluate_trust(response):
                    _trust(event, tool_name)
                    return True
                return self._evaluate(response)

            return Confirm(prompt=prompt, evaluate=evaluate)
        response = self._ask(prompt)
        if inspect.isawaitable(response):
            response = await response
        if response is None:
            # Confirm would read None as "no answer yet" and pause, which an inline caller cannot resume.
            return Deny(reason=f'Tool "{tool_name}" denied: approval callback returned no response.')
        if trustable and self._evaluate_trust(response):
            _trust(event, tool_name)
            return Proceed()
        return Confirm(prompt=prompt, response=response, evaluate=self._evaluate)

    async def _requires_approval(self, event: BeforeToolCallEvent) -> ClassifierResult:
        tool_name = event.tool_use["name"]
        if f"!{tool_name}" in self._allowed_tools:
            return ClassifierResult(requires_human_in_the_loop=True)
        if tool_name in (event.agent.state.get(TRUSTED_TOOLS_KEY) or []):
            return ClassifierResult(requires_human_in_the_loop=False)
        if "*" in self._allowed_tools or tool_name in self._allowed_tools:
            return ClassifierResult(requires_human_in_the_loop=False)
        if self._classifier is None:
            return ClassifierResult(requires_human_in_the_loop=True)
        return await self._classify(event)

    async def _classify(self, event: BeforeToolCallEvent) -> ClassifierResult:
        use_id = str(event.tool_use["toolUseId"])
        # Once a human was asked about this call (it is being resumed), the answer decides: a second verdict must
        # not let a refused call through. The agent's interrupt state knows, in any process that resumes it.
        if interrupt_id("before_tool_call", use_id, self.name) in event.agent.interrupt_state.interrupts:
            return ClassifierResult(requires_human_in_the_loop=True)
        tool_name = event.tool_use["name"]
        try:
            verdict: Any = self._classifier(event)  # type: ignore[misc]  # checked by the caller
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as error:  # fail closed: a broken classifier asks the human
            logger.warning("tool=<%s> | classifier failed, asking for approval", tool_name, exc_info=error)
            return ClassifierResult(requires_human_in_the_loop=True)
        if not isinstance(verdict, ClassifierResult) or not isinstance(verdict.requires_human_in_the_loop, bool):
            logger.warning("tool=<%s>, verdict=<%r> | classifier returned no ClassifierResult with a bool "
                           "decision, asking for approval", tool_name, verdict)
            return ClassifierResult(requires_human_in_the_loop=True)
        return verdict


def _trust(event: BeforeToolCallEvent, tool_name: str) -> None:
    trusted = event.agent.state.get(TRUSTED_TOOLS_KEY) or []
    if tool_name not in trusted:
        event.agent.state.set(TRUSTED_TOOLS_KEY, [*trusted, tool_name])


def _checked_tools(allowed_tools: Any) -> set[str]:
    if isinstance(allowed_tools, str):
        raise ValueError("allowed_tools must be a list of tool names, not a single string")
    if allowed_tools is None:
        return set()
    if not isinstance(allowed_tools, list | tuple | set | frozenset):
        raise TypeError(f"allowed_tools must be a list of tool names, got {type(allowed_tools).__name__}")
    for index, item in enumerate(allowed_tools):
        if not isinstance(item, str):
            raise TypeError(f"allowed_tools[{index}] must be a str, got {type(item).__name__}")
    return set(allowed_tools)


def _checked_bool(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{field} must be a bool, got {type(value).__name__}")
    return value


def _checked_callable(field: str, value: Any) -> Any:
    if value is not None and not callable(value):
        raise TypeError(f"{field} must be a callable or None, got {type(value).__name__}")
    return value


def _resolve_classifier(classifier: Any) -> HumanInTheLoopClassifier | None:
    if classifier is None or classifier is False:
        return None
    if classifier is True:
        return LLMRiskClassifier()
    if isinstance(classifier, LLMClassifierConfig):
        return LLMRiskClassifier(classifier)
    if not callable(classifier):
        raise TypeError("classifier must be True, False, None, an LLMClassifierConfig or a callable, "
                        f"got {type(classifier).__name__}")
    return classifier  # type: ignore[no-any-return]


def _resolve_ask(ask: Any, include_trust: bool) -> AskCallback | None:
    if ask is None:
        return None
    if isinstance(ask, str):
        if ask != "stdio":
            raise ValueError(f"ask must be 'stdio', a callable or None, got {ask!r}")
        return StdioAsk(include_trust)
    if not callable(ask):
        raise TypeError(f"ask must be 'stdio', a callable or None, got {type(ask).__name__}")
    return ask  # type: ignore[no-any-return]
