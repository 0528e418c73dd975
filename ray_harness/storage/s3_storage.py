"""``S3Storage``: each key an object in an S3 bucket, under an optional key prefix."""

from __future__ import annotations

import asyncio
import builtins
import copy
import threading
from typing import TYPE_CHECKING, Any

from ray_harness.storage._common import check_data, check_strategy, index_written, search_with
from ray_harness.storage.storage import _NAMESPACED, _normalize_key, _normalize_prefix, _scope
from ray_harness.types.exceptions import StorageError

if TYPE_CHECKING:
    from ray_harness.storage.search.types import SearchStrategy
    from ray_harness.storage.storage import StorageSearchResult

__all__ = ("S3Storage",)

_PAGE = 1000
_USER_AGENT = "ray-harness"


class S3Storage:
    """Each key an object ``<prefix><key>`` in ``bucket``; calls run in a worker thread.

    boto3 is imported and the client made on first use, in each process: a pickled copy (an agent shipped to a
    Ray host) makes its own client, from the region (of the session given, if one was) and the client config,
    with that host's credentials. Namespaces share their root's client.

    Example::

        storage = S3Storage("my-bucket", prefix="agents/")
        await storage.write("session/abc/state.json", data)

    Args:
        bucket: The bucket.
        prefix: A key prefix for every object (a ``/`` is added).
        region_name: The region of the session made for the client.
        boto_session: A boto3 session to make the client from (not with ``region_name``).
        boto_client_config: A botocore ``Config`` for the client.
        search_strategy: What ``search`` uses (default: keyword scoring); each ``write`` is indexed by it.

    Raises:
        StorageError: Both ``region_name`` and ``boto_session`` are given.
        ValueError: ``bucket`` is not a non-empty string.
        TypeError: ``search_strategy`` has no ``index``/``search`` methods.
    """

    def __init__(self, bucket: str, *, prefix: str = "", region_name: str | None = None,
                 boto_session: Any = None, boto_client_config: Any = None,
                 search_strategy: SearchStrategy[S3Storage] | None = None) -> None:
        if region_name is not None and boto_session is not None:
            raise StorageError("Cannot specify both region_name and boto_session")
        if not isinstance(bucket, str) or not bucket:
            raise ValueError(f"bucket must be a non-empty bucket name, got {bucket!r}")
        check_strategy(search_strategy)
        self._bucket = bucket
        self._prefix = _scope(prefix)
        self._region_name = region_name
        self._boto_session = boto_session
        self._boto_client_config = boto_client_config
        self._search_strategy = search_strategy
        self._client: Any = None
        self._root: S3Storage | None = None  # a namespace's client is its root's
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if state["_boto_session"] is not None:  # a session does not pickle: the copy keeps its region
            state["_region_name"] = state["_boto_session"].region_name
        state["_boto_session"] = state["_client"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def bucket(self) -> str:
        """The bucket."""
        return self._bucket

    @property
    def prefix(self) -> str:
        """The key prefix of every object (with its trailing ``/``), ``""`` for none."""
        return self._prefix

    async def write(self, key: str, data: bytes) -> None:
        """Put ``data`` as the key's object.

        Raises:
            StorageError: The key is invalid, the put failed, or the search strategy failed to index it.
        """
        normalized = _normalize_key(key)
        value = check_data(data)
        client = self._get_client()
        try:
            await asyncio.to_thread(client.put_object, Bucket=self._bucket, Key=self._prefix + normalized,
                                    Body=value)
        except Exception as error:
            raise StorageError(f"Failed to write '{key}' to S3") from error
        await index_written(self, self._search_strategy, key, normalized, value)

    async def read(self, key: str) -> bytes | None:
        """The key's object, or ``None`` if there is none.

        Raises:
            StorageError: The key is invalid, or the get failed otherwise.
        """
        normalized = _normalize_key(key)
        client = self._get_client()
        try:
            response = await asyncio.to_thread(client.get_object, Bucket=self._bucket, Key=self._prefix + normalized)
            body: bytes = await asyncio.to_thread(response["Body"].read)
        except Exception as error:
            if _error_code(error) in ("NoSuchKey", "404"):
                return None
            raise StorageError(f"Failed to read '{key}' from S3") from error
        return body

    async def delete(self, key: str) -> None:
        """Delete the key's object (S3 reports no error for a missing one).

        Raises:
            StorageError: The key is invalid, or the delete failed.
        """
        normalized = _normalize_key(key)
        client = self._get_client()
        try:
            await asyncio.to_thread(client.delete_object, Bucket=self._bucket, Key=self._prefix + normalized)
        except Exception as error:
            raise StorageError(f"Failed to delete '{key}' from S3") from error

    async def list(self, query: str = "") -> builtins.list[str]:
        """The keys starting with the prefix ``query`` (all for ``""``), sorted, without the storage's prefix.

        Raises:
            StorageError: The prefix is invalid, or listing failed.
        """
        wanted = self._prefix + _normalize_prefix(query)
        client = self._get_client()
        try:
            return await asyncio.to_thread(self._list_pages, client, wanted)
        except Exception as error:
            raise StorageError(f"Failed to list keys with prefix '{query}' from S3") from error

    async def search(self, query: str) -> builtins.list[StorageSearchResult]:
        """The entries ranked for ``query`` by the search strategy (keyword scoring by default)."""
        return await search_with(self, self._search_strategy, query)

    def namespace(self, prefix: str) -> S3Storage:
        """This storage's objects under ``prefix`` as an ``S3Storage``, sharing its client and strategy.

        Its ``list`` and ``search`` ask S3 only for objects under the prefix, and score keys without it. A
        shared strategy that keeps an index gets keys relative to the prefix (see ``SearchStrategy.index``).
        """
        # A shallow copy keeps a subclass's type and attributes; the client always comes from the root.
        scoped = copy.copy(self)
        scoped._prefix = self._prefix + _scope(prefix)
        scoped._root = self._root or self
        scoped._namespaced = _NAMESPACED  # type: ignore[attr-defined]
        return scoped

    def __repr__(self) -> str:
        return f"S3Storage({self._bucket!r}, prefix={self._prefix!r})"

    def _list_pages(self, client: Any, wanted: str) -> builtins.list[str]:
        keys: builtins.list[str] = []
        paging: dict[str, Any] = {}
        while True:
            page = client.list_objects_v2(Bucket=self._bucket, Prefix=wanted, MaxKeys=_PAGE, **paging)
            keys.extend(item["Key"][len(self._prefix):] for item in page.get("Contents", ()))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return sorted(keys)
            paging = {"ContinuationToken": token}

    def _get_client(self) -> Any:
        if self._root is not None:
            return self._root._get_client()
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def _make_client(self) -> Any:
        import boto3
        from botocore.config import Config

        config = self._boto_client_config
        if config is None:
            config = Config(user_agent_extra=_USER_AGENT)
        elif not getattr(config, "user_agent_extra", None):
            config = config.merge(Config(user_agent_extra=_USER_AGENT))
        session = self._boto_session or boto3.Session(region_name=self._region_name)
        return session.client("s3", config=config)


def _error_code(error: Exception) -> str | None:
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return code if isinstance(code, str) else None
