"""Human in the loop: a Confirm intervention pauses a destructive tool until someone approves.

    python examples/approval.py            # prompts on the terminal (no terminal, e.g. < /dev/null: no)
    python examples/approval.py --yes      # approves without asking
    python examples/approval.py --model openai:gpt-4o   # a real model decides to call the tool
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from ray_harness import Agent, tool
from ray_harness.interventions import Confirm, InterventionHandler, Proceed
from ray_harness.testing import ScriptedModel, text, tool_call

WORKDIR = Path(tempfile.mkdtemp(prefix="ray_harness_approval_"))  # removed when main() ends
(WORKDIR / "old.log").write_text("stale\n")


@tool
def delete_file(name: str) -> str:
    """Delete a file in the work directory.

    Args:
        name: File name inside the work directory.
    """
    target = WORKDIR / name
    target.unlink()
    return f"deleted {target.name}"


class ApproveDeletes(InterventionHandler):
    name = "approve-deletes"

    def before_tool_call(self, event):  # type: ignore[no-untyped-def]
        if event.tool_use["name"] == "delete_file":
            return Confirm(f"Delete {event.tool_use['input']['name']}?")
        return Proceed()


def _ask(question: str) -> str:
    """The terminal's answer; no terminal to ask (stdin closed or empty, e.g. `< /dev/null`) is the default: no."""
    try:
        return input(question)
    except EOFError:
        print("(no answer: no)")
        return "no"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--yes", action="store_true", help="approve without asking")
    parser.add_argument("--model", help="a provider model, e.g. openai:gpt-4o (default: offline ScriptedModel)")
    args = parser.parse_args()

    def answer(call):  # type: ignore[no-untyped-def]  # the scripted model reads the tool result
        outcome = call.messages[-1]["content"][0]["toolResult"]["content"][0]["text"]
        return text("Cleaned up old.log." if outcome.startswith("deleted") else "Left old.log alone: not approved.")

    model = args.model or ScriptedModel(tool_call("delete_file", {"name": "old.log"}), answer)
    agent = Agent(model, tools=[delete_file], interventions=[ApproveDeletes()],
                  system_prompt="You keep the work directory tidy. old.log is a stale log file: delete it.")

    result = agent("Clean up the logs.")
    while result.stop_reason == "interrupt":
        responses = []
        for pending in result.interrupts:
            if args.yes:
                answer = "yes"
            else:
                answer = _ask(f"{pending.reason} [y/N] ")
            responses.append({"interruptResponse": {"interruptId": pending.id, "response": answer}})
        result = agent(responses)

    print(str(result).strip())
    outcomes = [block["toolResult"]["content"][0]["text"] for message in agent.messages
                for block in message["content"] if "toolResult" in block]
    print("tool result:", outcomes[0] if outcomes else "(the model called no tool)")
    print("old.log still exists:", (WORKDIR / "old.log").exists())


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(WORKDIR, ignore_errors=True)
