"""Where ``ContextOffloader`` keeps offloaded content blocks (Strands' offloader storage backends).

A backend stores one block's bytes with its MIME type under a key and returns a reference; the reference is
what the agent sees and later passes to ``retrieve_offloaded_content``. Backends travel with the agent when it
is pickled to a Ray host: locks and clients are per process and made again there, the stored data (of
``InMemoryStorage``) and the configuration go with the copy.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config as BotocoreConfig

    from ray_harness.sandbox.base import Sandbox

__all__ = ("FileStorage", "InMemoryStorage", "S3Storage", "Storage")

logger = logging.getLogger(__name__)


def safe_key(key: str) -> str:
    """``key`` with path separators, ``..`` and other characters unsafe in file names and object keys replaced."""
    return re.sub(r"[^\w\-.]", "_", key.replace("..", "_").replace("/", "_").replace("\\", "_"))


def _unique_name(counter: int, key: str) -> str:
    return f"{int(time.time() * 1000)}_{counter}_{safe_key(key)}"


class _Locked:
    """A ``threading.Lock`` that is made again in each process (a lock does not pickle)."""

    _lock: threading.Lock

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


@runtime_checkable
class Storage(Protocol):
    """A backend for offloaded content blocks; implement it for your own store (Redis, DynamoDB, ...).

    There is no delete: stored content lives as long as the backend keeps it (use a fresh instance per
    session, or a store with its own lifecycle, such as S3 lifecycle rules).
    """

    async def store(self, key: str, content: bytes, content_type: str = "text/plain") -> str:
        """Store one block's bytes with their MIME type; return the reference to retrieve them by."""
        ...

    async def retrieve(self, reference: str) -> tuple[bytes, str]:
        """``(content, content_type)`` of a stored block; ``KeyError`` for an unknown reference."""
        ...


class InMemoryStorage(_Locked):
    """Offloaded blocks in this process's memory, evicted after ``evict_after_turns`` agent cycles unused.

    The ``ContextOffloader`` tells it the agent's cycle count before each model call; an entry neither stored
    nor retrieved for more than ``evict_after_turns`` cycles is then dropped, and retrieving it reports an
    unknown reference. Use one instance per agent.

    Args:
        evict_after_turns: Cycles of disuse before an entry is dropped (default 20); ``None`` keeps everything.

    Raises:
        ValueError: ``evict_after_turns`` is not a positive integer or ``None``.
    """

    def __init__(self, evict_after_turns: int | None = 20) -> None:
        if evict_after_turns is not None and (not _is_int(evict_after_turns) or evict_after_turns < 1):
            raise ValueError(f"evict_after_turns must be a positive integer or None, got {evict_after_turns!r}")
        self._evict_after_turns = evict_after_turns
        self._entries: dict[str, tuple[bytes, str, int]] = {}  # reference -> (content, type, last used cycle)
        self._counter = 0
        self._cycle = 0
        self._agent_id: int | None = None
        self._lock = threading.Lock()

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._agent_id = None  # the copy belongs to the agent it was shipped with, whatever its id here

    async def store(self, key: str, content: bytes, content_type: str = "text/plain") -> str:
        """Keep the block; the reference is ``mem_<n>_<key>``."""
        with self._lock:
            self._counter += 1
            reference = f"mem_{self._counter}_{key}"
            self._entries[reference] = (content, content_type, self._cycle)
        return reference

    async def retrieve(self, reference: str) -> tuple[bytes, str]:
        """The stored block (and it counts as used this cycle); ``KeyError`` if unknown or evicted."""
        with self._lock:
            if reference not in self._entries:
                raise KeyError(f"Reference not found: {reference}")
            content, content_type, _ = self._entries[reference]
            self._entries[reference] = (content, content_type, self._cycle)
        return content, content_type

    def clear(self) -> None:
        """Drop every stored block (e.g. between sessions)."""
        with self._lock:
            self._entries.clear()

    def _bind(self, agent_id: int) -> None:
        """Claim the storage for one agent: eviction follows that agent's cycles.

        Raises:
            ValueError: Another agent claimed it already.
        """
        with self._lock:
            if self._agent_id not in (None, agent_id):
                raise ValueError("InMemoryStorage cannot be shared across multiple agents. "
                                 "Use a separate InMemoryStorage instance per agent.")
            self._agent_id = agent_id

    def _evict(self, cycle: int) -> None:
        """Note the agent's cycle and drop the entries unused for more than ``evict_after_turns`` cycles."""
        with self._lock:
            self._cycle = cycle
            if self._evict_after_turns is None:
                return
            stale = [ref for ref, (_, _, used) in self._entries.items() if used < cycle - self._evict_after_turns]
            for reference in stale:
                del self._entries[reference]
        if stale:
            logger.debug("evicted=<%d>, cycle=<%d> | stale offloaded entries removed", len(stale), cycle)


class FileStorage(_Locked):
    """Offloaded blocks as files in ``artifact_dir``, on this host or, through a sandbox, wherever it runs.

    Each block is a new file ``<ms>_<n>_<key>.<ext>`` (the extension from the MIME type; files are created,
    never replaced) and the reference is that file name. A ``.metadata.json`` sidecar records each file's MIME
    type, so references stay valid in a later process; only files recorded there are ever read back.
    ``ContextOffloader`` binds the storage to each agent's ``agent.sandbox`` (:meth:`for_sandbox`).

    Args:
        artifact_dir: The directory of the files (default ``./artifacts``), made on first store.
        sandbox: Read and write through this sandbox instead of this host's file system.
    """

    _METADATA_FILE = ".metadata.json"

    def __init__(self, artifact_dir: str = "./artifacts", *, sandbox: Sandbox | None = None) -> None:
        if not isinstance(artifact_dir, str | Path) or not str(artifact_dir):
            raise ValueError(f"artifact_dir must be a non-empty path, got {artifact_dir!r}")
        self._artifact_dir = Path(artifact_dir)
        self._sandbox = sandbox
        self._counter = 0
        self._lock = threading.Lock()
        # A sandbox may be remote: its sidecar is read on first use, not while the agent is being built.
        self._content_types: dict[str, str] | None = None if sandbox is not None else self._read_host_metadata()

    def for_sandbox(self, sandbox: Sandbox) -> FileStorage:
        """This storage routed through ``sandbox`` (itself when it was made with a sandbox already)."""
        if self._sandbox is not None:
            return self
        return FileStorage(str(self._artifact_dir), sandbox=sandbox)

    async def store(self, key: str, content: bytes, content_type: str = "text/plain") -> str:
        """Write the block to a new file; the reference is its file name."""
        types = await self._types()
        extension = ".txt" if content_type == "text/plain" else f".{content_type.split('/')[-1]}"
        with self._lock:
            self._counter += 1
            filename = _unique_name(self._counter, key) + extension
            types[filename] = content_type
            sidecar = json.dumps(types)
        if self._sandbox is not None:
            await self._sandbox.write_text(self._path(self._METADATA_FILE), sidecar)
            await self._sandbox.write_file(self._path(filename), content)
            return filename
        self._artifact_dir.mkdir(parents=True, exist_ok=True)
        (self._artifact_dir / self._METADATA_FILE).write_text(sidecar, encoding="utf-8")
        with (self._artifact_dir / filename).open("xb") as file:  # "x": never replace a file of someone else's
            file.write(content)
        return filename

    async def retrieve(self, reference: str) -> tuple[bytes, str]:
        """The block of a reference: the file name, its path in ``artifact_dir``, or its name without extension.

        Raises:
            KeyError: Not a file this storage recorded, or the file is gone.
        """
        types = await self._types()
        filename = self._resolve(reference, types)
        try:
            if self._sandbox is not None:
                content = await self._sandbox.read_file(self._path(filename))
            else:
                content = (self._artifact_dir / filename).read_bytes()
        except Exception as error:
            raise KeyError(f"Reference not found: {reference}") from error
        return content, types[filename]

    def _resolve(self, reference: str, types: dict[str, str]) -> str:
        not_found = KeyError(f"Reference not found: {reference}")
        if ".." in reference:
            raise not_found
        path = Path(reference)
        if len(path.parts) > 1:
            if path.parent.resolve() != self._artifact_dir.resolve():
                raise not_found
            reference = path.name
        if reference in types:
            return reference
        stems = [name for name in types if Path(name).stem == reference]
        if len(stems) != 1:
            raise not_found
        return stems[0]

    def _path(self, filename: str) -> str:
        return f"{str(self._artifact_dir).rstrip('/')}/{filename}"

    async def _types(self) -> dict[str, str]:
        if self._content_types is None:
            assert self._sandbox is not None
            try:
                loaded = json.loads(await self._sandbox.read_text(self._path(self._METADATA_FILE)))
            except Exception:  # no sidecar yet, or an unreadable one: nothing recorded
                loaded = {}
            self._content_types = _str_dict(loaded)
        return self._content_types

    def _read_host_metadata(self) -> dict[str, str]:
        try:
            return _str_dict(json.loads((self._artifact_dir / self._METADATA_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return {}


class S3Storage(_Locked):
    """Offloaded blocks as objects in an S3 bucket, the MIME type as the object's ``ContentType``.

    The reference is ``s3://<bucket>/<prefix><ms>_<n>_<key>``; only references in this bucket under this
    prefix are read back. Calls run in a worker thread. The boto3 client is made on first use in each process:
    a pickled copy (an agent shipped to a Ray host) makes its own from the session's region and the client
    config, with the host's credentials.

    Args:
        bucket: The bucket.
        prefix: A key prefix for the objects (a ``/`` is added).
        boto_session: The boto3 session to make the client from (default: a new one in ``region_name``).
        boto_client_config: A botocore ``Config`` for the client.
        region_name: The region of a new session (not used with ``boto_session``).

    Raises:
        ValueError: ``bucket`` is empty.
    """

    def __init__(self, bucket: str, prefix: str = "", boto_session: boto3.Session | None = None,
                 boto_client_config: BotocoreConfig | None = None, region_name: str | None = None) -> None:
        if not isinstance(bucket, str) or not bucket:
            raise ValueError(f"bucket must be a non-empty bucket name, got {bucket!r}")
        self._bucket = bucket
        stripped = prefix.strip("/")
        self._prefix = f"{stripped}/" if stripped else ""
        self._session = boto_session
        self._region_name = boto_session.region_name if boto_session is not None else region_name
        self._client_config = boto_client_config
        self._client: Any = None
        self._counter = 0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_session"] = state["_client"] = None  # neither pickles; the copy makes them from the region
        return state

    async def store(self, key: str, content: bytes, content_type: str = "text/plain") -> str:
        """Put the block as a new object; the reference is its ``s3://`` URI."""
        with self._lock:
            self._counter += 1
            object_key = self._prefix + _unique_name(self._counter, key)
        client = self._s3()
        await asyncio.to_thread(client.put_object, Bucket=self._bucket, Key=object_key, Body=content,
                                ContentType=content_type)
        return f"s3://{self._bucket}/{object_key}"

    async def retrieve(self, reference: str) -> tuple[bytes, str]:
        """The block of an ``s3://`` URI or an object key.

        Raises:
            KeyError: The object does not exist, or the reference is outside this bucket and prefix.
        """
        from botocore.exceptions import ClientError

        object_key = reference
        if reference.startswith("s3://"):
            object_key = reference.removeprefix(f"s3://{self._bucket}/")
            if object_key == reference:
                raise KeyError(f"Reference not found: {reference}")
        if not object_key.startswith(self._prefix):
            raise KeyError(f"Reference not found: {reference}")
        client = self._s3()
        try:
            response = await asyncio.to_thread(client.get_object, Bucket=self._bucket, Key=object_key)
            content: bytes = await asyncio.to_thread(response["Body"].read)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise KeyError(f"Reference not found: {reference}") from error
            raise
        return content, str(response.get("ContentType", "application/octet-stream"))

    def _s3(self) -> Any:
        with self._lock:
            if self._client is None:
                import boto3

                session = self._session or boto3.Session(region_name=self._region_name)
                self._client = session.client(service_name="s3", config=self._client_config)
            return self._client


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _str_dict(value: object) -> dict[str, str]:
    """The string entries of a loaded sidecar (anything else in it is ignored)."""
    if not isinstance(value, dict):
        return {}
    return {key: item for key, item in value.items() if isinstance(key, str) and isinstance(item, str)}
