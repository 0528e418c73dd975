"""SshSandbox against a real sshd: host-key policy, connection reuse, remote process-group kills."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ray_harness.sandbox import HostKeyMismatchError, SandboxError, SandboxTimeoutError, UnknownHostKeyError
from tests.sandbox.conftest import SshServer, unpickle_elsewhere
from tests.sandbox.test_engine import local_pids_with


async def test_unknown_host_is_rejected_by_default(sshd: SshServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(UnknownHostKeyError, match=r"unknown.*not in known_hosts.*allow_unknown_hosts=True"):
        await sshd.sandbox(known_hosts=str(empty)).execute("true")


async def test_unknown_host_allowed_on_opt_in_and_pinned(sshd: SshServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    async with sshd.sandbox(known_hosts=str(empty), allow_unknown_hosts=True) as sandbox:
        assert (await sandbox.execute("echo ok")).stdout == "ok\n"
        assert list(sandbox._pinned.values()) == [tuple(sshd.host_public_key.split())]
    assert empty.read_text() == "", "known_hosts must never be written"


@pytest.mark.parametrize("allow_unknown_hosts", [False, True])
async def test_changed_host_key_always_fails(sshd: SshServer, tmp_path: Path, allow_unknown_hosts: bool) -> None:
    other = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {other.decode()}\n")  # same key type, different key
    sandbox = sshd.sandbox(known_hosts=str(wrong), allow_unknown_hosts=allow_unknown_hosts)
    with pytest.raises(HostKeyMismatchError, match="CHANGED"):
        await sandbox.execute("true")


async def test_one_connection_is_reused_and_closed(sshd: SshServer) -> None:
    sandbox = sshd.sandbox()
    async with sandbox:
        await sandbox.execute("true")
        first = sandbox._client
        await asyncio.gather(*(sandbox.execute(f"echo {i}") for i in range(5)))
        assert sandbox._client is first
        assert first is not None
        transport = first.get_transport()
        assert transport is not None and transport.is_active()
    assert sandbox._client is None and not transport.is_active()


async def test_reconnects_after_the_connection_drops(sshd: SshServer) -> None:
    async with sshd.sandbox() as sandbox:
        await sandbox.execute("true")
        assert sandbox._client is not None
        sandbox._client.close()
        assert (await sandbox.execute("echo back")).stdout == "back\n"


async def test_timeout_kills_the_remote_process_group(sshd: SshServer) -> None:
    marker = "sleep 173.313131"
    async with sshd.sandbox() as sandbox:
        started = time.monotonic()
        with pytest.raises(SandboxTimeoutError):
            await sandbox.execute(f"({marker}) & {marker}", timeout=1)
        assert time.monotonic() - started < 60  # at the timeout, not after the 173 s sleeps
    deadline = time.monotonic() + 60
    while local_pids_with(marker):  # the "remote" host is this machine
        assert time.monotonic() < deadline, "remote processes survived the timeout"
        await asyncio.sleep(0.1)


async def test_unreachable_host_is_a_sandbox_error(tmp_path: Path) -> None:
    from ray_harness.sandbox import SshSandbox

    sandbox = SshSandbox("127.0.0.1", port=1, username="root", known_hosts=str(tmp_path / "none"),
                         connect_timeout=2)
    with pytest.raises(SandboxError, match="cannot connect"):
        await sandbox.execute("true")


async def test_ssh_options_are_applied(sshd: SshServer) -> None:
    from ray_harness.sandbox import SshSandbox

    # Port and User come only from the OpenSSH-style options here.
    sandbox = SshSandbox("127.0.0.1", key_filename=sshd.user_key, known_hosts=sshd.known_hosts,
                         ssh_options={"Port": str(sshd.port), "User": "root", "ConnectTimeout": "5"})
    async with sandbox:
        assert (await sandbox.execute("id -un")).stdout == "root\n"


async def test_pickles_without_the_connection(sshd: SshServer) -> None:
    import pickle

    async with sshd.sandbox() as sandbox:
        await sandbox.execute("true")
        assert pickle.loads(pickle.dumps(sandbox)) is sandbox  # in this process: the one connection
        clone = unpickle_elsewhere(pickle.dumps(sandbox))
        assert clone is not sandbox and clone._client is None
        async with clone:
            assert (await clone.execute("echo copy")).stdout == "copy\n"
        assert sandbox._client is not None  # the original connection is untouched
