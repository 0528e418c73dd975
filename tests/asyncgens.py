"""Which async generators a call starts: the probe the quiet-path tests assert with."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from ray_harness import Agent
from ray_harness.multiagent import MultiAgentBase


def generators_started(agent: Agent | MultiAgentBase, prompt: str) -> list[str]:
    """The names of the async generators one ``invoke_async`` (of an agent, a Graph or a Swarm) starts."""
    started: list[str] = []

    async def main() -> None:
        firstiter, finalizer = sys.get_asyncgen_hooks()

        def record(generator: Any) -> None:
            started.append(generator.ag_code.co_name)
            if firstiter is not None:
                firstiter(generator)

        sys.set_asyncgen_hooks(firstiter=record, finalizer=finalizer)
        await agent.invoke_async(prompt)

    asyncio.run(main())
    return started
