"""An agent whose two tools wait a minute, for the tests of a stream its caller stops reading mid-batch."""

from __future__ import annotations

import asyncio

from ray_harness import Agent, tool
from ray_harness.testing import ScriptedModel, text, tool_calls


def two_waiting_tools(tools: list[str]) -> Agent:
    """An agent that calls two tools at once, then answers "next"; each tool notes in ``tools`` its start and end.

    The two tools of one batch run as tasks of the concurrent executor while their events wait to be read.
    """
    @tool
    async def wait_long(n: int) -> str:
        """Wait a minute."""
        tools.append(f"{n} started")
        try:
            await asyncio.sleep(60)
        finally:
            tools.append(f"{n} ended")
        return "waited"

    return Agent(ScriptedModel(tool_calls(("wait_long", {"n": 1}), ("wait_long", {"n": 2})), text("next")),
                 tools=[wait_long])


BOTH_ENDED = ["1 ended", "1 started", "2 ended", "2 started"]
"""``sorted(tools)`` once both tools started and ended."""
