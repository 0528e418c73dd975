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
