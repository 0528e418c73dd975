"""``RemoteSandbox``: any ``Sandbox`` served by its own named actor, with the same ``Sandbox`` API.

The wrapped sandbox is shipped by value (sandboxes pickle as configuration; live
clients and connections are created in the actor), so a Docker or SSH sandbox
talks to its engine from wherever the actor runs (pin it with ``resources=``).
Execution output streams back as it is produced (a Ray streaming generator of
``StreamChunk`` then one ``ExecutionResult``); closing the stream early cancels
the actor-side stream, which kills the command. Errors keep their type
(``SandboxTimeoutError``, ``SandboxPathNotFoundError``, ...).

``Agent(sandbox=RemoteSandbox(DockerSandbox(image="python:3.12")))`` gives the
agent ``sandbox_shell`` and ``sandbox_file_editor`` tools that run in the
sandbox actor; the handle pickles, so the agent can itself live in a RemoteAgent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import uuid
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any, TypeVar

import ray
from ray.exceptions import RayError

from ray_harness.runtime._client import ActorClient
from ray_harness.runtime._cluster import actor_resources, current_namespace, ensure_initialized
from ray_harness.runtime._telemetry import flush_spans, prepare_actor_process, with_actor_env
from ray_harness.runtime._wire import SandboxRequest
from ray_harness.sandbox._engine import check_timeout
from ray_harness.sandbox._process import add_group_listener
from ray_harness.sandbox._validation import check_code, check_command, check_cwd, check_env, check_language
from ray_harness.sandbox.base import Sandbox, as_bytes
from ray_harness.sandbox.types import ExecutionResult, FileInfo, StreamChunk
from ray_harness.telemetry.propagation import attached
from ray_harness.telemetry.tracing import get_tracer, span_scope

__all__ = ("SANDBOX_ACTOR_PREFIX", "RemoteSandbox", "SandboxActor")

SANDBOX_ACTOR_PREFIX = "ray_harness:sandbox:"
logger = logging.getLogger(__name__)
Stream = AsyncGenerator[StreamChunk | ExecutionResult, None]
T = TypeVar("T")


class SandboxActor:
    """The actor class (plain; ``ray.remote`` is applied in :func:`_sandbox_class`).

    Local commands run in process groups that outlive a SIGKILL of this process; the live groups are
    recorded in a file, and a restarted actor kills whatever its dead predecessor left running.
    """

    def __init__(self, sandbox: Sandbox, actor_name: str | None = None) -> None:
        prepare_actor_process()  # tracing and metrics configured from the driver's variables (with_actor_env)
        self._sandbox = sandbox
        self._groups_file = _groups_file(actor_name) if actor_name else None
        self._local_groups: set[int] = set()
        self._pending_recovery: dict[str, Any] | None = None
        if self._groups_file is not None:
            self._pending_recovery = _reap_leftovers(self._groups_file)
            add_group_listener(self._on_local_groups)
            sandbox.set_recovery_listener(self._record)

    def _on_local_groups(self, groups: set[int]) -> None:
        self._local_groups = groups
        self._record()

    def _record(self) -> None:
        """Record what a restarted actor must clean up: local process groups and the sandbox's own state."""
        assert self._groups_file is not None
        state = {"local": sorted(self._local_groups), "sandbox": self._sandbox.recovery_state()}
        temp = f"{self._groups_file}.tmp"
        with open(temp, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
        os.replace(temp, self._groups_file)

    async def _recover(self) -> None:
        pending, self._pending_recovery = self._pending_recovery, None
        if pending:
            try:
                await self._sandbox.recover(pending)
            except Exception:  # cleanup is best effort: the sandbox itself must still serve
                logger.warning("sandbox recovery after a restart failed", exc_info=True)

    async def stream(self, request: SandboxRequest) -> Stream:
        """Run ``execute`` or ``execute_code``; its chunks, then one ``ExecutionResult``."""
        with attached(request.trace_context):
            # The span ends with the result, before it is yielded: Ray may never resume this generator after
            # its last item, and a span left open is never exported.
            tracer = get_tracer()
            span = tracer.start_span(f"sandbox {request.operation}", None, _attributes(request))
            ended = False
            try:
                async with aclosing(self._operation_stream(request)) as items:
                    async for item in items:
                        if isinstance(item, ExecutionResult):
                            tracer.end_span(span)
                            ended = True
                        yield item
            except Exception as error:
                if not ended:
                    tracer.end_span(span, error=error)
                    ended = True
                raise
            finally:
                if not ended:
                    tracer.end_span(span)

    async def _operation_stream(self, request: SandboxRequest) -> Stream:
        await self._recover()
        sandbox = self._sandbox
        if request.operation == "execute":
            stream = sandbox.execute_streaming(_given(request.command, "command"), timeout=request.timeout,
                                               cwd=request.cwd, env=request.env)
        elif request.operation == "execute_code":
            stream = sandbox.execute_code_streaming(_given(request.code, "code"), _given(request.language,
                                                    "language"), timeout=request.timeout, cwd=request.cwd,
                                                    env=request.env)
        else:
            raise ValueError(f"operation {request.operation!r} does not stream; use call()")
        async with aclosing(stream) as items:
            async for item in items:
                yield item

    async def call(self, request: SandboxRequest) -> Any:
        """One non-streaming operation of the ``Sandbox`` surface (files, start, close, describe)."""
        try:
            with attached(request.trace_context), span_scope(f"sandbox {request.operation}", _attributes(request)):
                return await self._call(request)
        finally:
            if request.operation == "close":
                # shutdown() kills this process right after close: export the spans it ended first (a batch
                # exporter would otherwise lose the last commands' spans).
                await asyncio.to_thread(flush_spans)

    async def _call(self, request: SandboxRequest) -> Any:
        sandbox, operation = self._sandbox, request.operation
        if operation == "describe":
            return sandbox.describe()
        if operation == "close":
            return await sandbox.close()
        await self._recover()
        if operation == "read_file":
            return await sandbox.read_file(_given(request.path, "path"))
        if operation == "write_file":
            return await sandbox.write_file(_given(request.path, "path"), _given(request.content, "content"))
        if operation == "remove_file":
            return await sandbox.remove_file(_given(request.path, "path"))
        if operation == "list_files":
            return await sandbox.list_files(_given(request.path, "path"))
        if operation == "start":
            return await sandbox.start()
        raise ValueError(f"operation {operation!r} streams; use stream()")


def _attributes(request: SandboxRequest) -> dict[str, Any]:
    """Span attributes of one sandbox operation in the actor (the command itself stays off the span)."""
    return {"ray_harness.sandbox.operation": request.operation, "ray_harness.sandbox.actor_pid": os.getpid()}


def _run_options(timeout: float | None, cwd: str | None, env: Mapping[str, str] | None) -> dict[str, Any]:
    """Checked here as every sandbox checks them: the request's own validation would name its internal type."""
    return {"timeout": check_timeout(timeout), "cwd": check_cwd(cwd),
            "env": check_env(env) if env is not None else None}


def _given(value: T | None, field: str) -> T:
    if value is None:
        raise ValueError(f"sandbox request field {field!r} is required for this operation")
    return value


def _reap_leftovers(groups_file: str) -> dict[str, Any] | None:
    """Kill the local process groups a dead predecessor left; return its sandbox state to recover."""
    try:
        with open(groups_file, encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict):
        return None
    for group in state.get("local", []):
        if isinstance(group, int):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.remove(groups_file)
    sandbox_state = state.get("sandbox")
    return sandbox_state if isinstance(sandbox_state, dict) and sandbox_state else None


def _groups_file(actor_name: str) -> str:
    base = os.environ.get("RAY_HARNESS_STATE_DIR") or os.path.join(os.path.expanduser("~"), ".ray_harness", "runtime")
    directory = os.path.join(base, "sandboxes")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in actor_name)
    return os.path.join(directory, f"{safe}.groups")


@functools.cache
def _sandbox_class() -> Any:
    return ray.remote(SandboxActor)


class RemoteSandbox(Sandbox):
    """A sandbox in its own actor (``ray_harness:sandbox:<name>``), usable wherever a ``Sandbox`` is.

    Args:
        sandbox: The sandbox to serve (shipped by value).
        name: Actor name suffix; default ``<sandbox class>-<8 hex>``.
        namespace: Ray namespace (default: the driver's).
        resources: Custom Ray resources, e.g. ``{"docker_host": 1}`` to run next to a Docker engine.
        num_cpus: CPUs reserved for the actor.
        max_concurrency: Operations served at once (streams and file operations).
        max_restarts: Restarts after the actor's process dies. A command running then fails with
            ``RemoteActorError`` (commands are not retried: they are not idempotent); the restarted actor
            kills the local process groups its predecessor left behind.
        get_if_exists: Attach to the actor if one of that name already runs (its sandbox is then the one
            it was created with), instead of failing.

    :meth:`shared` gives the actor named after a sandbox's identity: agents on different hosts that were
    built with one sandbox object share that one sandbox through it.
    """

    closes_with_holders = False  # the actor owns the wrapped sandbox: shutdown() closes it, not an agent's slot

    def __init__(self, sandbox: Sandbox, *, name: str | None = None, namespace: str | None = None,
                 resources: dict[str, float] | None = None, num_cpus: float = 0,
                 max_concurrency: int = 100, max_restarts: int = 3, get_if_exists: bool = False) -> None:
        if not isinstance(sandbox, Sandbox):
            raise TypeError(f"sandbox must be a ray_harness Sandbox, got {type(sandbox).__name__}")
        if isinstance(sandbox, RemoteSandbox):
            raise TypeError("sandbox is already a RemoteSandbox")
        ensure_initialized()
        self.name = name or f"{type(sandbox).__name__.lower()}-{uuid.uuid4().hex[:8]}"
        self.namespace = namespace or current_namespace()
        self.actor_name = SANDBOX_ACTOR_PREFIX + self.name
        # Resources no node has fail here, naming them, instead of Ray's endless wait (as RemoteAgent, AgentPool).
        options: dict[str, Any] = {"name": self.actor_name, "namespace": self.namespace,
                                   **actor_resources(num_cpus, resources, f"RemoteSandbox {self.name!r}"),
                                   "max_concurrency": max_concurrency, "max_restarts": max_restarts,
                                   "max_task_retries": 0, "get_if_exists": get_if_exists}
        self._actor = _sandbox_class().options(**with_actor_env(options)).remote(sandbox, self.actor_name)
        self._client = ActorClient(self._actor, self.actor_name)
        self._description = str(self._client.call_sync("call", SandboxRequest(operation="describe")))

    @classmethod
    def shared(cls, sandbox: Sandbox, **options: Any) -> RemoteSandbox:
        """The sandbox actor of ``sandbox``'s identity (``ray_harness:sandbox:<sandbox_id>``), created on first use.

        Every process that asks for the shared sandbox of one sandbox object (a copy of it) gets the same
        actor, so agents that cannot run on one host still share one container or one SSH connection. Other
        options are those of the constructor; ``shutdown()`` stops it for everyone.
        """
        if isinstance(sandbox, RemoteSandbox):
            return sandbox
        return cls(sandbox, name=sandbox.sandbox_id, get_if_exists=True, **options)

    @property
    def actor(self) -> Any:
        """The underlying Ray actor handle."""
        return self._actor

    def describe(self) -> str:
        """Return the wrapped sandbox's description."""
        return self._description

    def __repr__(self) -> str:
        return f"RemoteSandbox({self._description!r}, actor={self.actor_name!r})"

    def _stream(self, request: SandboxRequest) -> Stream:
        # Closing early cancels the actor's stream (CancelledError there): the sandbox kills the command.
        return self._client.stream("stream", request, cancel_call=True, what=f"command {request.operation!r}",
                                   done=lambda item: isinstance(item, ExecutionResult))

    def execute_streaming(self, command: str, *, timeout: float | None = None, cwd: str | None = None,
                          env: Mapping[str, str] | None = None) -> Stream:
        """Run a shell command in the actor's sandbox; its output as it is produced."""
        return self._stream(SandboxRequest(operation="execute", command=check_command(command),
                                           **_run_options(timeout, cwd, env)))

    def execute_code_streaming(self, code: str, language: str, *, timeout: float | None = None,
                               cwd: str | None = None, env: Mapping[str, str] | None = None) -> Stream:
        """Run code with an interpreter in the actor's sandbox; its output as it is produced."""
        return self._stream(SandboxRequest(operation="execute_code", code=check_code(code),
                                           language=check_language(language), **_run_options(timeout, cwd, env)))

    async def read_file(self, path: str) -> bytes:
        """Read a file of the sandbox."""
        return bytes(await self._client.call("call", SandboxRequest(operation="read_file", path=path)))

    async def write_file(self, path: str, content: bytes) -> None:
        """Write a file of the sandbox."""
        await self._client.call("call", SandboxRequest(operation="write_file", path=path, content=as_bytes(content)))

    async def remove_file(self, path: str) -> None:
        """Remove a file of the sandbox."""
        await self._client.call("call", SandboxRequest(operation="remove_file", path=path))

    async def list_files(self, path: str = ".") -> list[FileInfo]:
        """List a directory of the sandbox."""
        return list(await self._client.call("call", SandboxRequest(operation="list_files", path=path)))

    async def start(self) -> None:
        """Start the sandbox (e.g. its container)."""
        await self._client.call("call", SandboxRequest(operation="start"))

    async def close(self) -> None:
        """Close the sandbox (the actor stays up)."""
        await self._client.call("call", SandboxRequest(operation="close"))

    def shutdown(self) -> None:
        """Close the wrapped sandbox and stop the actor."""
        try:
            self._client.call_sync("call", SandboxRequest(operation="close"))
        finally:
            try:
                ray.kill(self._actor, no_restart=True)
            except (RayError, ValueError):
                pass
