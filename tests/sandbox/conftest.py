"""Real services for the sandbox tests: the Docker engine from scripts/ci/docker.sh and an sshd per session.

Docker: ``DOCKER_HOST`` and ``RAY_HARNESS_TEST_IMAGE`` (default ``rh-busybox:test``) come from the CI env
file; one long-lived container is shared by the tests that attach to it. SSH: a private ``sshd -D`` on
127.0.0.1 and a random port, with generated host and user keys, started here and stopped by PID.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ray_harness.sandbox import DockerSandbox, LocalEnvironment, PosixShellSandbox, Sandbox, SshSandbox, _binding
from tests.conftest import missing_service

TEST_IMAGE = os.environ.get("RAY_HARNESS_TEST_IMAGE", "rh-busybox:test")


@contextlib.contextmanager
def another_process() -> Iterator[None]:
    """Within the block, this process's live sandboxes are hidden, as in a host that has none of them yet."""
    saved = dict(_binding._live)
    _binding._live.clear()
    try:
        yield
    finally:
        _binding._live.clear()
        _binding._live.update(saved)


def record_scripts(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The scripts ``sandbox`` starts from now on (its process-engine hook), in order."""
    started: list[str] = []
    start = sandbox._start_script

    async def recording(script: str) -> Any:
        started.append(script)
        return await start(script)

    monkeypatch.setattr(sandbox, "_start_script", recording)
    return started


def unpickle_elsewhere(data: bytes) -> Any:
    """Unpickle as a process that has none of the live sandboxes of this one would (another host)."""
    import pickle

    with another_process():
        return pickle.loads(data)


# -- docker ----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    import docker

    try:
        client = docker.from_env(version="auto")
        client.ping()
        client.images.get(TEST_IMAGE)
    except Exception as error:
        missing_service(f"dockerd with image {TEST_IMAGE} (run scripts/ci/docker.sh): {error}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def docker_container(docker_client: Any) -> Iterator[str]:
    """Name of a running container shared by the attach-mode tests (removed at session end)."""
    name = f"rh-sandbox-test-{secrets.token_hex(4)}"
    container = docker_client.containers.run(
        TEST_IMAGE, ["sleep", "2147483647"], name=name, detach=True, init=True, network_mode="none",
    )
    yield name
    container.remove(force=True)


# -- sshd ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SshServer:
    host: str
    port: int
    user_key: str
    known_hosts: str
    host_public_key: str
    scratch: Path

    def sandbox(self, **kwargs: Any) -> SshSandbox:
        options: dict[str, Any] = {"port": self.port, "username": "root", "key_filename": self.user_key,
                                   "known_hosts": self.known_hosts, **kwargs}
        return SshSandbox(self.host, **options)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _wait_for_banner(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                if conn.recv(64).startswith(b"SSH-2.0"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd did not answer on port {port}: {log.read_text()}")


@pytest.fixture(scope="session")
def sshd() -> Iterator[SshServer]:
    if not os.path.exists("/usr/sbin/sshd") or shutil.which("ssh-keygen") is None:
        missing_service("openssh-server (run scripts/ci/sshd.sh)")
    os.makedirs("/run/sshd", exist_ok=True)  # privilege separation dir; sshd refuses to start without it
    root = Path(tempfile.mkdtemp(prefix="rh-sshd-"))
    _keygen(root / "host_ed25519")
    _keygen(root / "user_ed25519")
    shutil.copy(root / "user_ed25519.pub", root / "authorized_keys")
    port = _free_port()
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root}/host_ed25519\nPidFile {root}/sshd.pid\n"
        f"AuthorizedKeysFile {root}/authorized_keys\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nSubsystem sftp internal-sftp\n"
    )
    host_key = (root / "host_ed25519.pub").read_text().split()
    (root / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    log = root / "sshd.log"
    with log.open("wb") as out:
        process = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(root / "sshd_config")],
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_banner(port, process, log)
        scratch = root / "scratch"
        scratch.mkdir()
        yield SshServer("127.0.0.1", port, str(root / "user_ed25519"), str(root / "known_hosts"),
                        f"{host_key[0]} {host_key[1]}", scratch)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)


# -- one sandbox per backend, each in a fresh directory ----------------------------------------------


class ShellOnlySandbox(PosixShellSandbox):
    """A ``PosixShellSandbox`` subclass that implements only ``execute_streaming`` (here: /bin/sh on this machine)."""

    async def execute_streaming(self, command: str, *, timeout: float | None = None, cwd: str | None = None,
                                env: Mapping[str, str] | None = None) -> AsyncGenerator[Any, None]:
        local = LocalEnvironment(self.working_dir, max_output_chars=self.max_output_chars)
        async with aclosing(local.execute_streaming(command, timeout=timeout, cwd=cwd, env=env)) as items:
            async for item in items:
                yield item


@pytest.fixture(params=["local", "shell", "docker", "ssh"])
async def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sandbox]:
    kind = request.param
    if kind == "local":
        async with LocalEnvironment(working_dir=tmp_path) as local:
            yield local
        return
    if kind == "shell":
        async with ShellOnlySandbox(working_dir=str(tmp_path)) as shell_only:
            yield shell_only
        return
    if kind == "docker":
        container = request.getfixturevalue("docker_container")
        directory = f"/tmp/t-{secrets.token_hex(6)}"
        async with DockerSandbox(container) as setup:
            assert (await setup.execute(f"mkdir -p {directory}")).exit_code == 0
        async with DockerSandbox(container, working_dir=directory) as docker_sandbox:
            yield docker_sandbox
        return
    server: SshServer = request.getfixturevalue("sshd")
    async with server.sandbox(working_dir=str(tmp_path)) as ssh_sandbox:
        yield ssh_sandbox
