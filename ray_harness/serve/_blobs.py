"""Where a task store keeps its bytes: blob repositories by URL, and compare-and-swap of one blob.

A task store URL names a repository of ray_harness.session (``file://`` or ``s3://``) or, for ``None``, one
in this process's memory. :class:`_Swap` writes a blob as a function of its current bytes without losing a
concurrent writer's update: a lock file per blob for ``file://``, a conditional ``PutObject`` for S3.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from a2a.server.cluster import ConcurrentTaskModificationError

from ray_harness.session.file import FileSessionRepository
from ray_harness.session.repository import BlobSessionRepository
from ray_harness.session.s3 import S3SessionRepository

__all__ = ("MemoryRepository", "open_repository", "replace_file")


class MemoryRepository(BlobSessionRepository):
    """Blobs in this process only: ``task_store=None`` (one replica; nothing survives it)."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def _read(self, key: str) -> bytes | None:
        with self._lock:
            return self._blobs.get(key)

    def _write(self, key: str, data: bytes) -> None:
        with self._lock:
            self._blobs[key] = data

    def _list_dir(self, key: str) -> list[str]:
        prefix = key.rstrip("/") + "/"
        with self._lock:
            return sorted({name[len(prefix):].split("/", 1)[0] for name in self._blobs if name.startswith(prefix)})

    def _delete(self, key: str) -> None:
        with self._lock:
            self._blobs.pop(key, None)

    def _delete_tree(self, key: str) -> None:
        prefix = key.rstrip("/") + "/"
        with self._lock:
            for name in [name for name in self._blobs if name.startswith(prefix)]:
                del self._blobs[name]

    def _location(self, key: str) -> str:
        return f"memory://{key}"


def open_repository(url: str | None, options: dict[str, Any] | None = None) -> BlobSessionRepository:
    """The blob repository behind a task store URL.

    Args:
        url: ``file:///abs/dir``, ``s3://bucket/prefix`` or None (in memory).
        options: For S3: ``endpoint_url``, ``region_name``, ``aws_access_key_id``, ``aws_secret_access_key``,
            ``aws_session_token``, ``profile_name``.
    """
    options = dict(options or {})
    if url is None:
        if options:
            raise ValueError(f"task_store_options {sorted(options)} given without a task_store URL")
        return MemoryRepository()
    if not isinstance(url, str):
        raise TypeError(f"task_store must be a 'file://' or 's3://' URL string, got {url!r}")
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise ValueError(f"task_store {url!r}: a file store must be an absolute path, e.g. file:///var/lib/tasks")
        if options:
            raise ValueError(f"task_store_options {sorted(options)} do not apply to a file:// store")
        return FileSessionRepository(parsed.path)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ValueError(f"task_store {url!r}: an S3 store needs a bucket, e.g. s3://bucket/prefix")
        return _s3_repository(parsed.netloc, parsed.path.strip("/"), options)
    raise ValueError(f"task_store {url!r} must start with file:// or s3://")


_S3_SESSION_KEYS = {"aws_access_key_id", "aws_secret_access_key", "aws_session_token", "profile_name"}


def _s3_repository(bucket: str, prefix: str, options: dict[str, Any]) -> S3SessionRepository:
    unknown = sorted(set(options) - _S3_SESSION_KEYS - {"endpoint_url", "region_name"})
    if unknown:
        raise ValueError(f"task_store_options: unknown key(s) {unknown}; allowed: endpoint_url, region_name, "
                         f"{', '.join(sorted(_S3_SESSION_KEYS))}")
    session = None
    credentials = {key: options[key] for key in _S3_SESSION_KEYS if options.get(key) is not None}
    if credentials:
        import boto3

        session = boto3.Session(region_name=options.get("region_name"), **credentials)
    return S3SessionRepository(bucket, prefix, endpoint_url=options.get("endpoint_url"), boto_session=session,
                               region_name=options.get("region_name"))


class _Swap:
    """Compare-and-swap of one blob: ``update(key, fn)`` writes ``fn(current)`` unless another writer raced."""

    def __init__(self, repo: BlobSessionRepository) -> None:
        self.repo = repo
        self._lock = threading.Lock()

    def update(self, key: str, fn: Callable[[bytes | None], bytes], *, durable: bool = True) -> None:
        """``durable=False`` (files only) skips the fsync: the write survives a killed process, not a power cut."""
        repo = self.repo
        if isinstance(repo, FileSessionRepository):
            self._update_file(repo, key, fn, durable)
        elif isinstance(repo, S3SessionRepository):
            self._update_s3(repo, key, fn)
        else:
            with self._lock:
                repo._write(key, fn(repo._read(key)))

    def _update_file(self, repo: FileSessionRepository, key: str, fn: Callable[[bytes | None], bytes],
                     durable: bool) -> None:
        import fcntl

        path = repo._path(key)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # One lock file per task: replicas on this machine (or a shared file system with POSIX locks).
        with open(f"{path}.lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                data = fn(repo._read(key))
                if durable:
                    repo._write(key, data)
                else:
                    replace_file(path, data)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _update_s3(self, repo: S3SessionRepository, key: str, fn: Callable[[bytes | None], bytes]) -> None:
        from botocore.exceptions import ClientError

        client, bucket, object_key = repo.client, repo.bucket, repo._key(key)
        for _ in range(8):
            try:
                response = client.get_object(Bucket=bucket, Key=object_key)
                current, condition = response["Body"].read(), {"IfMatch": response["ETag"]}
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
                    raise
                current, condition = None, {"IfNoneMatch": "*"}
            data = fn(current)
            try:
                client.put_object(Bucket=bucket, Key=object_key, Body=data, ContentType="application/json",
                                  **condition)
                return
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code")
                if code not in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                    raise
        raise ConcurrentTaskModificationError(key)


def replace_file(path: Path, data: bytes) -> None:
    """Atomic replace without fsync: readers see the old or the new bytes; a killed process leaves no half file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(descriptor, data)
    finally:
        os.close(descriptor)
    os.replace(temp, path)
