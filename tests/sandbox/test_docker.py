"""DockerSandbox lifecycle and container options against the real engine."""

from __future__ import annotations

import os
import pickle
from typing import Any

import pytest

from ray_harness.sandbox import DockerSandbox, SandboxError
from tests.sandbox.conftest import TEST_IMAGE, record_scripts, unpickle_elsewhere


async def test_created_container_is_removed_on_exit(docker_client: Any) -> None:
    import docker

    async with DockerSandbox(image=TEST_IMAGE) as sandbox:
        container_id = sandbox.container_id
        assert container_id is not None
        assert (await sandbox.execute("echo inside")).stdout == "inside\n"
        attrs = docker_client.api.inspect_container(container_id)
        assert attrs["HostConfig"]["NetworkMode"] == "none"
        assert attrs["HostConfig"]["Init"] is True
    with pytest.raises(docker.errors.NotFound):
        docker_client.api.inspect_container(container_id)


_FORGETFUL_SCRIPT = """
import asyncio, os, sys, time
from ray_harness.sandbox import DockerSandbox

sandbox = DockerSandbox(image=sys.argv[1])
asyncio.run(sandbox.execute("true"))  # creates the container, never closed
print(sandbox.container_id, flush=True)
if sys.argv[2] == "hang":
    time.sleep(600)  # killed -9 by the test
"""


@pytest.mark.parametrize("ending", ["exit", "hang"])
def test_a_created_container_never_outlives_its_process(docker_client: Any, ending: str) -> None:
    # No close(): the process just exits, or is killed -9 (a driver or host gone with its whole Ray cluster).
    import subprocess
    import sys
    import time

    import docker

    process = subprocess.Popen([sys.executable, "-c", _FORGETFUL_SCRIPT, TEST_IMAGE, ending], stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout is not None
    container_id = process.stdout.readline().strip()
    assert container_id
    if ending == "hang":
        assert docker_client.api.inspect_container(container_id)["State"]["Running"] is True
        process.kill()
    process.wait(timeout=120)
    deadline = time.monotonic() + 120  # the engine removes it once its stdin closed: a state to wait for
    while time.monotonic() < deadline:
        try:
            docker_client.api.inspect_container(container_id)
        except docker.errors.NotFound:
            return
        time.sleep(0.2)
    raise AssertionError(f"container {container_id} outlived the process that created it")


async def test_attached_container_is_left_running(docker_container: str, docker_client: Any) -> None:
    async with DockerSandbox(docker_container) as sandbox:
        assert (await sandbox.execute("true")).exit_code == 0
    assert docker_client.containers.get(docker_container).status == "running"


async def test_limits_user_and_read_only_root(docker_client: Any) -> None:
    sandbox = DockerSandbox(image=TEST_IMAGE, user="1000:1000", mem_limit="64m", pids_limit=32,
                            nano_cpus=500_000_000, read_only=True, working_dir="/tmp")
    async with sandbox:
        host_config = docker_client.api.inspect_container(sandbox.container_id)["HostConfig"]
        assert (host_config["Memory"], host_config["PidsLimit"], host_config["NanoCpus"]) == (
            64 * 1024 * 1024, 32, 500_000_000)
        assert host_config["ReadonlyRootfs"] is True
        result = await sandbox.execute("id -u; pwd; touch /root-write 2>/dev/null || echo read-only")
        assert result.stdout == "1000\n/tmp\nread-only\n"
        await sandbox.write_text("note.txt", "the /tmp tmpfs is writable")
        assert await sandbox.read_text("/tmp/note.txt") == "the /tmp tmpfs is writable"


async def test_docker_host_argument_and_environment(monkeypatch: pytest.MonkeyPatch, docker_container: str,
                                                    docker_client: Any) -> None:
    host = os.environ.get("DOCKER_HOST")
    if not host:
        pytest.skip("engine on the default socket; nothing to redirect")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    async with DockerSandbox(docker_container, docker_host=host) as explicit:
        assert (await explicit.execute("echo via-argument")).stdout == "via-argument\n"
    with pytest.raises(SandboxError, match="nonexistent"):
        await DockerSandbox(docker_container).execute("true")


async def test_missing_container_is_a_sandbox_error(docker_client: Any) -> None:
    with pytest.raises(SandboxError, match="not found"):
        await DockerSandbox("rh-no-such-container").execute("true")


async def test_pickled_sandbox_reconnects_from_configuration(docker_container: str, docker_client: Any) -> None:
    async with DockerSandbox(docker_container) as sandbox:
        await sandbox.execute("true")
        assert pickle.loads(pickle.dumps(sandbox)) is sandbox  # in this process: the one live sandbox
        clone = unpickle_elsewhere(pickle.dumps(sandbox))
        assert clone is not sandbox and clone.sandbox_id == sandbox.sandbox_id
        assert clone.container_id is None  # no live client or container state travelled
        async with clone:
            assert (await clone.execute("echo again")).stdout == "again\n"


def test_positional_image_reference() -> None:
    assert DockerSandbox("rh-busybox:test").settings.image == "rh-busybox:test"
    assert DockerSandbox("registry.example/team/box@sha256:ab").settings.container is None
    assert DockerSandbox("mybox").settings.container == "mybox"


async def test_a_large_write_is_one_exec_reading_its_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    # 64 KiB of base64 per exec made a 5 MB write take 6-10 s; the bytes now go on one exec's stdin.
    data = os.urandom(1_000_000)
    async with DockerSandbox(image=TEST_IMAGE) as sandbox:
        started = record_scripts(sandbox, monkeypatch)
        await sandbox.write_file("/tmp/sub dir/big.bin", data)
        assert len(started) == 1 and len(started[0]) < 1000
        assert await sandbox.read_file("/tmp/sub dir/big.bin") == data
        await sandbox.write_file("/tmp/sub dir/big.bin", b"")  # replaced, not appended
        assert await sandbox.read_file("/tmp/sub dir/big.bin") == b""
        with pytest.raises(IsADirectoryError):
            await sandbox.write_file("/tmp/sub dir", b"x")
        result = await sandbox.execute("cat; echo done")  # a command's own stdin stays empty
        assert result.stdout == "done\n"
