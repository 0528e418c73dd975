"""Session and conversation-manager tests: no Ray here; S3 runs against a real moto server process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import missing_service


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _moto_command(port: int) -> list[str] | None:
    executable = shutil.which("moto_server")
    if executable is not None:
        return [executable, "-H", "127.0.0.1", "-p", str(port)]
    try:
        import moto.server  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``moto_server`` process on a free loopback port, for the whole test session."""
    port = _free_port()
    command = _moto_command(port)
    if command is None:
        missing_service("moto_server is not installed (pip install 'moto[server]')")
    log = Path(tmp_path_factory.mktemp("moto")) / "moto.log"
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)  # type: ignore[arg-type]
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    ready = False
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                ready = True
                break
        except urllib.error.HTTPError:
            ready = True
            break
        except OSError:
            time.sleep(0.1)
    if not ready:
        process.kill()
        process.wait()
        missing_service(f"moto_server did not start on port {port}: {log.read_text(errors='replace')[-500:]}")
    yield url
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def repo_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = repo_root() + os.pathsep + env.get("PYTHONPATH", "")
    return env
