"""Where a task store keeps its bytes: blob repositories by URL, and compare-and-swap of one blob.

A task store URL names a repository of ray_harness.session (``file://`` or ``s3://``) or, for ``None``, one
in this process's memory. :class:`_Swap` writes a blob as a function of its current bytes without losing a
concurrent writer's update: a lock file per blob for ``file://``, a conditional ``PutObject`` for S3.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from random import random as _unit_random
from typing import Any
from urllib.parse import urlparse

from a2a.server.cluster import ConcurrentTaskModificationError

from ray_harness.session.file import FileSessionRepository
from ray_harness.session.repository import BlobSessionRepository
from ray_harness.session.s3 import S3SessionRepository
from ray_harness.types.exceptions import RayHarnessError

__all__ = ("MemoryRepository", "StoreContentionError", "open_repository", "replace_file")


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


_ATTEMPTS = 8
"""Conditional writes of one S3 blob before a compare-and-swap gives up (lost races, not failed requests)."""
_FIRST_DELAY = 0.02
_MAX_DELAY = 1.0
_CONFLICT = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")
_ABSENT = ("NoSuchKey", "404")


class StoreContentionError(RayHarnessError, ConcurrentTaskModificationError):
    """A compare-and-swap of one blob lost the race to other writers on every attempt (S3 stores)."""

    def __init__(self, key: str, location: str, attempts: int) -> None:
        super().__init__(key)
        self.location = location
        self.attempts = attempts
        self.args = (f"could not write {key} at {location}: another replica wrote it first on each of "
                     f"{attempts} attempts (conditional PutObject, with backoff); too many replicas write it at "
                     f"once",)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.task_id, self.location, self.attempts)


def _error_code(error: Exception) -> str | None:
    code = getattr(error, "response", {}).get("Error", {}).get("Code")
    return code if isinstance(code, str) else None


class _Swap:
    """Atomic operations on one blob: compare-and-swap, conditional delete, reads naming the version read.

    ``update(key, fn)`` writes ``fn(current)`` unless another writer raced: a lock file per blob for ``file://``,
    a conditional ``PutObject`` for S3, retried after a lost race with jittered exponential backoff (so replicas
    that collided come back apart) up to ``attempts`` times, then :class:`StoreContentionError`.
    """

    def __init__(self, repo: BlobSessionRepository, *, sleep: Callable[[float], Any] = time.sleep,
                 random: Callable[[], float] = _unit_random, attempts: int = _ATTEMPTS) -> None:
        self.repo = repo
        self._lock = threading.Lock()
        self._sleep = sleep
        self._random = random
        self.attempts = attempts

    def backoff(self, attempt: int) -> None:
        """Wait before retry ``attempt`` (0 first): half to all of ``min(1 s, 20 ms * 2**attempt)``."""
        self._sleep(min(_MAX_DELAY, _FIRST_DELAY * 2 ** attempt) * (0.5 + self._random() / 2))

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
        path = repo._path(key)
        with _file_lock(path):
            data = fn(repo._read(key))
            if durable:
                repo._write(key, data)
            else:
                replace_file(path, data)

    def _update_s3(self, repo: S3SessionRepository, key: str, fn: Callable[[bytes | None], bytes]) -> None:
        from botocore.exceptions import ClientError

        client, bucket, object_key = repo.client, repo.bucket, repo._key(key)
        for attempt in range(self.attempts):
            if attempt:
                self.backoff(attempt - 1)
            current, etag = self._read_s3(repo, key)
            condition = {"IfNoneMatch": "*"} if etag is None else {"IfMatch": etag}
            data = fn(current)
            try:
                client.put_object(Bucket=bucket, Key=object_key, Body=data, ContentType="application/json",
                                  **condition)
                return
            except ClientError as error:
                if _error_code(error) not in _CONFLICT:
                    raise
        raise StoreContentionError(key, repo._location(key), self.attempts)

    @staticmethod
    def _read_s3(repo: S3SessionRepository, key: str) -> tuple[bytes | None, str | None]:
        from botocore.exceptions import ClientError

        try:
            response = repo.client.get_object(Bucket=repo.bucket, Key=repo._key(key))
        except ClientError as error:
            if _error_code(error) not in _ABSENT:
                raise
            return None, None
        return response["Body"].read(), str(response["ETag"])

    def read(self, key: str) -> tuple[bytes | None, str | None]:
        """The bytes at ``key`` and a token naming that version of them, for :meth:`delete_if` (None, None: absent)."""
        if isinstance(self.repo, S3SessionRepository):
            return self._read_s3(self.repo, key)
        raw = self.repo._read(key)
        return raw, None if raw is None else hashlib.sha256(raw).hexdigest()

    def delete_if(self, key: str, token: str) -> bool:
        """Delete ``key`` if it still holds the version ``token`` names; False (and kept) when it changed since.

        S3: ``DeleteObject`` with ``If-Match``; files: under the blob's lock file, which goes with it.
        """
        repo = self.repo
        if isinstance(repo, S3SessionRepository):
            from botocore.exceptions import ClientError

            try:
                repo.client.delete_object(Bucket=repo.bucket, Key=repo._key(key), IfMatch=token)
            except ClientError as error:
                if _error_code(error) in _CONFLICT:
                    return False
                if _error_code(error) == "NotImplemented":  # a store without conditional deletes: as before them
                    repo._delete(key)
                elif _error_code(error) not in _ABSENT:
                    raise
            return True
        if isinstance(repo, FileSessionRepository):
            with _file_lock(repo._path(key), remove=True):
                return self._delete_unchanged(key, token)
        with self._lock:
            return self._delete_unchanged(key, token)

    def _delete_unchanged(self, key: str, token: str) -> bool:
        raw = self.repo._read(key)
        if raw is not None and hashlib.sha256(raw).hexdigest() != token:
            return False
        self.repo._delete(key)
        return True

    def drop_lock(self, key: str) -> None:
        """Remove the lock file of ``key`` (file stores) once ``key`` has no writer.

        Taken first, so a writer waiting on it sees it went and takes the new one: never two writers at once.
        """
        if isinstance(self.repo, FileSessionRepository) and os.path.exists(f"{self.repo._path(key)}.lock"):
            with _file_lock(self.repo._path(key), remove=True):
                pass

    def modified(self, folder: str) -> dict[str, float]:
        """The blobs directly in ``folder`` and when each was last written (Unix time; 0 for the memory store)."""
        repo = self.repo
        if isinstance(repo, FileSessionRepository):
            found: dict[str, float] = {}
            with contextlib.suppress(FileNotFoundError), os.scandir(repo._path(folder)) as entries:
                for entry in entries:
                    with contextlib.suppress(FileNotFoundError):  # deleted since the listing
                        if entry.is_file() and not entry.name.startswith("."):
                            found[entry.name] = entry.stat().st_mtime
            return found
        if isinstance(repo, S3SessionRepository):
            base = repo._key(folder) + "/"
            pages = repo.client.get_paginator("list_objects_v2").paginate(Bucket=repo.bucket, Prefix=base,
                                                                           Delimiter="/")
            return {item["Key"][len(base):]: item["LastModified"].timestamp()
                    for page in pages for item in page.get("Contents", [])}
        return dict.fromkeys(repo._list_dir(folder), 0.0)


@contextlib.contextmanager
def _file_lock(path: Path, *, remove: bool = False) -> Iterator[None]:
    """Hold ``path``'s lock file (replicas on this machine, or a shared file system with POSIX locks).

    ``remove=True`` unlinks the lock file before letting go. Whoever waited on it then holds a lock file that
    is no longer there, sees so and takes the new one: two writers never hold two lock files of one blob.
    """
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"{path}.lock"
    while True:
        descriptor = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            try:
                current = os.stat(name).st_ino == os.fstat(descriptor).st_ino
            except FileNotFoundError:
                current = False
            if current:
                try:
                    yield
                finally:
                    if remove:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(name)
                return
        finally:
            os.close(descriptor)  # and with it the lock


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
