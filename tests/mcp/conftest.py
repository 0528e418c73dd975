"""Fixtures for the MCP tests: a real MCP server (``server_app.py``) over stdio and streamable HTTP.

These tests run in-process without Ray, so ``import ray`` is blocked here as in ``tests/unit``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ray_harness.tools.mcp import MCPClient

SERVER_APP = str(Path(__file__).with_name("server_app.py"))
STDIO_COMMAND = [sys.executable, SERVER_APP, "stdio"]


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)


@pytest.fixture(scope="module")
def shared_stdio() -> Iterator[MCPClient]:
    """One stdio client shared by the module's tests (each runs on its own event loop)."""
    client = MCPClient(command=STDIO_COMMAND, prefix="srv")
    yield client
    client.close()


async def wait_for_file(path: Path, timeout: float = 60.0) -> None:
    """Wait for a marker file written by the test server."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(path.exists):
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        await asyncio.sleep(0.02)


def tool_results(agent: Any) -> list[dict[str, Any]]:
    """Every ``toolResult`` block of an agent's history, in order."""
    return [block["toolResult"] for message in agent.messages for block in message["content"]
            if "toolResult" in block]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def not_crash(name: str) -> bool:
    """A module-level tool filter, so that clients using it pickle by reference."""
    return name != "crash"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class HttpServer:
    """``server_app.py`` serving streamable HTTP on 127.0.0.1 in its own process."""

    def __init__(self, marker_dir: Path, *, legacy: bool = False) -> None:
        self.legacy = legacy
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.marker_dir = marker_dir
        self._serve()

    def restart(self) -> None:
        """A new server process on the same URL (it knows none of the old one's sessions)."""
        self.stop()
        self._serve()

    def _serve(self) -> None:
        env = {**os.environ, "MCP_TEST_MARKER_DIR": str(self.marker_dir)}
        if self.legacy:
            env["MCP_TEST_LEGACY"] = "1"
        self.process = subprocess.Popen([sys.executable, SERVER_APP, "http", str(self.port)], env=env)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"the MCP test server did not come up on port {self.port}")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    server = HttpServer(tmp_path_factory.mktemp("http-markers"))
    yield server
    server.stop()


@pytest.fixture
def own_http_server(tmp_path: Path) -> Iterator[HttpServer]:
    """A server for one test (for tests that kill it)."""
    server = HttpServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def legacy_http_server(tmp_path: Path) -> Iterator[HttpServer]:
    """A server for one test that speaks only the pre-2026 protocol (sessions; replies as server-sent events)."""
    server = HttpServer(tmp_path, legacy=True)
    yield server
    server.stop()
