"""Quickstart: an agent with two tools and hooks that watch and veto tool calls.

    python examples/quickstart.py                       # offline: a ScriptedModel plays the model
    python examples/quickstart.py --model openai:gpt-4o # or anthropic:<id>, bedrock:<id>,
                                                        # openai-compatible:http://127.0.0.1:8000/v1#<model>

What it shows:

* ``@tool`` functions (the spec comes from the type hints and the docstring);
* a ``HookProvider`` that logs every tool call and its result (``BeforeToolCallEvent``,
  ``AfterToolCallEvent``) and vetoes one tool by writing ``event.cancel_tool``;
* ``agent.add_hook(callback)``, which infers the event type from the annotation;
* the result: stop reason, text and token usage.
"""

from __future__ import annotations

import argparse
from typing import Any

from ray_harness import Agent, HookProvider, HookRegistry, tool
from ray_harness.hooks import AfterInvocationEvent, AfterToolCallEvent, BeforeToolCallEvent
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls

INVENTORY = {"apples": 12, "pears": 0, "plums": 7}


@tool
def stock(item: str) -> int:
    """How many of an item are in stock.

    Args:
        item: The item name, for example "apples".
    """
    return INVENTORY.get(item, 0)


@tool
def clear_inventory() -> str:
    """Delete every item from the inventory."""
    INVENTORY.clear()
    return "inventory cleared"


class AuditHooks(HookProvider):
    """Prints each tool call and its result; refuses ``clear_inventory``."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self.before_tool)
        registry.add_callback(AfterToolCallEvent, self.after_tool)

    def before_tool(self, event: BeforeToolCallEvent) -> None:
        print(f"[hook] calling {event.tool_use['name']}({event.tool_use['input']})")
        if event.tool_use["name"] == "clear_inventory":
            event.cancel_tool = "clear_inventory is not allowed in this shop"  # becomes the tool's error result

    def after_tool(self, event: AfterToolCallEvent) -> None:
        print(f"[hook] {event.tool_use['name']} -> {event.result['status']}: {event.result['content'][0]}")


def scripted_model() -> ScriptedModel:
    """The model's side of the conversation, scripted: two stock look-ups, a refused clear, an answer."""
    return ScriptedModel(
        tool_calls(("stock", {"item": "apples"}), ("stock", {"item": "pears"})),
        tool_call("clear_inventory", {}),
        text("We have 12 apples and no pears. I was not allowed to clear the inventory."),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a provider model, e.g. openai:gpt-4o (default: offline ScriptedModel)")
    args = parser.parse_args()

    agent = Agent(args.model or scripted_model(), tools=[stock, clear_inventory], hooks=[AuditHooks()],
                  system_prompt="You run a fruit shop. Use the tools; then answer in one sentence.")

    def summary(event: AfterInvocationEvent) -> None:  # the annotation tells add_hook which event it is for
        print(f"[hook] invocation finished: {event.result.stop_reason if event.result else None}")

    agent.add_hook(summary)
    result = agent("How many apples and pears do we have? Then clear the inventory.")
    print(f"stop_reason={result.stop_reason}")
    print(f"answer: {str(result).strip()}")
    print(f"usage: {result.metrics.accumulated_usage}")
    print(f"inventory untouched: {INVENTORY == {'apples': 12, 'pears': 0, 'plums': 7}}")


if __name__ == "__main__":
    main()
