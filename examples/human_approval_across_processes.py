"""Human approval across processes: a detached agent pauses for a human; a different process answers.

    python examples/human_approval_across_processes.py                 # both steps, as two driver processes
    python examples/human_approval_across_processes.py --reject        # the human says no
    python examples/human_approval_across_processes.py --model openai:gpt-4o

On a cluster (``RAY_ADDRESS`` set, e.g. after ``cluster/local.sh up 1``) the steps can also be run by hand,
minutes or hours apart, from any machine that can reach the cluster:

    python examples/human_approval_across_processes.py start  --name refunds-42
    python examples/human_approval_across_processes.py answer --name refunds-42 --interrupt-id <id> --approve

What it shows:

1. Driver process 1 (``start``) creates a *detached* ``RemoteAgent`` (a named Ray actor that outlives its
   driver), asks it to refund an order, and gets ``stop_reason="interrupt"``: the ``refund`` tool called
   ``tool_context.interrupt(...)``. It prints the interrupt and exits.
2. Driver process 2 (``answer``) finds the agent by name with ``RemoteAgent.get(name)``, sends
   ``[{"interruptResponse": {"interruptId": ..., "response": ...}}]`` and prints the final answer. Only the
   interrupted tool runs again; the model is not asked again for that turn. Then it stops the actor.

Without ``RAY_ADDRESS`` this script starts an embedded local Ray in the parent process and runs the two
steps as child processes that join it, so process 1 is really gone when process 2 answers.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from typing import Any

from ray_harness import Agent, ToolContext, tool
from ray_harness.testing import ScriptedModel, text, tool_call


@tool(context=True)
def refund(order_id: str, amount: float, tool_context: ToolContext) -> str:
    """Refund an order. A human must approve every refund.

    Args:
        order_id: The order to refund.
        amount: The amount in dollars.
    """
    answer = tool_context.interrupt("refund-approval", reason=f"Refund ${amount:.2f} on order {order_id}?")
    if str(answer).strip().lower() not in ("approve", "yes", "y"):
        return f"refund of order {order_id} rejected by a human"
    return f"refunded ${amount:.2f} on order {order_id}"


def _final_answer(call: Any) -> Any:
    outcome = call.messages[-1]["content"][0]["toolResult"]["content"][0]["text"]
    return text(f"Done: {outcome}.")


def build_agent(model: str | None = None) -> Agent:
    """The support agent; built inside its Ray actor (the factory ships there, not the agent)."""
    offline = ScriptedModel(tool_call("refund", {"order_id": "A-1001", "amount": 42.5}), _final_answer)
    return Agent(model or offline, tools=[refund], name="refund_desk",
                 system_prompt="You handle refunds. Use the refund tool, then report the outcome in one sentence.")


def start(name: str, model: str | None) -> None:
    from ray_harness import runtime
    from ray_harness.runtime import RemoteAgent

    runtime.init()  # joins RAY_ADDRESS
    agent = RemoteAgent(functools.partial(build_agent, model), name=name, detached=True)
    result = agent("Please refund order A-1001, $42.50: the parcel never arrived.")
    print(f"[process {os.getpid()}] stop_reason={result.stop_reason}")
    for pending in result.interrupts:
        print(f"[process {os.getpid()}] waiting for a human: {pending.name}: {pending.reason}")
    print(json.dumps({"interrupts": [{"id": item.id, "reason": item.reason} for item in result.interrupts]}))


def answer(name: str, interrupt_id: str, approve: bool) -> None:
    from ray_harness import runtime
    from ray_harness.runtime import RemoteAgent

    runtime.init()
    agent = RemoteAgent.get(name)  # the agent another process created; its interrupt state lives in the actor
    responses = [{"interruptResponse": {"interruptId": interrupt_id, "response": "approve" if approve else "no"}}]
    try:
        result = agent(responses)
        print(f"[process {os.getpid()}] stop_reason={result.stop_reason}")
        print(f"[process {os.getpid()}] answer: {str(result).strip()}")
    finally:
        agent.shutdown()  # a detached actor lives until someone stops it


def both(model: str | None, approve: bool) -> None:
    """Run ``start`` and ``answer`` as two separate driver processes on one Ray."""
    from ray_harness import runtime

    # RAY_ADDRESS, else our own embedded Ray ("local": never a `ray start` cluster that happens to run here),
    # which lives as long as this process.
    info = runtime.init(os.environ.get("RAY_ADDRESS") or "local")
    env = {**os.environ, "RAY_ADDRESS": info["gcs_address"]}
    name = f"refund-desk-{os.getpid()}"
    common = [sys.executable, __file__, *(["--model", model] if model else [])]
    first = subprocess.run([*common, "start", "--name", name], env=env, check=True, capture_output=True, text=True)
    print(first.stdout, end="")
    (pending,) = json.loads(first.stdout.strip().splitlines()[-1])["interrupts"]
    print(f"[process {os.getpid()}] the first driver has exited; answering from a new one")
    subprocess.run([*common, "answer", "--name", name, "--interrupt-id", pending["id"],
                    "--approve" if approve else "--reject"], env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a provider model, e.g. openai:gpt-4o (default: offline ScriptedModel)")
    parser.add_argument("step", nargs="?", choices=["start", "answer"], help="run one step (default: both)")
    parser.add_argument("--name", default="refund-desk", help="the agent's actor name")
    parser.add_argument("--interrupt-id", help="for 'answer': the id that 'start' printed")
    decision = parser.add_mutually_exclusive_group()
    decision.add_argument("--approve", dest="approve", action="store_true", default=True)
    decision.add_argument("--reject", dest="approve", action="store_false")
    args = parser.parse_args()
    if args.step == "start":
        start(args.name, args.model)
    elif args.step == "answer":
        if not args.interrupt_id:
            parser.error("answer needs --interrupt-id (printed by 'start')")
        answer(args.name, args.interrupt_id, args.approve)
    else:
        both(args.model, args.approve)


if __name__ == "__main__":
    main()
