"""Errors and sandboxes cross Ray actor boundaries: they must pickle (sandboxes as configuration only)."""

from __future__ import annotations

import pickle

import pytest

from ray_harness.sandbox import (
    DockerSandbox,
    HostKeyMismatchError,
    LocalEnvironment,
    SandboxError,
    SandboxPathNotFoundError,
    SandboxTimeoutError,
    SshSandbox,
    UnknownHostKeyError,
)
from ray_harness.types.exceptions import RayHarnessError


def test_timeout_error_pickles_with_partial_output() -> None:
    error = SandboxTimeoutError(2.5, stdout="out so far", stderr="err so far")
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is SandboxTimeoutError and isinstance(clone, TimeoutError)
    assert (str(clone), clone.seconds, clone.stdout, clone.stderr) == (str(error), 2.5, "out so far", "err so far")


def test_path_not_found_pickles_with_path() -> None:
    error = SandboxPathNotFoundError("/no/such")
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is SandboxPathNotFoundError and isinstance(clone, FileNotFoundError)
    assert (str(clone), clone.path) == (str(error), "/no/such")


@pytest.mark.parametrize("cls", [SandboxError, UnknownHostKeyError, HostKeyMismatchError])
def test_sandbox_errors_pickle(cls: type[SandboxError]) -> None:
    clone = pickle.loads(pickle.dumps(cls("boom")))
    assert type(clone) is cls and str(clone) == "boom" and isinstance(clone, RayHarnessError)


async def test_local_environment_pickles() -> None:
    clone = pickle.loads(pickle.dumps(LocalEnvironment("/tmp", max_output_chars=5)))
    assert (clone.working_dir, clone.max_output_chars) == ("/tmp", 5)
    assert (await clone.execute("pwd")).stdout == "/tmp\n"


def test_unused_remote_sandboxes_pickle_as_configuration() -> None:
    docker_sandbox = pickle.loads(pickle.dumps(DockerSandbox(image="img:1", mem_limit="64m", pids_limit=10)))
    assert docker_sandbox.settings.image == "img:1" and docker_sandbox.settings.pids_limit == 10
    assert docker_sandbox.container_id is None
    ssh_sandbox = pickle.loads(pickle.dumps(SshSandbox("example.com", port=2200, ssh_options={"ConnectTimeout": "3"})))
    assert (ssh_sandbox.settings.host, ssh_sandbox.settings.port) == ("example.com", 2200)
    assert ssh_sandbox.ssh_options == {"ConnectTimeout": "3"}
