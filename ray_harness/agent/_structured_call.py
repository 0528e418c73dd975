"""``Agent.structured_output``: one model call that fills a pydantic model, leaving the agent's history alone.

Strands' deprecated ``agent.structured_output(output_model, prompt)``, kept with its semantics: the model reads the
history plus ``prompt`` and must answer with ``output_model``; neither the prompt nor the answer is added to the
history, no tool of the agent is offered, and the invocation hooks fire around the call. An invocation with
``structured_output_model=`` is the way to get structured output from a full run (tools, retries on an answer
that does not validate, history kept).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from ray_harness.agent._prompt import prompt_messages
from ray_harness.hooks.events import AfterInvocationEvent, BeforeInvocationEvent
from ray_harness.types.content import Message

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("prepare", "structured_output", "warn_deprecated")


def warn_deprecated() -> None:
    """Strands' deprecation warning, pointing at the caller of ``Agent.structured_output(_async)``."""
    warnings.warn("Agent.structured_output is deprecated (as in Strands): pass structured_output_model= to the "
                  "invocation instead, e.g. agent(prompt, structured_output_model=Model).structured_output",
                  DeprecationWarning, stacklevel=3)


def prepare(agent: Agent, prompt: Any) -> list[Message]:
    """The messages the model reads: the history, then ``prompt``'s.

    Raises:
        RuntimeError: The agent waits for interrupt responses.
        ValueError: No prompt and no history, or a prompt of another form.
    """
    if agent._interrupt_state.activated:
        raise RuntimeError("cannot call structured output during interrupt")
    if prompt is None and not agent.messages:
        raise ValueError("No conversation history or prompt provided")
    return [*agent.messages, *prompt_messages(prompt, "a string, a list of content blocks, a list of messages, or None")]


async def structured_output(agent: Agent, output_model: type, messages: list[Message]) -> Any:
    """Ask ``agent``'s model for ``output_model`` from ``messages`` (see :func:`prepare`); return the instance.

    Raises:
        StructuredOutputException: The model did not answer with ``output_model`` (the message names bad fields).
    """
    handler = agent.callback_handler
    await agent.hooks.invoke_callbacks_async(BeforeInvocationEvent(agent=agent, invocation_state={}))
    try:
        output = None
        stream = agent.model.structured_output(output_model, messages, system_prompt=agent.system_prompt)
        async for event in stream:
            kind = event.get("type")
            if kind == "output":
                output = event["output"]
            elif kind != "stop" and handler is not None:  # the handler hears the stream, as Strands' does
                handler(**event)
        return output
    finally:
        await agent.hooks.invoke_callbacks_async(AfterInvocationEvent(agent=agent, invocation_state={}))
