"""Agents run in separate Python processes by test_processes.py (not collected: no test_ prefix)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ray_harness import Agent, tool
from ray_harness.hooks.events import BeforeToolCallEvent
from ray_harness.session import FileSessionManager
from ray_harness.testing import ScriptedModel, text, tool_calls


def make_tools(log: Path) -> list:
    @tool
    def deploy(target: str) -> str:
        """Deploy to a target."""
        with log.open("a") as stream:
            stream.write(f"deploy {target}\n")
        return f"deployed {target}"

    @tool
    def check(target: str) -> str:
        """Check a target."""
        with log.open("a") as stream:
            stream.write(f"check {target}\n")
        return f"{target} healthy"

    @tool
    def slow(seconds: float) -> str:
        """Sleep."""
        with log.open("a") as stream:
            stream.write("slow started\n")
        time.sleep(seconds)
        return "slow finished"

    return [deploy, check, slow]


def approval(event: BeforeToolCallEvent) -> None:
    if event.tool_use["name"] == "deploy":
        answer = event.interrupt("approve-deploy", reason={"target": event.tool_use["input"]["target"]})
        if answer != "yes":
            event.cancel_tool = "deploy was not approved"


def main() -> None:
    mode, storage, log = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    sessions = FileSessionManager("proc", storage_dir=storage)
    if mode == "interrupt":
        model = ScriptedModel(tool_calls(("check", {"target": "prod"}, "use-check"),
                                         ("deploy", {"target": "prod"}, "use-deploy")))
        agent = Agent(model, tools=make_tools(log), hooks=[approval], session_manager=sessions)
        result = agent("ship it")
        print(json.dumps({"stop_reason": result.stop_reason, "interrupts": [i.to_dict() for i in result.interrupts]}))
    elif mode == "resume":
        model = ScriptedModel(text("shipped"))
        agent = Agent(model, tools=make_tools(log), hooks=[approval], session_manager=sessions)
        response = json.loads(sys.argv[4])
        result = agent([{"interruptResponse": response}])
        model.assert_complete()
        print(json.dumps({"stop_reason": result.stop_reason, "text": str(result), "model_calls": len(model.calls),
                          "messages": agent.messages}))
    elif mode == "crash":
        model = ScriptedModel(tool_calls(("check", {"target": "db"}, "use-check"),
                                         ("slow", {"seconds": 120}, "use-slow")), text("never"))
        Agent(model, tools=make_tools(log), session_manager=sessions)("check and wait")
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
