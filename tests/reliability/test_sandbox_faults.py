"""kill -9 of a sandbox actor mid command: a typed error, no orphaned command, a working sandbox after."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ray_harness.types.exceptions import RemoteActorError

pytestmark = [pytest.mark.ray, pytest.mark.reliability, pytest.mark.usefixtures("ray_session")]

KILLS = int(os.environ.get("RAY_HARNESS_FAULT_KILLS", "10"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


async def _wait_for(predicate: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def _after_restart(sandbox: Any) -> str:
    """Calls fail with RemoteActorError while Ray restarts the actor (≈1 s); then it works again."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return str((await sandbox.execute("echo back")).stdout)
        except RemoteActorError:
            assert time.monotonic() < deadline, "the sandbox actor did not come back"
            await asyncio.sleep(0.2)


async def test_sandbox_actor_killed_mid_command(tmp_path: Path) -> None:
    from ray_harness.runtime import RemoteSandbox
    from ray_harness.sandbox import LocalEnvironment

    sandbox = RemoteSandbox(LocalEnvironment(), name=f"fault-sandbox-{os.getpid()}", max_restarts=-1)
    try:
        for attempt in range(KILLS):
            marker = tmp_path / f"child-{attempt}.pid"
            actor_pid = int((await sandbox.execute("echo $PPID")).stdout.split()[-1])
            command = asyncio.create_task(sandbox.execute(f"echo $$ > {marker}; sleep 30; echo finished"))
            await _wait_for(marker.exists)
            await asyncio.sleep(random.uniform(0.0, 0.3))
            child = int(marker.read_text())
            os.kill(actor_pid, signal.SIGKILL)
            with pytest.raises(RemoteActorError) as info:
                await asyncio.wait_for(command, 60)
            assert "ray_harness:sandbox:" in str(info.value)
            # The restarted actor kills what its predecessor left running: no orphaned `sleep 30`.
            assert await _after_restart(sandbox) == "back\n"
            await _wait_for(lambda child=child: not _alive(child), timeout=60)
    finally:
        sandbox.shutdown()


def _docker() -> Any:
    from tests.conftest import missing_service

    image = os.environ.get("RAY_HARNESS_TEST_IMAGE", "rh-busybox:test")
    try:
        import docker

        client = docker.from_env(version="auto")
        client.images.get(image)
    except Exception as error:
        missing_service(f"dockerd with image {image} (run scripts/ci/docker.sh): {error}")
    return client, image


async def test_docker_sandbox_actor_killed_leaves_nothing_running(tmp_path: Path) -> None:
    """Attached container: the leftover command is killed; image mode: the dead actor's container is removed."""
    from ray_harness.runtime import RemoteSandbox
    from ray_harness.sandbox import DockerSandbox

    client, image = _docker()
    # Containers of this image that other tests or sessions own are not ours to count.
    preexisting = {c.id for c in client.containers.list(all=True, filters={"ancestor": image}, ignore_removed=True)}
    attached = client.containers.run(image, ["sleep", "2147483647"], detach=True, init=True, network_mode="none")
    created_by_dead_actor = None
    try:
        for mode in ("attached", "image"):
            inner = DockerSandbox(container=attached.name) if mode == "attached" else DockerSandbox(image=image)
            sandbox = RemoteSandbox(inner, name=f"fault-docker-{mode}-{os.getpid()}", max_restarts=-1)
            try:
                assert (await sandbox.execute("echo ok")).stdout == "ok\n"
                marker = f"/tmp/victim-{mode}"
                command = asyncio.create_task(sandbox.execute(f"echo $$ > {marker}; sleep 300; echo finished"))
                await asyncio.sleep(1.0)
                if mode == "image":
                    listed = client.containers.list(filters={"ancestor": image}, ignore_removed=True)
                    created_by_dead_actor = [c.id for c in listed if c.id != attached.id and c.id not in preexisting]
                os.kill(_sandbox_actor_pid(sandbox), signal.SIGKILL)
                with pytest.raises(RemoteActorError):
                    await asyncio.wait_for(command, 60)
                assert await _after_restart(sandbox) == "back\n"
                if mode == "attached":
                    processes = attached.exec_run(["ps", "-o", "args"]).output.decode().splitlines()
                    assert not [line for line in processes if "sleep 300" in line]  # the command is gone
                else:
                    alive = {c.id for c in client.containers.list(filters={"ancestor": image}, ignore_removed=True)}
                    assert created_by_dead_actor and not (set(created_by_dead_actor) & alive)
            finally:
                sandbox.shutdown()
    finally:
        attached.remove(force=True)


def _sandbox_actor_pid(sandbox: Any) -> int:
    import ray

    return int(ray.get(sandbox._actor.__ray_call__.remote(lambda self: os.getpid())))
