"""Provider tests: the official clients against local servers speaking the real wire protocols.

No Ray here: any ``import ray`` fails, as in tests/unit.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from ray_harness.models.base import Model
from tests.providers.fake_servers import AnthropicServer, BedrockServer, FakeServer, OpenAIServer


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)


@pytest.fixture(autouse=True)
def _no_real_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Nothing in these tests may reach a real provider or pick up the developer's keys."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE",
                 "OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_BASE_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "anthropic-config"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _serve(server: FakeServer) -> Iterator[FakeServer]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def _anthropic_server() -> Iterator[FakeServer]:
    yield from _serve(AnthropicServer())


@pytest.fixture(scope="session")
def _openai_server() -> Iterator[FakeServer]:
    yield from _serve(OpenAIServer())


@pytest.fixture(scope="session")
def _bedrock_server() -> Iterator[FakeServer]:
    yield from _serve(BedrockServer())


@pytest.fixture
def anthropic_server(_anthropic_server: AnthropicServer) -> Iterator[AnthropicServer]:
    _anthropic_server.reset()
    yield _anthropic_server
    assert not _anthropic_server.replies, "scripted replies were never requested"


@pytest.fixture
def openai_server(_openai_server: OpenAIServer) -> Iterator[OpenAIServer]:
    _openai_server.reset()
    yield _openai_server
    assert not _openai_server.replies, "scripted replies were never requested"


@pytest.fixture
def bedrock_server(_bedrock_server: BedrockServer) -> Iterator[BedrockServer]:
    _bedrock_server.reset()
    yield _bedrock_server
    assert not _bedrock_server.replies, "scripted replies were never requested"


def anthropic_model(server: AnthropicServer, **kwargs: Any) -> Model:
    from ray_harness.models.anthropic import AnthropicModel

    client_args = {"base_url": server.base_url(), "api_key": "sk-ant-test", "max_retries": 0,
                   **kwargs.pop("client_args", {})}
    return AnthropicModel(kwargs.pop("model_id", "claude-test"), client_args=client_args, **kwargs)


def openai_model(server: OpenAIServer, **kwargs: Any) -> Model:
    from ray_harness.models.openai import OpenAIModel

    client_args = {"base_url": server.base_url(), "api_key": "sk-test", "max_retries": 0,
                   **kwargs.pop("client_args", {})}
    return OpenAIModel(kwargs.pop("model_id", "gpt-test"), client_args=client_args, **kwargs)


_BOTO_SESSION: Any = None


def bedrock_model(server: BedrockServer, **kwargs: Any) -> Model:
    import boto3
    from botocore.config import Config

    from ray_harness.models.bedrock import BedrockModel

    global _BOTO_SESSION
    if _BOTO_SESSION is None:  # one session for all tests: it caches boto3's parsed service model (~0.3 s each)
        _BOTO_SESSION = boto3.Session(aws_access_key_id="AKIDTEST", aws_secret_access_key="secret",
                                      region_name="us-east-1")
    session = kwargs.pop("boto_session", None) or _BOTO_SESSION
    return BedrockModel(kwargs.pop("model_id", "anthropic.claude-test-v1:0"), endpoint_url=server.endpoint_url(),
                        boto_session=session,
                        boto_client_config=Config(retries={"total_max_attempts": 1, "mode": "standard"}), **kwargs)


@dataclass
class Backend:
    """One provider under the contract suite: its server, a model factory, and readers for what it was sent."""

    name: str
    server: FakeServer
    make: Callable[..., Model]

    def model(self, **kwargs: Any) -> Model:
        return self.make(self.server, **kwargs)

    def sent_system(self, body: dict[str, Any]) -> str | None:
        if self.name == "anthropic":
            return body.get("system")
        if self.name == "openai":
            first = body["messages"][0]
            return first["content"] if first["role"] == "system" else None
        return body["system"][0]["text"] if body.get("system") else None

    def sent_tool_names(self, body: dict[str, Any]) -> list[str]:
        if self.name == "anthropic":
            return [spec["name"] for spec in body.get("tools", [])]
        if self.name == "openai":
            return [spec["function"]["name"] for spec in body.get("tools", [])]
        return [spec["toolSpec"]["name"] for spec in body.get("toolConfig", {}).get("tools", [])]

    def sent_tool_choice(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """What the request forced, translated back to the Converse form."""
        if self.name == "anthropic":
            choice = body.get("tool_choice")
            if choice is None:
                return None
            return {"tool": {"name": choice["name"]}} if choice["type"] == "tool" else {choice["type"]: {}}
        if self.name == "openai":
            choice = body.get("tool_choice")
            if choice is None:
                return None
            if isinstance(choice, dict):
                return {"tool": {"name": choice["function"]["name"]}}
            return {"any": {}} if choice == "required" else {choice: {}}
        return body.get("toolConfig", {}).get("toolChoice")

    def sent_tool_result(self, body: dict[str, Any], use_id: str) -> str:
        """The text of the tool result for ``use_id`` in the request."""
        if self.name == "openai":
            for message in body["messages"]:
                if message["role"] == "tool" and message["tool_call_id"] == use_id:
                    return str(message["content"])
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if self.name == "anthropic" and block.get("type") == "tool_result" and block["tool_use_id"] == use_id:
                    return "".join(part.get("text", "") for part in block["content"])
                if self.name == "bedrock" and "toolResult" in block and block["toolResult"]["toolUseId"] == use_id:
                    return "".join(part.get("text", "") for part in block["toolResult"]["content"])
        raise AssertionError(f"no tool result for {use_id} in {body['messages']}")


@pytest.fixture(params=["anthropic", "openai", "bedrock"])
def backend(request: pytest.FixtureRequest) -> Backend:
    server = request.getfixturevalue(f"{request.param}_server")
    make = {"anthropic": anthropic_model, "openai": openai_model, "bedrock": bedrock_model}[request.param]
    return Backend(request.param, server, make)
