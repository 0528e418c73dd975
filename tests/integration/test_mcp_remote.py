"""The MCP client inside a RemoteAgent: the client ships as configuration, the server runs in the actor."""

from __future__ import annotations

import os
import uuid

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


def test_mcp_tools_in_a_remote_agent() -> None:
    from ray_harness.runtime import RemoteAgent

    remote = RemoteAgent("tests.integration.agents:mcp_agent", name=f"mcp-{uuid.uuid4().hex[:6]}")
    try:
        result = remote("which process serves the tools?")
        assert str(result).startswith("server pid ")
        server_pid = int(str(result).split()[-1])
        actor_pid = remote.info()["pid"]
        assert server_pid not in (os.getpid(), actor_pid)  # a server process of its own, started by the actor
        with open(f"/proc/{server_pid}/stat", encoding="ascii") as handle:
            parent = int(handle.read().split()[3])
        assert parent == actor_pid  # spawned inside the actor's process, not by the driver
    finally:
        remote.shutdown()


def test_a_tool_timeout_set_in_the_driver_holds_in_the_remote_agent() -> None:
    """Strands' ``tool.timeout`` on an MCP tool: the client ships as configuration and lists its tools again in
    the actor, where the timeout set on the driver's listed tool still applies."""
    import sys
    from datetime import timedelta
    from pathlib import Path

    from ray_harness import Agent
    from ray_harness.runtime import RemoteAgent
    from ray_harness.testing import ScriptedModel, text, tool_call
    from ray_harness.tools.mcp import MCPClient

    server = str(Path(__file__).resolve().parents[1] / "mcp" / "server_app.py")
    client = MCPClient(command=[sys.executable, server, "stdio"])
    try:
        model = ScriptedModel(tool_call("slow", {"seconds": 60, "tag": "remote"}, tool_use_id="s1"), text("gave up"))
        agent = Agent(model, tools=[client], name="impatient", retry_strategy=None)
        (slow,) = [tool for tool in client.list_tools_sync() if tool.tool_name == "slow"]
        slow.timeout = timedelta(seconds=1)  # as Strands users set it; the agent has not run yet
        remote = RemoteAgent(agent, name=f"mcp-timeout-{uuid.uuid4().hex[:6]}")
    finally:
        client.close()
    try:
        assert str(remote("wait")) == "gave up\n"
        (block,) = remote.messages[2]["content"]
        assert block["toolResult"]["status"] == "error"
        assert "within 1s" in block["toolResult"]["content"][0]["text"]
    finally:
        remote.shutdown()
