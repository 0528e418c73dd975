"""A coding agent whose files and commands live in a Docker container, not on your machine.

    python examples/docker_sandbox_coder.py                          # offline model, image python:3.12-slim
    python examples/docker_sandbox_coder.py --image rh-busybox:test  # any image with a POSIX shell
    python examples/docker_sandbox_coder.py --model openai:gpt-4o

The engine is the one ``DOCKER_HOST`` names (default: the local socket). The container is created for the
run with no network, a memory and process limit, and removed at the end.

What it shows:

* ``DockerSandbox(image=...)`` as an async context manager;
* ``Agent(sandbox=box)`` adding the ``sandbox_file_editor`` and ``sandbox_shell`` tools: the agent writes
  a script into the container and runs it there;
* using the same container directly with ``box.execute(...)`` and ``box.read_text(path)``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from ray_harness import Agent
from ray_harness.sandbox import DockerSandbox, SandboxError
from ray_harness.testing import ScriptedModel, text, tool_call

FIB_SH = """#!/bin/sh
# The first ten Fibonacci numbers, one per line.
a=0; b=1; i=0
while [ $i -lt 10 ]; do
  echo $a
  t=$((a + b)); a=$b; b=$t; i=$((i + 1))
done
"""


def _report(call: Any) -> Any:
    output = call.messages[-1]["content"][0]["toolResult"]["content"][0]["text"]
    numbers = [line for line in output.splitlines() if line.strip().isdigit()]
    return text(f"fib.sh ran in the container and printed: {' '.join(numbers)}")


def scripted_model() -> ScriptedModel:
    return ScriptedModel(
        tool_call("sandbox_file_editor", {"command": "create", "path": "/tmp/fib.sh", "file_text": FIB_SH}),
        tool_call("sandbox_shell", {"command": "cd /tmp && sh fib.sh", "timeout": 30}),
        _report,
    )


async def run(image: str, model: str | None) -> int:
    box = DockerSandbox(image=image, mem_limit="256m", pids_limit=64)
    try:
        await box.start()
    except SandboxError as error:  # most often an image the engine cannot pull (no network, a typo)
        await box.close()
        print(f"error: no container from {image}: {error}\n(pull the image first, `docker pull {image}`, or pass "
              "--image with a local image that has a POSIX shell: `docker images` lists them)", file=sys.stderr)
        return 2
    async with box:  # started above: entering it starts nothing more; leaving it removes the container
        agent = Agent(model or scripted_model(), sandbox=box, name="coder",
                      system_prompt="You write POSIX shell scripts under /tmp and run them with sandbox_shell.")
        result = await agent.invoke_async("Write /tmp/fib.sh printing the first ten Fibonacci numbers, "
                                          "run it and tell me what it printed.")
        print(f"agent: {str(result).strip()}")
        check = await box.execute("sh /tmp/fib.sh | tail -n 1", timeout=30)
        print(f"run again with box.execute: exit {check.exit_code}, last number {check.stdout.strip()}")
        print(f"fib.sh as the agent wrote it: {len((await box.read_text('/tmp/fib.sh')).splitlines())} lines")
        return 0 if result.stop_reason == "end_turn" else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a provider model, e.g. openai:gpt-4o (default: offline ScriptedModel)")
    parser.add_argument("--image", default="python:3.12-slim", help="the image to create the container from")
    args = parser.parse_args()
    raise SystemExit(asyncio.run(run(args.image, args.model)))


if __name__ == "__main__":
    main()
