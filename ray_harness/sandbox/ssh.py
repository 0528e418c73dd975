"""``SshSandbox``: commands and files on a remote host over SSH (paramiko).

* Key authentication only (``key_filename``, or the default keys and agent).
* Host keys are checked against ``known_hosts`` (a file path; default
  ``~/.ssh/known_hosts``). An unknown host is refused with
  :class:`UnknownHostKeyError` unless ``allow_unknown_hosts=True`` (then its
  key is pinned for this sandbox's lifetime); a *changed* key is always
  refused with :class:`HostKeyMismatchError`. Nothing is written back to a
  known_hosts file.
* One connection is opened lazily and reused by every call; ``close()`` (or
  leaving the ``async with``) closes it. A dropped connection reconnects.
* Each command runs as ``exec /bin/sh -c <script>`` in its own channel, with
  its input closed (a command reading stdin sees end of input, as under
  ``docker exec``); the session sshd starts leads its own process group, which
  a timeout kills through a second channel before closing the first.
* A command killed by a signal exits ``128 + N``, as locally and under ``docker exec``: sshd reports it as an
  ``exit-signal``, which paramiko drops (see :func:`_transport_class`).
* sshd allows ``MaxSessions`` (default 10) channels per connection: at most
  ``max_sessions - 1`` commands run at once and further ones wait for a
  channel; the last one is kept for those kills.

Pickling keeps the configuration (and pinned keys), never the connection.
"""

from __future__ import annotations

import asyncio
import base64
import getpass
import hashlib
import os
import select
import shlex
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import Field
from typing_extensions import override

from ray_harness.sandbox._config import Settings, validated
from ray_harness.sandbox._engine import RawExecution, ThreadedExecution, start_in_thread
from ray_harness.sandbox._output import DEFAULT_MAX_OUTPUT_CHARS
from ray_harness.sandbox._ssh_options import check_ssh_options, config_text
from ray_harness.sandbox.errors import HostKeyMismatchError, SandboxError, UnknownHostKeyError
from ray_harness.sandbox.posix_shell import SCRIPT_INPUT, PosixShellSandbox

if TYPE_CHECKING:
    import paramiko

__all__ = ("SshSandbox",)

_READ_SIZE = 65_536
_KILLING: ContextVar[bool] = ContextVar("ray_harness_ssh_killing", default=False)
"""Set while a process-group kill opens its channel: kills use the channel kept free for them."""


class _SshSettings(Settings):
    host: str = Field(pattern=r"\A[a-zA-Z0-9_\[][a-zA-Z0-9_.:%\[\]-]*\z")
    port: int = Field(default=22, ge=1, le=65535)
    username: str | None = Field(default=None, pattern=r"\A[a-zA-Z0-9_][a-zA-Z0-9_.@-]*\z")
    key_filename: str | list[str] | None = None
    known_hosts: str | None = None
    allow_unknown_hosts: bool = False
    connect_timeout: float = Field(default=10.0, gt=0)
    max_sessions: int = Field(default=10, ge=2)


class _Slots:
    """A counting semaphore whose waiters may sit in different event loops (a sandbox can serve several)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._used = 0
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._used < self._limit:
                    self._used += 1
                    return
                waiter = (loop, loop.create_future())
                self._waiters.append(waiter)
            try:
                await waiter[1]
            finally:
                with self._lock:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)

    def release(self) -> None:
        with self._lock:
            self._used -= 1
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:  # every waiter tries again; one of them gets the free slot
            try:
                loop.call_soon_threadsafe(_wake, future)
            except RuntimeError:  # that loop is closed: nobody waits there any more
                pass


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _fingerprint(key: paramiko.PKey) -> str:
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


@cache
def _policies() -> tuple[type, type]:
    """Host-key policies, built on first use so importing this module does not import paramiko."""
    import paramiko

    class Reject(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]
        def __init__(self, sources: str) -> None:
            self.sources = sources

        def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
            raise UnknownHostKeyError(
                f"SSH host {hostname} is unknown: its key ({_fingerprint(key)}) is not in known_hosts "
                f"({self.sources}). Add it there, or pass allow_unknown_hosts=True to trust it on first use."
            )

    class Pin(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]
        def __init__(self, pinned: dict[str, tuple[str, str]]) -> None:
            self.pinned = pinned

        def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
            client.get_host_keys().add(hostname, key.get_name(), key)
            self.pinned[hostname] = (key.get_name(), key.get_base64())

    return Reject, Pin


_SIGNALS: dict[str, int] = {
    "HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "ABRT": 6, "FPE": 8, "KILL": 9, "USR1": 10, "SEGV": 11, "USR2": 12,
    "PIPE": 13, "ALRM": 14, "TERM": 15,
}
"""The signal names of RFC 4254's ``exit-signal`` (all OpenSSH sends by name), with their Linux numbers."""


@cache
def _transport_class() -> type:
    """The paramiko ``Transport`` of our connections, built on first use (importing paramiko is slow).

    * sshd reports a shell killed by a signal with an ``exit-signal`` request instead of an ``exit-status``;
      paramiko ignores that request, so the exit status would never come. It becomes ``128 + N``, the code a
      local shell and ``docker exec`` report.
    * A session sshd refuses (``MaxSessions``) is retried by :meth:`SshSandbox._open_session` and, if it stays
      refused, raised as a ``SandboxError``: paramiko's own ERROR line for it is logged at DEBUG instead.
    """
    import paramiko
    from paramiko.common import DEBUG, ERROR, MSG_CHANNEL_REQUEST

    def handle_request(channel: paramiko.Channel, message: paramiko.Message) -> None:
        position = message.packet.tell()
        if message.get_text() == "exit-signal":
            message.get_boolean()  # want-reply
            number = _SIGNALS.get(message.get_text())
            channel.exit_status = 128 + number if number is not None else 255
            channel.status_event.set()
        message.packet.seek(position)
        paramiko.Channel._handle_request(channel, message)  # replies to the request as before

    class Transport(paramiko.Transport):  # type: ignore[misc]
        _channel_handler_table = {**paramiko.Transport._channel_handler_table, MSG_CHANNEL_REQUEST: handle_request}

        def _log(self, level: int, msg: Any, *args: Any) -> None:
            if level == ERROR and isinstance(msg, str) and " open FAILED: " in msg:
                level = DEBUG
            super()._log(level, msg, *args)

    return Transport


class SshSandbox(PosixShellSandbox):
    """A remote host reached over SSH as a sandbox.

    Args:
        host: Host name or address.
        port: SSH port.
        username: Login user (default: ``User`` from ``ssh_options``, else the local user).
        key_filename: Private key file(s); default: ``IdentityFile`` options, else
            paramiko's default keys and the SSH agent.
        known_hosts: known_hosts file to trust (default ``~/.ssh/known_hosts`` if it exists).
        allow_unknown_hosts: Trust a host missing from known_hosts (never a changed key).
        ssh_options: OpenSSH-style options (``{"ConnectTimeout": "5"}``) applied
            through paramiko's ``SSHConfig``; see :mod:`ray_harness.sandbox._ssh_options`.
        allow_unsafe_ssh_options: Allow options that run local commands (``ProxyCommand``, ...).
        working_dir: Directory commands start in (the login directory if ``None``).
        connect_timeout: Seconds to establish the connection (``ConnectTimeout`` overrides).
        max_sessions: Channels this sandbox opens at once on its connection: the server's
            ``MaxSessions`` (OpenSSH's default is 10). One is kept for killing timed-out or cancelled
            commands; commands beyond the rest wait for a channel.
        max_output_chars: Retained stdout/stderr characters per stream.
    """

    stdin_writes = True  # write_file: one command reading its stdin (64 KiB commands: 20 s for 5 MB)

    def __init__(
        self,
        host: str,
        *,
        port: int = 22,
        username: str | None = None,
        key_filename: str | list[str] | None = None,
        known_hosts: str | os.PathLike[str] | None = None,
        allow_unknown_hosts: bool = False,
        ssh_options: dict[str, str] | None = None,
        allow_unsafe_ssh_options: bool = False,
        working_dir: str | None = None,
        connect_timeout: float = 10.0,
        max_sessions: int = 10,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        self.settings = validated(
            _SshSettings, "SshSandbox", host=host, port=port, username=username, key_filename=key_filename,
            known_hosts=os.fspath(known_hosts) if known_hosts is not None else None,
            allow_unknown_hosts=allow_unknown_hosts, max_sessions=max_sessions,
            connect_timeout=(float(connect_timeout) if isinstance(connect_timeout, int) and not isinstance(connect_timeout, bool)
                             else connect_timeout),
        )
        self.ssh_options = check_ssh_options(ssh_options, allow_unsafe=allow_unsafe_ssh_options)
        self.allow_unsafe_ssh_options = allow_unsafe_ssh_options
        super().__init__(working_dir=working_dir, max_output_chars=max_output_chars)
        self._pinned: dict[str, tuple[str, str]] = {}
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._client: paramiko.SSHClient | None = None
        self._command_slots = _Slots(self.settings.max_sessions - 1)
        self._kill_slots = _Slots(1)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_lock", "_client", "_command_slots", "_kill_slots"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def __repr__(self) -> str:
        return f"SshSandbox(host={self.settings.host!r}, port={self.settings.port})"

    @override
    def describe(self) -> str:
        return f"SSH host {self.settings.host}"

    # -- connection -----------------------------------------------------------------------------------

    @override
    async def start(self) -> None:
        await asyncio.to_thread(self._connected)

    @override
    async def close(self) -> None:
        await self._kill_running()  # the remote host lives on: closing the channels would not end the commands
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.close)

    def _connected(self) -> paramiko.SSHClient:
        with self._lock:
            client = self._client
            transport = client.get_transport() if client is not None else None
            if client is not None and transport is not None and transport.is_active():
                return client
            if client is not None:
                client.close()
            self._client = self._connect()
            return self._client

    def _resolved_options(self) -> dict[str, Any]:
        if not self.ssh_options:
            return {}
        import paramiko

        return dict(paramiko.SSHConfig.from_text(config_text(self.ssh_options)).lookup(self.settings.host))

    def _connect(self) -> paramiko.SSHClient:
        import paramiko

        s = self.settings
        options = self._resolved_options()
        hostname = options.get("hostname", s.host)
        port = int(options.get("port", s.port))
        username = s.username or options.get("user") or getpass.getuser()
        keys = s.key_filename if s.key_filename is not None else options.get("identityfile")
        client = paramiko.SSHClient()
        sources = self._load_known_hosts(client, options)
        for name, (key_type, key_data) in self._pinned.items():
            client.get_host_keys().add(name, key_type, paramiko.PKey.from_type_string(key_type, base64.b64decode(key_data)))
        reject, pin = _policies()
        client.set_missing_host_key_policy(pin(self._pinned) if s.allow_unknown_hosts else reject(sources))
        sock = paramiko.ProxyCommand(options["proxycommand"]) if "proxycommand" in options else None
        try:
            client.connect(
                hostname, port=port, username=username, key_filename=keys,
                look_for_keys=keys is None, allow_agent=keys is None,
                timeout=float(options.get("connecttimeout", s.connect_timeout)),
                banner_timeout=s.connect_timeout, auth_timeout=s.connect_timeout,
                compress=options.get("compression", "no").lower() == "yes", sock=sock,
                transport_factory=_transport_class(),
            )
        except paramiko.BadHostKeyException as error:
            client.close()
            raise HostKeyMismatchError(
                f"SSH host key for {error.hostname} has CHANGED: known_hosts has {_fingerprint(error.expected_key)}, "
                f"the server sent {_fingerprint(error.key)}. This may be a man-in-the-middle attack; "
                "allow_unknown_hosts does not override a changed key. Update known_hosts if the change is expected."
            ) from None
        except UnknownHostKeyError:
            client.close()
            raise
        except (paramiko.SSHException, OSError) as error:
            client.close()
            raise SandboxError(f"cannot connect to {username}@{hostname}:{port} over SSH: {error}") from None
        transport = client.get_transport()
        if transport is not None and "serveraliveinterval" in options:
            transport.set_keepalive(int(options["serveraliveinterval"]))
        return client

    def _load_known_hosts(self, client: paramiko.SSHClient, options: dict[str, Any]) -> str:
        files = [self.settings.known_hosts] if self.settings.known_hosts else []
        files += [os.path.expanduser(f) for f in str(options.get("userknownhostsfile", "")).split()]
        if not files:
            default = os.path.expanduser("~/.ssh/known_hosts")
            files = [default] if os.path.exists(default) else []
        sources = []
        for path in files:
            if not os.path.exists(path):  # like OpenSSH: a missing file is an empty one
                sources.append(f"{path} (missing)")
                continue
            # HostKeys.load, not client.load_host_keys: that would also make paramiko write the file back.
            client.get_host_keys().load(path)
            sources.append(path)
        return ", ".join(sources) or "no known_hosts file loaded"

    # -- execution ------------------------------------------------------------------------------------

    async def _start_script(self, script: str) -> RawExecution:
        killing = _KILLING.get()
        slots = self._kill_slots if killing else self._command_slots
        command, data = "exec /bin/sh -c " + shlex.quote(script), None if killing else SCRIPT_INPUT.get()
        await slots.acquire()
        try:
            channel = await start_in_thread(lambda: self._open_channel(command, data), self._kill_channel)
        except BaseException:
            slots.release()
            raise
        return self._supervise(channel, slots.release)

    def _supervise(self, channel: paramiko.Channel, release: Callable[[], None] | None) -> _SshExecution:
        execution = _SshExecution(channel, release)
        execution.start_reader(f"ray_harness-ssh-{self.settings.host}")
        return execution

    async def _kill_channel(self, channel: paramiko.Channel) -> None:
        """Kill the command on a channel opened for a cancelled start (its slot is released by the caller)."""
        await self._kill_started(self._supervise(channel, None))

    async def _kill_group(self, pid: int) -> None:
        token = _KILLING.set(True)
        try:
            await super()._kill_group(pid)
        finally:
            _KILLING.reset(token)

    def _open_session(self, transport: paramiko.Transport) -> paramiko.Channel:
        """A new channel; a refusal is retried until ``connect_timeout``.

        sshd frees a session only once it has processed our close of it, so channels closed a moment ago may
        still count against its MaxSessions.
        """
        import paramiko

        deadline = time.monotonic() + self.settings.connect_timeout
        while True:
            try:
                return transport.open_session(timeout=self.settings.connect_timeout)
            except paramiko.ChannelException:
                if time.monotonic() >= deadline or not transport.is_active():
                    raise
                time.sleep(0.05)

    def _open_channel(self, command: str, data: bytes | None = None) -> paramiko.Channel:
        import paramiko

        for attempt in range(2):
            client = self._connected()
            transport = client.get_transport()
            channel: paramiko.Channel | None = None
            try:
                if transport is None:
                    raise paramiko.SSHException("no transport")
                channel = self._open_session(transport)
                channel.exec_command(command)
                if data:
                    try:
                        channel.sendall(data)
                    except OSError:  # the command ended without reading it all: its exit code says why
                        pass
                channel.shutdown_write()  # end of input: a command reading stdin does not hang
                return channel
            except (paramiko.SSHException, EOFError, OSError) as error:
                if channel is not None:
                    channel.close()
                if transport is not None and transport.is_active():
                    # The connection is fine, only this channel failed: closing it would kill every
                    # command running on it.
                    if isinstance(error, paramiko.ChannelException):
                        raise SandboxError(
                            f"SSH server {self.settings.host} refused a new session ({error}); its MaxSessions "
                            f"is lower than max_sessions={self.settings.max_sessions}"
                        ) from None
                    raise SandboxError(f"SSH exec on {self.settings.host} failed: {str(error) or type(error).__name__}") from None
                if attempt == 1:
                    raise SandboxError(f"SSH exec on {self.settings.host} failed: {str(error) or type(error).__name__}") from None
                with self._lock:  # a dropped connection: reconnect once
                    if self._client is client:
                        self._client = None
                client.close()
        raise AssertionError("unreachable")


class _SshExecution(ThreadedExecution):
    def __init__(self, channel: paramiko.Channel, release: Callable[[], None] | None) -> None:
        super().__init__()
        self._channel = channel
        self._release: Callable[[], None] | None = release

    def read_blocking(self) -> None:
        channel = self._channel
        while not self.stopping:
            got = False
            if channel.recv_ready():
                data = channel.recv(_READ_SIZE)
                got = bool(data)
                if data and not self.emit("stdout", data):
                    return
            if channel.recv_stderr_ready():
                data = channel.recv_stderr(_READ_SIZE)
                got = got or bool(data)
                if data and not self.emit("stderr", data):
                    return
            if got:
                continue
            if channel.closed or channel.eof_received:
                if not channel.recv_ready() and not channel.recv_stderr_ready():
                    return
                continue
            # Channels are selectable: paramiko signals both stdout and stderr data (and EOF) on one pipe.
            select.select([channel], [], [], 0.1)

    async def wait(self) -> int:
        if self.reader_error is not None:
            raise SandboxError(f"lost the SSH channel: {self.reader_error}")
        status = await asyncio.to_thread(self._channel.recv_exit_status)
        # -1: the channel closed without an exit status or signal (the connection dropped).
        return 255 if status < 0 else status

    async def kill(self) -> None:
        # The remote process group was killed from a second channel (PosixShellSandbox).
        self._channel.close()

    async def close(self) -> None:
        await super().close()
        self._channel.close()
        release, self._release = self._release, None
        if release is not None:  # the channel is closed: its session slot is free
            release()
