"""SshSandbox against a real sshd: host-key policy, connection reuse, remote process-group kills."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ray_harness.sandbox import (
    HostKeyMismatchError,
    SandboxError,
    SandboxPathNotFoundError,
    SandboxTimeoutError,
    UnknownHostKeyError,
)
from tests.sandbox.conftest import SshServer, record_scripts, unpickle_elsewhere
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


async def test_more_commands_than_sshd_sessions_wait_for_a_channel(sshd: SshServer, tmp_path: Path) -> None:
    # sshd allows 10 sessions per connection (MaxSessions); 15 commands at once used to get channels refused,
    # and the "reconnect" that followed closed the connection under the commands already running.
    gate = tmp_path / "gate"
    async with sshd.sandbox(working_dir=str(tmp_path)) as sandbox:
        await sandbox.execute("true")
        connection = sandbox._client
        tasks = [asyncio.create_task(sandbox.execute(
            f"touch started-{i}; while [ ! -e {gate} ]; do sleep 0.05; done; echo {i}")) for i in range(15)]
        deadline = time.monotonic() + 60
        while _count(tmp_path, "started-*") < 9:
            assert time.monotonic() < deadline, "the first commands did not start"
            await asyncio.sleep(0.05)
        assert _count(tmp_path, "started-*") == 9  # one channel stays free for kills
        gate.touch()
        results = await asyncio.gather(*tasks)
        assert [result.stdout for result in results] == [f"{i}\n" for i in range(15)]
        assert [result.exit_code for result in results] == [0] * 15
        assert sandbox._client is connection


def _count(directory: Path, pattern: str) -> int:
    return len(list(directory.glob(pattern)))


async def test_a_refused_channel_keeps_the_connection(
    sshd: SshServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gate = tmp_path / "gate"
    async with sshd.sandbox(max_sessions=12, connect_timeout=2) as sandbox:  # more than this sshd allows
        running = [asyncio.create_task(sandbox.execute(
            f"touch {tmp_path}/started-{i}; while [ ! -e {gate} ]; do sleep 0.05; done; echo ok"))
            for i in range(10)]
        # Channels open in worker threads, in no set order: the eleventh is sent once all ten hold theirs.
        while _count(tmp_path, "started-*") < 10:
            finished = [task for task in running if task.done()]
            assert not finished, finished[0].exception()
            await asyncio.sleep(0.05)
        with pytest.raises(SandboxError, match=r"refused a new session.*max_sessions"):
            await sandbox.execute("echo eleventh")
        gate.touch()
        assert [(await task).stdout for task in running] == ["ok\n"] * 10
    # The refusals were retried, then reported once as the SandboxError: no ERROR lines from paramiko besides.
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR] == []


async def test_commands_read_an_empty_stdin(sshd: SshServer) -> None:
    async with sshd.sandbox() as sandbox:  # as with docker exec and a local process: end of input, no hang
        result = await sandbox.execute("cat; read line || echo eof", timeout=10)
        assert (result.exit_code, result.stdout) == (0, "eof\n")


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


async def test_a_large_write_is_one_command(sshd: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The bytes go on the command's stdin: the shell path sent them 64 KiB per command, 20 s for 5 MB.
    data = os.urandom(1_000_000)
    async with sshd.sandbox(working_dir=str(tmp_path)) as sandbox:
        started = record_scripts(sandbox, monkeypatch)
        await sandbox.write_file("sub dir/big.bin", data)
        assert len(started) == 1 and len(started[0]) < 1000
        assert (tmp_path / "sub dir" / "big.bin").read_bytes() == data
        await sandbox.write_file("sub dir/big.bin", b"")  # replaced, not appended
        assert (tmp_path / "sub dir" / "big.bin").read_bytes() == b""
        with pytest.raises(IsADirectoryError):
            await sandbox.write_file("sub dir", b"x")
        with pytest.raises(SandboxPathNotFoundError):  # its working directory is gone: nothing is written
            await sshd.sandbox(working_dir=str(tmp_path / "gone")).write_file("f", data)


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
