"""MCPClient configuration: validation, laziness and pickling (the client travels as its configuration)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types
import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools import ToolProvider
from ray_harness.tools.mcp import (
    MCPAgentTool,
    MCPCallCancelled,
    MCPClient,
    MCPClientConfig,
    MCPClientInitializationError,
)
from tests.mcp.conftest import STDIO_COMMAND, not_crash

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of command=[argv...] (stdio) or url=..."),
        ({"command": ["x"], "url": "http://h/mcp"}, "exactly one of command"),
        ({"command": []}, "MCPClient.command: List should have at least 1 item"),
        ({"command": [""]}, "command[0] must name the program to run"),
        ({"url": "ftp://h/mcp"}, "MCPClient.url: String should match pattern"),
        ({"url": "http://h/mcp", "env": {"A": "1"}}, "env= and cwd= apply to stdio servers"),
        ({"command": ["x"], "headers": {"A": "1"}}, "headers= applies to HTTP servers"),
        ({"command": ["x"], "prefix": "has space"}, "MCPClient.prefix: String should match pattern"),
        ({"command": ["x"], "startup_timeout": 0}, "MCPClient.startup_timeout: Input should be greater than 0"),
        ({"command": ["x"], "tool_filter": "not callable"}, "MCPClient.tool_filter"),
        ({"command": "uvx mcp-server-fetch"}, "command= takes the argv as a list, e.g. command=['uvx', 'mcp-"),
        ({"command": lambda: None}, "a transport callable (Strands' MCPClient(lambda: stdio_client(...))) is not"),
    ],
)
def test_invalid_configuration_names_the_field(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="invalid MCPClient") as caught:
        MCPClient(**kwargs)
    assert message in str(caught.value)


def test_the_client_is_a_tool_provider_that_connects_lazily() -> None:
    client = MCPClient(command=["/nonexistent/server"])
    assert isinstance(client, ToolProvider)
    agent = Agent(ScriptedModel(), tools=[client])  # nothing is started, so nothing fails yet
    assert agent.tool_names == []
    with pytest.raises(MCPClientInitializationError, match="/nonexistent/server"):
        agent("hi")


def test_pickle_round_trip_is_the_configuration_only() -> None:
    client = MCPClient(command=STDIO_COMMAND, env={"A": "1"}, prefix="srv", tool_filter=not_crash, startup_timeout=9)
    clone = pickle.loads(pickle.dumps(client))
    assert clone.config == client.config
    assert repr(clone) == repr(client)
    assert clone.__getstate__() == {"config": client.config}


def test_a_pickled_agent_opens_its_own_connection_in_the_receiving_process(shared_stdio: MCPClient) -> None:
    model = ScriptedModel(tool_call("srv_pid", {}), text("here"), tool_call("srv_pid", {}), text("there"))
    agent = Agent(model, tools=[shared_stdio])
    agent("where?")
    here_pid = int(agent.messages[2]["content"][0]["toolResult"]["content"][0]["text"])

    script = (
        "import pickle, sys\n"
        "agent = pickle.loads(sys.stdin.buffer.read())\n"
        "print(str(agent('and now?')).strip())\n"
        "print(agent.messages[-2]['content'][0]['toolResult']['content'][0]['text'])\n"
        "for provider in agent.tool_registry.providers:\n"
        "    provider.close()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script], input=pickle.dumps(agent), capture_output=True,
                          timeout=60, env=env, cwd=REPO_ROOT, check=False)

    assert done.returncode == 0, done.stderr.decode()
    answer, there_pid = done.stdout.decode().split()
    assert answer == "there"
    assert int(there_pid) != here_pid


@pytest.mark.parametrize("error_type", [MCPClientInitializationError, MCPCallCancelled])
def test_errors_pickle(error_type: type[Exception]) -> None:
    clone = pickle.loads(pickle.dumps(error_type("could not start MCP server command 'x': boom")))
    assert type(clone) is error_type
    assert str(clone) == "could not start MCP server command 'x': boom"


def test_cloudpickle_carries_a_lambda_filter() -> None:
    cloudpickle = pytest.importorskip("cloudpickle")  # how agents travel into Ray actors
    client = MCPClient(command=STDIO_COMMAND, tool_filter=lambda name: name.startswith("e"))
    clone = pickle.loads(cloudpickle.dumps(client))
    assert clone.config.tool_filter is not None
    assert (clone.config.tool_filter("echo"), clone.config.tool_filter("add")) == (True, False)


@pytest.mark.parametrize("public", [MCPAgentTool, MCPCallCancelled, MCPClient, MCPClientConfig,
                                    MCPClientInitializationError])
def test_public_classes_are_named_and_pickled_by_their_public_module(public: type) -> None:
    # Some are defined in private modules; tracebacks, reprs and pickles still name ray_harness.tools.mcp.
    assert (public.__module__, public.__qualname__) == ("ray_harness.tools.mcp", public.__name__)
    reference = pickle.dumps(public)
    assert b"ray_harness.tools.mcp" in reference
    assert pickle.loads(reference) is public


def test_an_mcp_agent_tool_pickles_with_its_client_as_configuration() -> None:
    client = MCPClient(command=STDIO_COMMAND, prefix="srv")
    tool = MCPAgentTool(mcp_types.Tool(name="echo", input_schema={"type": "object"}), client, "srv_echo", timeout=5)
    clone = pickle.loads(pickle.dumps(tool))
    assert (type(clone), clone.tool_name, clone.tool_spec, clone.timeout) == (MCPAgentTool, "srv_echo",
                                                                                tool.tool_spec, 5)
    assert clone.mcp_client.config == client.config


def test_the_spec_of_an_mcp_agent_tool_cannot_be_replaced() -> None:
    # As for Strands' MCPAgentTool: no tool_spec setter (a @tool's spec may be replaced; this one's is the server's).
    tool = MCPAgentTool(mcp_types.Tool(name="echo", input_schema={"type": "object"}), MCPClient(command=["x"]))
    spec = tool.tool_spec
    with pytest.raises(AttributeError) as caught:
        tool.tool_spec = {**spec, "description": "other"}  # type: ignore[misc]
    assert str(caught.value) == "property 'tool_spec' of 'MCPAgentTool' object has no setter"
    assert tool.tool_spec is spec
    assert "tool_spec" not in vars(tool)
