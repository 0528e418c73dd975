"""Sessions in S3 (or any S3-compatible store): ``S3SessionRepository`` and ``S3SessionManager``.

The layout is the file layout under ``s3://<bucket>/<prefix>/``. Each record is one ``put_object``
(atomic in S3). The boto3 client is created lazily and is not pickled, so a manager ships into a
Ray actor and reconnects there (credentials then come from the actor's environment unless a
picklable ``boto_session`` is given).
"""

from __future__ import annotations

from typing import Any

from ray_harness.session.manager import RepositorySessionManager
from ray_harness.session.repository import BlobSessionRepository
from ray_harness.types.exceptions import SessionException

__all__ = ("S3SessionManager", "S3SessionRepository")


class S3SessionRepository(BlobSessionRepository):
    """Session records as JSON objects in ``bucket`` under ``prefix``."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint_url: str | None = None,
                 boto_session: Any = None, region_name: str | None = None,
                 boto_client_config: Any = None, client: Any = None) -> None:
        if not isinstance(bucket, str) or not bucket:
            raise ValueError(f"bucket must be a non-empty string, got {bucket!r}")
        # Strands' S3SessionManager takes (prefix, boto_session, boto_client_config, region_name, endpoint_url) in
        # that order; ours puts endpoint_url fourth. A boto session or config passed by position must not become
        # the endpoint silently.
        for name, value in (("endpoint_url", endpoint_url), ("region_name", region_name)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a string or None, got {type(value).__name__}; "
                                "pass boto_session=, boto_client_config= and region_name= by keyword "
                                "(the positional order differs from Strands' S3SessionManager)")
        if boto_session is not None and not callable(getattr(boto_session, "client", None)):
            raise TypeError(f"boto_session must be a boto3.Session, got {type(boto_session).__name__}; pass "
                            "boto_client_config= and region_name= by keyword (the positional order differs from "
                            "Strands' S3SessionManager)")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url
        self.boto_session = boto_session
        self.region_name = region_name
        self.boto_client_config = boto_client_config
        self._client = client

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None  # a live client holds sockets and locks
        return state

    @property
    def client(self) -> Any:
        """The boto3 S3 client, built on first use (so the repository pickles as configuration)."""
        if self._client is None:
            import boto3  # lazily: importing boto3 costs ~0.3 s

            session = self.boto_session or boto3.Session(region_name=self.region_name)
            self._client = session.client("s3", endpoint_url=self.endpoint_url, region_name=self.region_name,
                                          config=self.boto_client_config)
        return self._client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _location(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def _fail(self, action: str, key: str, error: Exception) -> SessionException:
        return SessionException(f"cannot {action} {self._location(key)}: {error}")

    def _read(self, key: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            return response["Body"].read()  # type: ignore[no-any-return]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._fail("read", key, error) from None
        except BotoCoreError as error:
            raise self._fail("read", key, error) from None

    def _write(self, key: str, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, ContentType="application/json")
        except (ClientError, BotoCoreError) as error:
            raise self._fail("write", key, error) from None

    def _create(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, ContentType="application/json",
                                   IfNoneMatch="*")  # S3's conditional write: refused if the key exists
            return True
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            if code == "NotImplemented":  # an S3-compatible store without conditional writes
                return super()._create(key, data)
            raise self._fail("write", key, error) from None
        except BotoCoreError as error:
            raise self._fail("write", key, error) from None

    def _list_dir(self, key: str) -> list[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        base = self._key(key) + "/"
        names: list[str] = []
        try:
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=base, Delimiter="/"):
                names.extend(item["Key"][len(base):] for item in page.get("Contents", []))
                names.extend(item["Prefix"][len(base):].rstrip("/") for item in page.get("CommonPrefixes", []))
        except (ClientError, BotoCoreError) as error:
            raise self._fail("list", key, error) from None
        return names

    def _all_keys(self, key: str) -> list[str]:
        base = self._key(key) + "/"
        paginator = self.client.get_paginator("list_objects_v2")
        return [item["Key"] for page in paginator.paginate(Bucket=self.bucket, Prefix=base)
                for item in page.get("Contents", [])]

    def _delete(self, key: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as error:
            raise self._fail("delete", key, error) from None

    def _delete_tree(self, key: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            keys = self._all_keys(key)
            for start in range(0, len(keys), 1000):  # the DeleteObjects limit
                batch = [{"Key": item} for item in keys[start:start + 1000]]
                response = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
                self._check_deleted(key, response)
        except (ClientError, BotoCoreError) as error:
            raise self._fail("delete", key, error) from None

    def _check_deleted(self, key: str, response: Any) -> None:
        """DeleteObjects answers 200 even when single keys fail (e.g. ``AccessDenied``); they are in ``Errors``."""
        errors = response.get("Errors") if isinstance(response, dict) else None
        if errors:
            first = errors[0]
            raise SessionException(
                f"cannot delete {self._location(key)}: {len(errors)} object(s) were not deleted, e.g. "
                f"s3://{self.bucket}/{first.get('Key')}: {first.get('Code')} {first.get('Message', '')}".rstrip())


class S3SessionManager(RepositorySessionManager):
    """Persist agents of one session in S3.

    Args:
        session_id: The session; no path separators or ``..``.
        bucket: An existing bucket.
        prefix: Key prefix inside the bucket.
        endpoint_url: For S3-compatible stores (MinIO, moto, SeaweedFS).
        boto_session: A ``boto3.Session`` (credentials, profile); default: a new one.
        region_name: Region of the client.
        boto_client_config: A ``botocore.config.Config`` for the client.
    """

    def __init__(self, session_id: str, bucket: str, prefix: str = "", endpoint_url: str | None = None,
                 boto_session: Any = None, region_name: str | None = None, *,
                 boto_client_config: Any = None) -> None:
        super().__init__(session_id, S3SessionRepository(
            bucket, prefix, endpoint_url=endpoint_url, boto_session=boto_session, region_name=region_name,
            boto_client_config=boto_client_config))
