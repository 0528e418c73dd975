"""``ScriptedModel``: a model that answers from a script instead of an LLM.

Each step is one model answer:

* a ``str`` — a text answer;
* a :class:`Step` built with :func:`text`, :func:`tool_call`, :func:`tool_calls`,
  :func:`reasoning` or :func:`step` (blocks, stop reason, usage, delay);
* an exception instance — raised by the call (after the step's delay);
* a responder ``f(call: ModelCall) -> step`` (sync or async) for answers that
  depend on the request.

Every call is recorded as a frozen :class:`ModelCall`. An unscripted call raises
:class:`ScriptError` naming the last message; :meth:`ScriptedModel.assert_complete`
raises when steps were never used. The model pickles (steps are data), so it can
ship into a Ray actor.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import itertools
import json
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from typing_extensions import override

from ray_harness.models.base import Model, ModelPrices, estimate_tokens
from ray_harness.types.content import ContentBlock, Messages, SystemPrompt
from ray_harness.types.exceptions import RayHarnessError
from ray_harness.types.streaming import StreamEvent, Usage
from ray_harness.types.tools import ToolChoice, ToolSpec

__all__ = (
    "ModelCall",
    "ScriptError",
    "ScriptedModel",
    "Step",
    "reasoning",
    "step",
    "text",
    "tool_call",
    "tool_calls",
)


class ScriptError(RayHarnessError, AssertionError):
    """The script and the run disagree: an unscripted call, or steps left over."""


@dataclass(frozen=True)
class ModelCall:
    """A frozen copy of what the loop sent to the model."""

    messages: tuple[dict[str, Any], ...]
    system_prompt: SystemPrompt | None
    tool_specs: tuple[dict[str, Any], ...]
    tool_choice: dict[str, Any] | None
    index: int

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools offered to the model in this call."""
        return tuple(spec["name"] for spec in self.tool_specs)

    @property
    def last_text(self) -> str:
        """Text of the last message (what a responder usually reacts to)."""
        if not self.messages:
            return ""
        return "".join(block.get("text", "") for block in self.messages[-1]["content"])


@dataclass(frozen=True)
class Step:
    """One scripted model answer."""

    content: tuple[dict[str, Any], ...] = ()
    stop_reason: str | None = None
    usage: Usage | None = None
    delay: float = 0.0
    error: BaseException | None = None
    chunk_delay: float = 0.0

    def resolved_stop_reason(self) -> str:
        """The explicit stop reason, else ``tool_use`` when the step calls a tool, else ``end_turn``."""
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any("toolUse" in block for block in self.content) else "end_turn"


Responder: TypeAlias = Callable[[ModelCall], "StepLike | Awaitable[StepLike]"]
StepLike: TypeAlias = "str | Step | BaseException | Responder | dict[str, Any]"

_ids = itertools.count(1)
_ids_lock = threading.Lock()


def _next_tool_use_id(name: str) -> str:
    with _ids_lock:
        return f"tooluse_{name}_{next(_ids)}"


def text(content: str, *, usage: Usage | None = None, delay: float = 0.0, stop_reason: str | None = None) -> Step:
    """A text answer."""
    return Step(content=({"text": content},), usage=usage, delay=delay, stop_reason=stop_reason)


def tool_call(
    name: str,
    input: dict[str, Any] | None = None,
    *,
    tool_use_id: str | None = None,
    text: str | None = None,
    usage: Usage | None = None,
    delay: float = 0.0,
) -> Step:
    """An answer that calls one tool (optionally preceded by text)."""
    blocks: list[dict[str, Any]] = [{"text": text}] if text else []
    blocks.append({"toolUse": {"toolUseId": tool_use_id or _next_tool_use_id(name), "name": name, "input": input or {}}})
    return Step(content=tuple(blocks), usage=usage, delay=delay)


def tool_calls(*calls: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str], usage: Usage | None = None,
               delay: float = 0.0) -> Step:
    """An answer that calls several tools at once: ``tool_calls(("add", {"a": 1}), ("mul", {"a": 2}, "id-2"))``."""
    blocks = []
    for call in calls:
        name, args = call[0], call[1]
        use_id = call[2] if len(call) > 2 else _next_tool_use_id(name)
        blocks.append({"toolUse": {"toolUseId": use_id, "name": name, "input": args}})
    return Step(content=tuple(blocks), usage=usage, delay=delay)


def reasoning(thought: str, answer: str, *, signature: str | None = None, usage: Usage | None = None) -> Step:
    """A reasoning block followed by a text answer."""
    block: dict[str, Any] = {"reasoningText": {"text": thought}}
    if signature is not None:
        block["reasoningText"]["signature"] = signature
    return Step(content=({"reasoningContent": block}, {"text": answer}), usage=usage)


def step(
    *content: ContentBlock | dict[str, Any],
    stop_reason: str | None = None,
    usage: Usage | None = None,
    delay: float = 0.0,
    chunk_delay: float = 0.0,
) -> Step:
    """An answer made of arbitrary content blocks."""
    return Step(content=tuple(dict(block) for block in content), stop_reason=stop_reason, usage=usage, delay=delay,
                chunk_delay=chunk_delay)


class ScriptedModel(Model):
    """A ``Model`` that replays scripted answers (the test double and the offline demo model).

    Args:
        *steps: The answers, in order (a single list is also accepted).
        model_id: Reported in ``get_config()`` and telemetry.
        loop: Replay the script forever instead of failing once it is used up.
        chunk_size: Split text into deltas of this many characters (``None``: one delta per block).
        context_window: Reported context window (for proactive compression).
        prices: Optional price table.
        record_calls: Keep a frozen copy of every request in ``calls`` (turn off for benchmarks).
    """

    def __init__(
        self,
        *steps: StepLike | Sequence[StepLike],
        model_id: str = "scripted",
        loop: bool = False,
        chunk_size: int | None = None,
        context_window: int | None = 200_000,
        prices: ModelPrices | None = None,
        record_calls: bool = True,
    ) -> None:
        if len(steps) == 1 and isinstance(steps[0], list | tuple):
            steps = tuple(steps[0])
        self._steps: list[StepLike] = list(steps)  # type: ignore[arg-type]
        self._cursor = 0
        self._loop = loop
        self._record = record_calls
        self.calls: list[ModelCall] = []
        self.config: dict[str, Any] = {"model_id": model_id, "chunk_size": chunk_size}
        self.context_window = context_window
        self.prices = prices

    # -- Model protocol --------------------------------------------------------------------------

    @override
    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    @override
    def get_config(self) -> dict[str, Any]:
        return dict(self.config)

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
        if self._record:
            call = ModelCall(
                messages=tuple(copy.deepcopy(list(messages))),  # type: ignore[arg-type]
                system_prompt=system_prompt,
                tool_specs=tuple(copy.deepcopy(list(tool_specs or []))),  # type: ignore[arg-type]
                tool_choice=copy.deepcopy(tool_choice),  # type: ignore[arg-type]
                index=len(self.calls),
            )
            self.calls.append(call)
        else:
            call = ModelCall(messages=tuple(messages), system_prompt=system_prompt,  # type: ignore[arg-type]
                             tool_specs=(), tool_choice=None, index=-1)
        answer = await self._resolve(self._next_step(call), call)
        if answer.delay:
            await asyncio.sleep(answer.delay)
        if answer.error is not None:
            raise answer.error
        async for event in self._events(answer, messages, system_prompt, tool_specs):
            yield event

    # -- state (AgentSnapshot.model_state) ------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """Where the script stands and the recorded calls (the steps are configuration, not state).

        The calls' messages and tool specs are the model's own records (copies taken when the call was made),
        not new copies: ``Agent.snapshot()`` copies the state, and the runtime's journal pickles it after every
        message — copying every recorded history there made each write cost more the longer the agent ran.
        Treat the returned state as read-only.
        """
        return {"cursor": self._cursor, "calls": [
            {"messages": list(call.messages), "system_prompt": call.system_prompt,
             "tool_specs": list(call.tool_specs), "tool_choice": call.tool_choice,
             "index": call.index} for call in self.calls]}

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back what :meth:`get_state` returned; raises ``ValueError`` naming a bad field."""
        if not isinstance(state, dict):
            raise ValueError(f"scripted model state must be a dict, got {type(state).__name__}")
        cursor = state.get("cursor")
        if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
            raise ValueError(f"scripted model state field 'cursor' must be an int >= 0, got {cursor!r}")
        raw_calls = state.get("calls", [])
        if not isinstance(raw_calls, list):
            raise ValueError("scripted model state field 'calls' must be a list")
        try:
            calls = [ModelCall(messages=tuple(item["messages"]), system_prompt=item.get("system_prompt"),
                               tool_specs=tuple(item.get("tool_specs") or ()), tool_choice=item.get("tool_choice"),
                               index=int(item["index"])) for item in raw_calls]
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"scripted model state field 'calls' is invalid: {error!r}") from None
        self._cursor = cursor
        self.calls = calls

    # -- script handling ---------------------------------------------------------------------------

    @property
    def remaining(self) -> int:
        """Steps not used yet (0 for a looping script)."""
        return 0 if self._loop else len(self._steps) - self._cursor

    def assert_complete(self) -> None:
        """Raise ``ScriptError`` if scripted steps were never used."""
        if self.remaining > 0:
            raise ScriptError(f"{self.remaining} scripted step(s) were never used")

    def _next_step(self, call: ModelCall) -> StepLike:
        if self._cursor >= len(self._steps):
            if not self._loop or not self._steps:
                last = json.dumps(call.messages[-1] if call.messages else None, default=str)[:300]
                raise ScriptError(f"model call #{len(self.calls)} was not scripted; last message: {last}")
            self._cursor = 0
        chosen = self._steps[self._cursor]
        self._cursor += 1
        return chosen

    async def _resolve(self, item: StepLike, call: ModelCall) -> Step:
        for _ in range(8):  # a responder may return another responder; bounded to catch loops
            if isinstance(item, Step):
                return item
            if isinstance(item, str):
                return text(item)
            if isinstance(item, BaseException):
                return Step(error=item)
            if isinstance(item, dict):
                return step(*item["content"]) if "content" in item else step(item)
            if callable(item):
                produced = item(call)
                item = await produced if inspect.isawaitable(produced) else produced
                continue
            break
        raise ScriptError(f"unsupported script step: {item!r}")

    async def _events(
        self, answer: Step, messages: Messages, system_prompt: SystemPrompt | None, tool_specs: list[ToolSpec] | None
    ) -> AsyncGenerator[StreamEvent, None]:
        chunk_size = self.config.get("chunk_size")
        yield {"messageStart": {"role": "assistant"}}
        output_chars = 0
        for index, block in enumerate(answer.content):
            if "toolUse" in block:
                use = block["toolUse"]
                yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}},
                                             "contentBlockIndex": index}}
                payload = json.dumps(use.get("input", {}))
                output_chars += len(payload)
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": payload}}, "contentBlockIndex": index}}
            elif "text" in block:
                yield {"contentBlockStart": {"start": {}, "contentBlockIndex": index}}
                content = block["text"]
                output_chars += len(content)
                for piece in _chunks(content, chunk_size):
                    if answer.chunk_delay:
                        await asyncio.sleep(answer.chunk_delay)
                    yield {"contentBlockDelta": {"delta": {"text": piece}, "contentBlockIndex": index}}
            elif "reasoningContent" in block:
                yield {"contentBlockStart": {"start": {}, "contentBlockIndex": index}}
                thought = block["reasoningContent"].get("reasoningText", {})
                output_chars += len(thought.get("text", ""))
                yield {"contentBlockDelta": {"delta": {"reasoningContent": {"text": thought.get("text", "")}},
                                             "contentBlockIndex": index}}
                if "signature" in thought:
                    yield {"contentBlockDelta": {"delta": {"reasoningContent": {"signature": thought["signature"]}},
                                                 "contentBlockIndex": index}}
            else:
                raise ScriptError(f"scripted block {block!r} cannot be streamed")
            yield {"contentBlockStop": {"contentBlockIndex": index}}
        yield {"messageStop": {"stopReason": answer.resolved_stop_reason()}}
        usage = answer.usage
        if usage is None:
            input_tokens = estimate_tokens(messages, system_prompt, tool_specs)
            output_tokens = max(1, output_chars // 4)
            usage = {"inputTokens": input_tokens, "outputTokens": output_tokens,
                     "totalTokens": input_tokens + output_tokens}
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": int(answer.delay * 1000)}}}


def _chunks(content: str, size: int | None) -> list[str]:
    if not size or size <= 0 or len(content) <= size:
        return [content]
    return [content[i : i + size] for i in range(0, len(content), size)]
