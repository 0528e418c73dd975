"""A support desk as a Swarm: a triage agent hands tickets to billing or tech, who may hand on again.

    python examples/swarm_support_desk.py                    # offline, orchestration in this process
    python examples/swarm_support_desk.py --runtime ray      # the swarm's orchestrator in a Ray actor
    python examples/swarm_support_desk.py --model openai:gpt-4o

What it shows:

* ``Swarm([...])`` members handing work over with the injected ``handoff_to_agent(agent_name, message,
  context=None)`` tool; ``context`` becomes shared knowledge the next member sees;
* a member tool (``lookup_invoice``) used mid-swarm;
* streaming the run: ``multiagent_handoff`` events as they happen, then the ``SwarmResult``
  (``status``, ``node_history``, per-member results, usage);
* ``repetitive_handoff_detection_window`` stopping ping-pong between members.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from ray_harness import Agent, Swarm, tool
from ray_harness.testing import ScriptedModel, text, tool_call

INVOICES = {"INV-7": {"amount": 120.0, "status": "charged twice"}}


@tool
def lookup_invoice(invoice_id: str) -> dict[str, Any]:
    """Look up an invoice.

    Args:
        invoice_id: The invoice id, e.g. "INV-7".
    """
    return INVOICES.get(invoice_id, {"error": f"no invoice {invoice_id}"})


def _handoff(target: str, message: str, context: dict[str, Any] | None = None) -> Any:
    return tool_call("handoff_to_agent", {"agent_name": target, "message": message, **({"context": context}
                                                                                        if context else {})})


def build_swarm(model: str | None, runtime: str) -> Swarm:
    """triage → billing → tech; each member's offline script plays its part of the ticket."""
    triage = Agent(model or ScriptedModel(_handoff("billing", "Customer says INV-7 was charged twice.",
                                                   {"customer": "ada@example.com"}),
                                          text("Handed to billing.")),
                   name="triage", description="Reads new tickets and routes them.",
                   system_prompt="Route each ticket to billing or tech with handoff_to_agent.")
    billing = Agent(model or ScriptedModel(tool_call("lookup_invoice", {"invoice_id": "INV-7"}),
                                           _handoff("tech", "Duplicate charge on INV-7: check the payment webhook.",
                                                    {"invoice": "INV-7", "refund": 120.0}),
                                           text("Refund of $120 issued.")),
                    tools=[lookup_invoice], name="billing", description="Invoices, refunds and charges.",
                    system_prompt="Resolve billing problems; hand technical causes to tech.")
    tech = Agent(model or ScriptedModel(text("The payment webhook retried without an idempotency key; fixed. "
                                             "Refund of $120 issued to ada@example.com.")),
                 name="tech", description="Bugs and integrations.",
                 system_prompt="Find and fix technical causes; then write the reply to the customer.")
    return Swarm([triage, billing, tech], entry_point=triage, max_handoffs=6,
                 repetitive_handoff_detection_window=4, repetitive_handoff_min_unique_agents=2, runtime=runtime)


async def run(model: str | None, runtime: str) -> int:
    swarm = build_swarm(model, runtime)
    result = None
    try:
        async for event in swarm.stream_async("Ticket #311: I was charged twice for invoice INV-7."):
            if event["type"] == "multiagent_handoff":
                print(f"[handoff] {event['from_node_ids']} -> {event['to_node_ids']}: {event['message']}")
            elif event["type"] == "multiagent_result":
                result = event["result"]
    finally:
        swarm.shutdown()  # with runtime="ray", stops the orchestrator actor (also done when the swarm is collected)
    assert result is not None
    print(f"status={result.status.value}")
    print("members:", " -> ".join(node.node_id for node in result.node_history))
    print(f"final answer: {str(result.results[result.node_history[-1].node_id].result).strip()}")
    print(f"usage: {result.accumulated_usage}")
    return 0 if result.status.value == "completed" else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a provider model, e.g. openai:gpt-4o (default: offline ScriptedModel)")
    parser.add_argument("--runtime", choices=["local", "ray"], default="local")
    args = parser.parse_args()
    raise SystemExit(asyncio.run(run(args.model, args.runtime)))


if __name__ == "__main__":
    main()
