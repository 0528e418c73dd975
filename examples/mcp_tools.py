"""Tools from a real MCP server: the ``mcp-server-time`` package from PyPI, started over stdio.

    pip install mcp-server-time                      # here, or in a venv of its own (see below)
    python examples/mcp_tools.py
    python examples/mcp_tools.py --model openai:gpt-4o

What it shows:

* ``MCPClient(command=[...], prefix="time")``: a stdio MCP server as a tool provider; its tools appear to the
  model as ``time_get_current_time`` and ``time_convert_time``;
* the client is lazy: the server process starts at the agent's first invocation and stops when the
  ``with`` block ends;
* MCP tool results flowing back into the agent loop like any other tool's.

The server runs as ``python -m mcp_server_time`` with this interpreter, or as the command in
``RAY_HARNESS_MCP_TIME_SERVER`` (for example ``/path/to/venv/bin/python -m mcp_server_time``): its current
releases need ``mcp>=2.2``, which the Strands SDK of the benchmarks does not accept, so CI keeps it in a venv of
its own (``scripts/ci/mcp_time.sh``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import sys
from typing import Any

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools.mcp import MCPClient


def _answer(call: Any) -> Any:
    results = [block["toolResult"]["content"][0]["text"] for block in call.messages[-1]["content"]
               if "toolResult" in block]
    return text("From the time server: " + " | ".join(" ".join(result.split()) for result in results))


def scripted_model() -> ScriptedModel:
    return ScriptedModel(
        tool_call("time_convert_time", {"source_timezone": "Europe/Paris", "time": "09:30",
                                        "target_timezone": "Asia/Tokyo"}),
        _answer,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a provider model, e.g. openai:gpt-4o (default: offline ScriptedModel)")
    args = parser.parse_args()
    command = shlex.split(os.environ.get("RAY_HARNESS_MCP_TIME_SERVER", ""))
    if not command and importlib.util.find_spec("mcp_server_time") is None:  # else a trace of the failed start
        raise SystemExit("error: the mcp-server-time server is not installed here: `pip install mcp-server-time`, or "
                         "set RAY_HARNESS_MCP_TIME_SERVER to its command in another venv (docs/how-to/mcp-tools.md)")
    command = command or [sys.executable, "-m", "mcp_server_time"]
    server = MCPClient(command=[*command, "--local-timezone", "UTC"], prefix="time")
    with server:
        agent = Agent(args.model or scripted_model(), tools=[server], name="clock",
                      system_prompt="Answer time questions with the time tools.")
        result = agent("It is 09:30 in Paris. What time is it in Tokyo?")
        print(f"tools from the server: {sorted(agent.tool_names)}")
        print(f"answer: {str(result).strip()}")
    raise SystemExit(0 if result.stop_reason == "end_turn" else 1)


if __name__ == "__main__":
    main()
