"""A Strands program's session setup either works the same or fails at once with a message that says why."""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness.session import RepositorySessionManager, S3SessionManager
from ray_harness.session.s3 import S3SessionRepository


class _FakeBotoSession:
    """Stands in for a ``boto3.Session``: never used, only passed in the wrong position."""


def test_strands_positional_boto_session_is_refused_by_name() -> None:
    # Strands' order is (session_id, bucket, prefix, boto_session, boto_client_config, region_name, endpoint_url);
    # ours puts endpoint_url fourth, so a positional boto session would silently become the endpoint.
    with pytest.raises(TypeError, match=r"endpoint_url must be a string or None.*boto_session="):
        S3SessionManager("s1", "bucket", "prefix", _FakeBotoSession())


def test_strands_positional_client_config_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="boto_session"):
        S3SessionManager("s1", "bucket", "prefix", None, object())


def test_region_name_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="region_name must be a string or None"):
        S3SessionRepository("bucket", region_name=object())  # type: ignore[arg-type]


def test_keyword_arguments_in_strands_order_still_work() -> None:
    manager = S3SessionRepository("bucket", "p", boto_session=None, boto_client_config=None, region_name="eu-west-1",
                                  endpoint_url="http://localhost:1")
    assert (manager.region_name, manager.endpoint_url) == ("eu-west-1", "http://localhost:1")


class _StrandsShapedRepository:
    """A custom repository written against Strands' interface (create_*/read_*/update_*)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def create_session(self, session: Any, **kwargs: Any) -> Any:
        self.calls.append("create_session")
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Any:
        self.calls.append("read_session")
        return None

    def create_agent(self, session_id: str, session_agent: Any, **kwargs: Any) -> None:
        self.calls.append("create_agent")

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> Any:
        return None

    def update_agent(self, session_id: str, session_agent: Any, **kwargs: Any) -> None:
        pass

    def create_message(self, session_id: str, agent_id: str, session_message: Any, **kwargs: Any) -> None:
        pass

    def read_message(self, session_id: str, agent_id: str, message_id: int, **kwargs: Any) -> Any:
        return None

    def update_message(self, session_id: str, agent_id: str, session_message: Any, **kwargs: Any) -> None:
        pass

    def list_messages(self, session_id: str, agent_id: str, limit: int | None = None, offset: int = 0,
                      **kwargs: Any) -> list[Any]:
        return []


def test_strands_shaped_repository_is_refused_before_it_is_used() -> None:
    repository = _StrandsShapedRepository()
    with pytest.raises(TypeError, match=r"Strands.*create_session.*write_session") as caught:
        RepositorySessionManager("s1", repository)  # type: ignore[arg-type]
    assert "ray_harness.session.SessionRepository" in str(caught.value)
    assert repository.calls == []  # refused before a record was read or written


def test_object_without_the_interface_is_refused_naming_the_missing_methods() -> None:
    with pytest.raises(TypeError, match=r"repository must implement.*write_session"):
        RepositorySessionManager("s1", object())  # type: ignore[arg-type]
