"""``DockerSandbox``: commands and files in a Docker container, through the docker SDK.

It attaches to an existing container, or creates one from an image (no
network by default, ``--init`` so killed process trees are reaped) and
removes it on ``close()``. Commands run with the low-level exec API
(``exec_create`` / ``exec_start(stream=True, demux=True)`` / ``exec_inspect``);
the blocking SDK calls run in threads. File operations use the shell path of
:class:`PosixShellSandbox`. The SDK talks to the engine's API, never to a CLI,
so a container called ``--privileged`` cannot turn into a flag; names are
validated anyway.

Pickling keeps the configuration and the identity, never the client: a copy
unpickled in a process that already has this sandbox *is* that sandbox (one
container for every agent built with the object); in another process it opens
its own client and, for an image, creates its own container there. A created
container is labelled ``ray_harness.sandbox=<sandbox_id>`` plus the creating
process's owner labels (a host's actor id, see
:func:`ray_harness.sandbox._binding.owner_labels`), so
:func:`remove_owned_containers` finds what a dead process left behind.

**A created container never outlives its process.** Like ``docker run -i --rm``, the creating process holds the
container's stdin (one attach connection to the engine, closed by the kernel however the process ends: ``close()``
forgotten, ``kill -9``, a host or a whole Ray cluster gone); its main process ends at that end of input and the
engine removes it (``AutoRemove``). So no container is left running when nobody can reach it any more.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator
from typing_extensions import override

from ray_harness.sandbox._binding import engine_listeners, owner_labels, set_engine_listener as set_listener
from ray_harness.sandbox._config import NAME_PATTERN, Settings, validated
from ray_harness.sandbox._engine import RawExecution, ThreadedExecution, start_in_thread
from ray_harness.sandbox._output import DEFAULT_MAX_OUTPUT_CHARS
from ray_harness.sandbox.errors import SandboxError
from ray_harness.sandbox.posix_shell import SCRIPT_INPUT, PosixShellSandbox

if TYPE_CHECKING:
    import docker

logger = logging.getLogger(__name__)

__all__ = ("SANDBOX_LABEL", "DockerSandbox", "remove_owned_containers", "set_engine_listener")

_KEEPALIVE = ["sh", "-c", "while read -r _; do :; done"]
"""A created container's main process: it lives until its stdin closes (shell built-ins only)."""
SANDBOX_LABEL = "ray_harness.sandbox"
"""The label of every container a ``DockerSandbox`` creates; its value is the sandbox's identity."""


class _DockerSettings(Settings):
    container: str | None = Field(default=None, pattern=NAME_PATTERN)
    image: str | None = Field(default=None, pattern=r"\A[a-zA-Z0-9][a-zA-Z0-9._/:@-]*\z")
    docker_host: str | None = Field(default=None, pattern=r"\A[a-z][a-z0-9+]*://\S+\z")
    working_dir: str | None = Field(default=None, pattern=r"\A/")
    user: str | None = Field(default=None, pattern=r"\A[a-zA-Z0-9_][a-zA-Z0-9_.-]*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]*)?\z")
    network_mode: str = Field(default="none", pattern=r"\A[a-zA-Z0-9][a-zA-Z0-9_.:-]*\z")
    mem_limit: int | str | None = None
    nano_cpus: int | None = Field(default=None, gt=0)
    pids_limit: int | None = Field(default=None, gt=0)
    read_only: bool = False

    @field_validator("mem_limit")
    @classmethod
    def _size(cls, value: int | str | None) -> int | str | None:
        """Docker's sizes: bytes, or a number with a unit (checked here, not by the engine at creation)."""
        if value is None or (isinstance(value, int) and value > 0) or (
                isinstance(value, str) and _SIZE.fullmatch(value)):
            return value
        raise ValueError(f"{value!r} is not a size: a positive number of bytes or a string like '512m' or '1.5g'")


_SIZE = re.compile(r"[0-9]+(\.[0-9]+)?[bkmgBKMG]?[bB]?")


class DockerSandbox(PosixShellSandbox):
    """A Docker container as a sandbox.

    Args:
        container: Name or id of a running container to attach to (never removed). A
            positional reference containing ``:``, ``/`` or ``@`` is taken as ``image``.
        image: Image to create a container from when ``container`` is not given;
            that container is removed on ``close()`` / context exit.
        docker_host: Engine URL; else ``DOCKER_HOST``; else the default socket.
        working_dir: Absolute directory commands start in (created with the container).
        user: ``user`` or ``uid:gid`` commands run as (and the created container's user).
        network_mode: Network of a created container (default ``"none"``: no network).
        mem_limit: Memory limit of a created container (bytes or ``"512m"``).
        nano_cpus: CPU quota of a created container, in units of 1e-9 CPUs.
        pids_limit: Maximum processes in a created container.
        read_only: Create the container with a read-only root file system (and a tmpfs on ``/tmp``).
        max_output_chars: Retained stdout/stderr characters per stream.
    """

    stdin_writes = True  # write_file: one exec reading its stdin (64 KiB execs: 6-10 s for 5 MB)

    def __init__(
        self,
        container: str | None = None,
        *,
        image: str | None = None,
        docker_host: str | None = None,
        working_dir: str | None = None,
        user: str | None = None,
        network_mode: str = "none",
        mem_limit: int | str | None = None,
        nano_cpus: int | None = None,
        pids_limit: int | None = None,
        read_only: bool = False,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        if container is not None and image is None and any(mark in container for mark in ":/@"):
            # The first argument is a container or an image (`DockerSandbox("python:3.12")`): container names
            # never contain ":", "/" or "@", image references often do. A bare word stays a container name.
            container, image = None, container
        self.settings = validated(
            _DockerSettings, "DockerSandbox", container=container, image=image, docker_host=docker_host,
            working_dir=working_dir, user=user, network_mode=network_mode, mem_limit=mem_limit,
            nano_cpus=nano_cpus, pids_limit=pids_limit, read_only=read_only,
        )
        if (container is None) == (image is None):
            raise ValueError("DockerSandbox needs exactly one of container= (attach) or image= (create)")
        super().__init__(working_dir=working_dir, max_output_chars=max_output_chars)
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._client: docker.DockerClient | None = None
        self._container_id: str | None = None
        self._created = False
        self._lifeline: Any = None  # the created container's stdin, held open while this process lives

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_lock", "_client", "_container_id", "_created", "_lifeline"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def __repr__(self) -> str:
        target = f"container={self.settings.container!r}" if self.settings.container else f"image={self.settings.image!r}"
        return f"DockerSandbox({target})"

    @override
    def describe(self) -> str:
        if self.settings.container:
            return f"Docker container {self.settings.container}"
        return f"a Docker container from image {self.settings.image}"

    @property
    def container_id(self) -> str | None:
        """The id of the container in use (``None`` before the first operation)."""
        return self._container_id

    # -- lifecycle ------------------------------------------------------------------------------------

    @override
    async def start(self) -> None:
        await asyncio.to_thread(self._ensure_container)

    @override
    async def close(self) -> None:
        await self._kill_running()  # an attached container lives on: its commands must not
        await asyncio.to_thread(self._close_blocking)

    def _docker(self) -> docker.DockerClient:
        if self._client is None:
            import docker

            host = self.settings.docker_host
            try:
                # version="auto": the SDK's default API version can be newer than the engine's.
                client = (docker.DockerClient(base_url=host, version="auto") if host
                          else docker.from_env(version="auto"))
            except docker.errors.DockerException as error:
                where = host or os.environ.get("DOCKER_HOST") or "the default socket"
                raise SandboxError(f"cannot reach the Docker engine at {where}: {error}") from None
            self._client = client
        return self._client

    def _ensure_container(self) -> str:
        with self._lock:
            if self._container_id is not None:
                return self._container_id
            import docker

            client = self._docker()
            try:
                if self.settings.container is not None:
                    container = client.containers.get(self.settings.container)
                    if container.status != "running":
                        raise SandboxError(f"container {self.settings.container} is {container.status}, not running")
                else:
                    container = client.containers.get(self._create(client))
                    self._created = True
                    _note_engine(self.settings.docker_host)
            except docker.errors.NotFound as error:
                raise SandboxError(f"Docker object not found: {error.explanation or error}") from None
            except docker.errors.DockerException as error:
                raise SandboxError(f"Docker engine error: {error}") from None
            container_id: str = container.id
            self._container_id = container_id
        self._recovery_changed()
        return container_id

    @override
    def recovery_state(self) -> dict[str, Any]:
        state = super().recovery_state()
        if self._created and self._container_id is not None:
            state["created_container"] = self._container_id
        elif self._container_id is not None:
            state["container"] = self._container_id
        return state

    @override
    async def recover(self, state: dict[str, Any]) -> None:
        old = state.get("created_container")
        if isinstance(old, str):
            # The dead predecessor's own container: removing it ends everything that ran in it.
            await asyncio.to_thread(self._remove_container, old)
            return
        if state.get("container") is not None:
            await self.start()
            await super().recover(state)  # an attached container lives on: kill the leftover commands

    def _remove_container(self, container_id: str) -> None:
        _remove(self._docker().api, container_id)

    def _create(self, client: docker.DockerClient) -> str:
        """Create and start the container, its stdin held by this process (see the module docstring)."""
        import docker

        api = client.api
        options = self._create_options()
        host_config = api.create_host_config(**options["host_config"])
        try:
            created = api.create_container(self.settings.image, host_config=host_config, **options["container"])
        except docker.errors.ImageNotFound:
            client.images.pull(self.settings.image)
            created = api.create_container(self.settings.image, host_config=host_config, **options["container"])
        container_id: str = created["Id"]
        try:
            self._lifeline = api.attach_socket(container_id, params={"stdin": 1, "stream": 1})
            api.start(container_id)
        except BaseException:
            self._drop_lifeline()
            api.remove_container(container_id, force=True)
            raise
        return container_id

    def _create_options(self) -> dict[str, Any]:
        """The engine's create options: ``container`` fields and ``host_config`` fields."""
        s = self.settings
        # detach=False with stdin_open: the engine closes stdin once its one attached client (us) disconnects.
        container: dict[str, Any] = {"command": _KEEPALIVE, "detach": False, "stdin_open": True,
                                     "labels": {SANDBOX_LABEL: self.sandbox_id, **owner_labels()}}
        container.update({key: value for key, value in {"user": s.user, "working_dir": s.working_dir}.items()
                          if value is not None})
        host: dict[str, Any] = {"init": True, "auto_remove": True, "network_mode": s.network_mode,
                                "security_opt": ["no-new-privileges"], "read_only": s.read_only}
        host.update({key: value for key, value in {"mem_limit": s.mem_limit, "nano_cpus": s.nano_cpus,
                                                   "pids_limit": s.pids_limit}.items() if value is not None})
        if s.read_only:
            host["tmpfs"] = {"/tmp": ""}
        return {"container": container, "host_config": host}

    def _drop_lifeline(self) -> None:
        lifeline, self._lifeline = self._lifeline, None
        if lifeline is not None:
            try:
                lifeline.close()
            except OSError:
                pass

    def _close_blocking(self) -> None:
        with self._lock:
            container_id, created, client = self._container_id, self._created, self._client
            self._container_id, self._created, self._client = None, False, None
            if client is None:
                return
            try:
                if created and container_id is not None:
                    _remove(client.api, container_id)
            finally:
                self._drop_lifeline()
                client.close()

    # -- execution ------------------------------------------------------------------------------------

    async def _start_script(self, script: str) -> RawExecution:
        container_id = await asyncio.to_thread(self._ensure_container)
        api = self._docker().api
        import docker

        data = SCRIPT_INPUT.get()

        def begin() -> tuple[str, Any]:
            exec_id = api.exec_create(container_id, ["/bin/sh", "-c", script], stdout=True, stderr=True,
                                      stdin=data is not None, user=self.settings.user or "")["Id"]
            if data is None:
                return exec_id, api.exec_start(exec_id, stream=True, demux=True)
            return exec_id, _FedStream(api.exec_start(exec_id, socket=True), data)

        def supervise(started: tuple[str, Any]) -> _DockerExecution:
            execution = _DockerExecution(api, *started)
            execution.start_reader(f"ray_harness-docker-exec-{started[0][:12]}")
            return execution

        async def kill(started: tuple[str, Any]) -> None:  # its start was cancelled
            await self._kill_started(supervise(started))

        try:
            return supervise(await start_in_thread(begin, kill))
        except docker.errors.DockerException as error:
            raise SandboxError(f"docker exec in {self.settings.container or container_id[:12]} failed: {error}") from None


_engines_lock = threading.Lock()
_engines: set[str] = set()


def _gone(error: BaseException) -> bool:
    """A removal that failed only because the container is gone or already going (the engine's auto-remove)."""
    import docker

    return isinstance(error, docker.errors.NotFound) or (
        isinstance(error, docker.errors.APIError) and error.status_code == 409 and "in progress" in str(error))


_REMOVAL_WAIT_S = 30.0
"""How long a removal the engine already started (``AutoRemove``) is waited for."""


def _remove(api: Any, container_id: str) -> None:
    """Force-remove a container; return once it is gone, also when the engine's own removal got there first.

    A killed container's ``AutoRemove`` races with an explicit removal, which then fails with "removal already
    in progress" while the container is still listed: wait for the engine to finish, so that "closed" or
    "cleaned up" means gone.
    """
    import docker

    try:
        api.remove_container(container_id, force=True)
        return
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as error:
        if not _gone(error):
            raise
    deadline = time.monotonic() + _REMOVAL_WAIT_S
    while time.monotonic() < deadline:
        try:
            api.inspect_container(container_id)
        except docker.errors.NotFound:
            return
        time.sleep(0.05)
    logger.warning("the engine is still removing container %s after %.0f s", container_id[:12], _REMOVAL_WAIT_S)


def _note_engine(docker_host: str | None) -> None:
    """Record an engine this process created a container on (``""``: the default one)."""
    engine = docker_host or ""
    with _engines_lock:
        if engine in _engines:
            return
        _engines.add(engine)
        listeners = engine_listeners()
    for listener in listeners:
        listener(sorted(_engines))


def set_engine_listener(listener: Any) -> None:
    """Call ``listener(engines)`` whenever this process creates a container on an engine it had not used.

    Also now, with the engines used so far (if any); the listener is held by :mod:`ray_harness.sandbox._binding`.
    """
    with _engines_lock:
        set_listener(listener)
        engines = sorted(_engines)
    if listener is not None and engines:
        listener(engines)


def remove_owned_containers(labels: dict[str, str], engines: list[str] | None = None) -> int:
    """Remove the containers (running or not) carrying all of ``labels`` on ``engines``; return how many.

    ``engines`` are engine URLs, ``""`` the default one (``DOCKER_HOST`` or the socket). Engines that cannot
    be reached are skipped (logged): cleanup is best effort and must not fail a restart or a shutdown.
    """
    import docker

    if not labels:
        raise ValueError("remove_owned_containers needs at least one label (it would remove every container)")
    removed = 0
    for engine in engines if engines is not None else [""]:
        try:
            client = (docker.DockerClient(base_url=engine, version="auto") if engine
                      else docker.from_env(version="auto"))
        except docker.errors.DockerException:
            logger.warning("cannot reach the Docker engine %r to clean up", engine or "default")
            continue
        try:
            filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
            for container in client.api.containers(all=True, filters=filters):
                _remove(client.api, container["Id"])
                removed += 1
        except docker.errors.DockerException:
            logger.warning("cleaning up containers on %r failed", engine or "default", exc_info=True)
        finally:
            client.close()
    return removed


class _FedStream:
    """An exec's hijacked connection: ``data`` goes to its stdin from a thread of its own.

    Its output reads as the ``(stdout, stderr)`` pairs of a demuxed exec stream.
    """

    def __init__(self, connection: Any, data: bytes) -> None:
        self._connection = connection
        raw = getattr(connection, "_sock", None)  # docker-py's hijacked socket (unix or tcp engine)
        if raw is None:
            connection.close()
            raise SandboxError("docker exec gave no writable socket for the command's input")
        threading.Thread(target=_feed, args=(raw, data), name="ray_harness-docker-stdin", daemon=True).start()

    def __iter__(self) -> Any:
        from docker.utils.socket import demux_adaptor, frames_iter

        for frame in frames_iter(self._connection, tty=False):
            yield demux_adaptor(*frame)

    def close(self) -> None:
        self._connection.close()


def _feed(raw: socket.socket, data: bytes) -> None:
    try:
        raw.sendall(data)
        raw.shutdown(socket.SHUT_WR)  # end of input: `cat` finishes
    except OSError:  # the script ended without reading it all (a directory at the path): its exit code says why
        logger.debug("docker exec stdin closed early", exc_info=True)


class _DockerExecution(ThreadedExecution):
    def __init__(self, api: Any, exec_id: str, stream: Any) -> None:
        super().__init__()
        self._api = api
        self._exec_id = exec_id
        self._stream = stream
        self._closed = False

    def read_blocking(self) -> None:
        for stdout, stderr in self._stream:
            if stdout and not self.emit("stdout", stdout):
                return
            if stderr and not self.emit("stderr", stderr):
                return
            if self.stopping:
                return

    async def wait(self) -> int:
        if self.reader_error is not None and not self._closed:
            raise SandboxError(f"lost the docker exec stream: {self.reader_error}")
        for _ in range(200):  # the exit code can trail the end of the stream by a moment
            info = await asyncio.to_thread(self._api.exec_inspect, self._exec_id)
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            await asyncio.sleep(0.025)
        raise SandboxError(f"docker exec {self._exec_id[:12]} did not report an exit code")

    async def kill(self) -> None:
        # The process group was killed from a second exec (PosixShellSandbox); this ends our stream.
        await self._close_stream()

    async def close(self) -> None:
        await super().close()
        await self._close_stream()

    async def _close_stream(self) -> None:
        if not self._closed:
            self._closed = True
            await asyncio.to_thread(self._stream.close)
