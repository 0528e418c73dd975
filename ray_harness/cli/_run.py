"""``ray-harness run``: stream one agent/graph/swarm run to the terminal."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from ray_harness.cli._options import Commands

__all__ = ("add_run",)


def add_run(commands: Commands) -> None:
    run = commands.add_parser("run", help="stream one agent/graph/swarm run to the terminal",
                              description="Builds the target and runs it once in this process, printing the text, "
                                          "tool calls, node starts and handoffs as they come, then how it stopped "
                                          "and what any interrupt asks. Example: ray-harness run "
                                          "my_pkg.targets:build_agent \"Summarize X\"")
    run.add_argument("target", help="module:function building an Agent, Graph or Swarm")
    run.add_argument("prompt", help="the user's message")
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ray_harness.evaluation._backends import resolve_factory

    target = resolve_factory(args.target)()
    if not callable(getattr(target, "stream_async", None)):  # else an AttributeError traceback from the loop
        raise TypeError(f"target {args.target!r} returned {type(target).__name__}, not an Agent, Graph or Swarm")
    return asyncio.run(_stream(target, args.prompt))


async def _stream(target: Any, prompt: str) -> int:
    result = None
    async for event in target.stream_async(prompt):
        kind = event.get("type")
        if kind == "text_delta":
            print(event["data"], end="", flush=True)
        elif kind == "tool_start":
            print(f"\n[tool] {event['tool_use']['name']} {json.dumps(event['tool_use'].get('input'))}", flush=True)
        elif kind == "multiagent_node_start":
            print(f"\n[node {event.get('node_id')} started]", flush=True)
        elif kind == "multiagent_node_stream":
            inner = event.get("event") or {}
            if inner.get("type") == "text_delta":
                print(inner["data"], end="", flush=True)
        elif kind == "multiagent_handoff":
            message = event.get("message")
            print(f"\n[handoff {event.get('from_node_ids')} → {event.get('to_node_ids')}]"
                  + (f" {message}" if message else ""), flush=True)
        elif kind in ("result", "multiagent_result"):
            result = event.get("result")
    print()
    if result is not None:
        status = getattr(result, "stop_reason", None) or getattr(getattr(result, "status", None), "value", "")
        print(f"[{status}]")
        for pending in getattr(result, "interrupts", None) or []:  # what a human is asked, and the id to answer
            print(f"[interrupt {pending.id}] {pending.name}: {json.dumps(pending.reason, default=str)}")
    return 0
