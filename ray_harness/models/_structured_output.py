"""``Model.structured_output``: one model call forced to fill a pydantic model, as Strands' providers offer it.

The call offers one tool named after the pydantic model (the same tool spec ``Agent(structured_output_model=)``
sends) and forces it; the tool call's input, validated, is the output. A provider that cannot force a tool may
answer with the JSON object as text instead, which is read the same way.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from ray_harness.models.base import estimate_tokens
from ray_harness.models.rate_limit import rate_limited
from ray_harness.types.content import Message, Messages, SystemPrompt
from ray_harness.types.exceptions import StructuredOutputException
from ray_harness.types.validation import describe_validation_error

if TYPE_CHECKING:
    from ray_harness.models.base import Model

__all__ = ("structured_output",)

T = TypeVar("T", bound=BaseModel)


async def structured_output(model: Model, output_model: type[T], prompt: Messages | str,
                            system_prompt: SystemPrompt | None, kwargs: dict[str, Any]
                            ) -> AsyncGenerator[dict[str, Any], None]:
    """The events of ``model.structured_output(...)``: stream events, then ``stop``, then ``output``."""
    # Imported here: the agent package imports the models, so importing it at module level would be circular.
    # Both pieces are the agent's own, so a direct call asks and assembles exactly as an agent invocation does.
    from ray_harness.agent._structured import StructuredOutput
    from ray_harness.agent.streaming import process_stream
    from ray_harness.middleware.types import ModelStopReason

    structured = StructuredOutput(output_model)  # a TypeError for anything but a pydantic model class
    messages = _messages(prompt)
    specs = [structured.spec]
    stream: AsyncGenerator[Any, None] = model.stream(messages, specs, system_prompt,
                                                     tool_choice={"tool": {"name": structured.name}}, **kwargs)
    stream = rate_limited(model, stream, lambda: estimate_tokens(messages, system_prompt, specs))
    stop: ModelStopReason | None = None
    async for event in process_stream(stream):
        if isinstance(event, ModelStopReason):
            stop = event
        else:
            yield event
    assert stop is not None  # process_stream always ends with the stop event
    yield {"type": "stop", "stop": (stop.stop_reason, stop.message, stop.usage, stop.metrics)}
    yield {"type": "output", "output": _output(structured, output_model, stop.stop_reason, stop.message)}


def _messages(prompt: Messages | str) -> Messages:
    if isinstance(prompt, str):
        return [{"role": "user", "content": [{"text": prompt}]}]
    if not isinstance(prompt, list) or not all(isinstance(message, dict) for message in prompt):
        raise TypeError(f"prompt must be a list of messages or a string, got {type(prompt).__name__}")
    return prompt


def _output(structured: Any, output_model: type[T], stop_reason: str, message: Message) -> T:
    calls = [block["toolUse"] for block in message.get("content", [])
             if "toolUse" in block and block["toolUse"].get("name") == structured.name]
    if calls:
        try:  # the last call counts, as in Strands
            return output_model.model_validate(calls[-1].get("input") or {})
        except ValidationError as error:
            raise StructuredOutputException(
                f"the model's structured output failed validation: {describe_validation_error(error, structured.name)}"
            ) from error
    if stop_reason == "end_turn":
        value = structured.from_text(message)  # the JSON object as text, or a StructuredOutputException
        assert isinstance(value, output_model)
        return value
    raise StructuredOutputException(
        f"the model did not produce the structured output {structured.name!r}: it stopped with {stop_reason!r} "
        "without calling its tool"
    )
