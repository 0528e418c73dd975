"""S3 sessions against a real moto server process (not in-process patching)."""

from __future__ import annotations

import pickle
import uuid
from typing import Any

import boto3
import pytest

from ray_harness import Agent
from ray_harness.session import S3SessionManager
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.exceptions import SessionException
from tests.session.helpers import text_of

pytestmark = pytest.mark.services


def _session() -> Any:
    return boto3.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")


@pytest.fixture
def bucket(moto_endpoint: str) -> str:
    name = f"sessions-{uuid.uuid4().hex[:12]}"
    _session().client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=name)
    return name


def manager(endpoint: str, bucket: str, session_id: str = "s1", prefix: str = "team/a") -> S3SessionManager:
    return S3SessionManager(session_id, bucket, prefix=prefix, endpoint_url=endpoint, boto_session=_session())


def keys(endpoint: str, bucket: str) -> list[str]:
    listing = _session().client("s3", endpoint_url=endpoint).list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def test_persist_and_restore_through_s3(moto_endpoint: str, bucket: str) -> None:
    from ray_harness import tool

    @tool
    def shout(word: str) -> str:
        """Shout."""
        return word.upper()

    agent = Agent(ScriptedModel(tool_call("shout", {"word": "hi"}), text("HI")), tools=[shout],
                  session_manager=manager(moto_endpoint, bucket), state={"k": 1})
    agent("shout hi")
    assert keys(moto_endpoint, bucket) == [
        "team/a/session_s1/agents/agent_default/agent.json",
        *[f"team/a/session_s1/agents/agent_default/messages/message_{i}.json" for i in range(4)],
        "team/a/session_s1/session.json",
    ]
    restored = Agent(ScriptedModel(), tools=[shout], session_manager=manager(moto_endpoint, bucket))
    assert restored.messages == agent.messages
    assert restored.state.get("k") == 1


def test_rollback_deletes_objects(moto_endpoint: str, bucket: str) -> None:
    agent = Agent(ScriptedModel(text("ok"), RuntimeError("boom")), session_manager=manager(moto_endpoint, bucket),
                  retry_strategy=None)
    agent("one")
    with pytest.raises(RuntimeError):
        agent("two")
    messages = [key for key in keys(moto_endpoint, bucket) if "/messages/" in key]
    assert len(messages) == 2
    assert Agent(ScriptedModel(), session_manager=manager(moto_endpoint, bucket)).messages == agent.messages


def test_corrupted_object_names_the_s3_url(moto_endpoint: str, bucket: str) -> None:
    Agent(ScriptedModel(text("ok")), session_manager=manager(moto_endpoint, bucket))("hi")
    key = "team/a/session_s1/agents/agent_default/messages/message_1.json"
    client = _session().client("s3", endpoint_url=moto_endpoint)
    client.put_object(Bucket=bucket, Key=key, Body=b'{"schema_version": "1", "message_id": ')
    with pytest.raises(SessionException, match=f"s3://{bucket}/{key}"):
        Agent(ScriptedModel(), session_manager=manager(moto_endpoint, bucket))
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == b'{"schema_version": "1", "message_id": '


def test_multi_agent_state_agents_listing_and_delete(moto_endpoint: str, bucket: str) -> None:
    sessions = manager(moto_endpoint, bucket, prefix="")
    Agent(ScriptedModel(text("a")), agent_id="a1", session_manager=sessions)("x")
    Agent(ScriptedModel(text("b")), agent_id="a2", session_manager=sessions)("y")
    sessions.write_multi_agent_json({"node": "a1", "done": [1, 2]})
    assert manager(moto_endpoint, bucket, prefix="").read_multi_agent_json() == {"node": "a1", "done": [1, 2]}
    assert sessions.repository.list_agents("s1") == ["a1", "a2"]
    sessions.repository.delete_session("s1")
    assert keys(moto_endpoint, bucket) == []


def test_manager_pickles_without_its_client(moto_endpoint: str, bucket: str) -> None:
    original = manager(moto_endpoint, bucket)
    Agent(ScriptedModel(text("a")), session_manager=original)("x")
    original.repository.boto_session = None  # a boto3.Session does not pickle; credentials come from env
    clone = pickle.loads(pickle.dumps(original))
    assert clone.repository._client is None
    clone.repository.boto_session = _session()
    assert clone.repository.read_session("s1") is not None


def test_missing_bucket_is_a_session_error(moto_endpoint: str) -> None:
    with pytest.raises(SessionException, match="s3://no-such-bucket-here/"):
        manager(moto_endpoint, "no-such-bucket-here")


def test_text_survives(moto_endpoint: str, bucket: str) -> None:
    Agent(ScriptedModel(text("ünïcödé ✓")), session_manager=manager(moto_endpoint, bucket))("hi")
    restored = Agent(ScriptedModel(), session_manager=manager(moto_endpoint, bucket))
    assert text_of(restored.messages[-1]) == "ünïcödé ✓"


def test_a_second_writer_of_one_agent_is_refused_by_a_conditional_write(moto_endpoint: str, bucket: str) -> None:
    first = Agent(ScriptedModel(text("one")), session_manager=manager(moto_endpoint, bucket))
    second = Agent(ScriptedModel(text("other")), session_manager=manager(moto_endpoint, bucket))
    first("q1")
    before = keys(moto_endpoint, bucket)
    with pytest.raises(SessionException, match=r"already written .* by another writer"):
        second("q2")
    assert keys(moto_endpoint, bucket) == before
    restored = Agent(ScriptedModel(), session_manager=manager(moto_endpoint, bucket))
    assert [text_of(m) for m in restored.messages] == ["q1", "one"]


def test_objects_that_delete_objects_did_not_delete_are_a_session_error(moto_endpoint: str, bucket: str) -> None:
    sessions = manager(moto_endpoint, bucket)
    Agent(ScriptedModel(text("a")), session_manager=sessions)("x")
    real = sessions.repository.client

    class RefusingOne:
        """The real client, except that DeleteObjects reports one key as denied (as S3 does with HTTP 200)."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def delete_objects(self, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
            kept, *rest = Delete["Objects"]
            real.delete_objects(Bucket=Bucket, Delete={**Delete, "Objects": rest})
            return {"Errors": [{"Key": kept["Key"], "Code": "AccessDenied", "Message": "Access Denied"}]}

    sessions.repository._client = RefusingOne()
    with pytest.raises(SessionException, match=r"1 object\(s\) were not deleted.*AccessDenied"):
        sessions.repository.delete_session("s1")
    assert len(keys(moto_endpoint, bucket)) == 1
