"""Strands' ``OpenAIModel(bedrock_mantle_config=...)``: Bedrock's OpenAI-compatible endpoints with minted tokens.

The official ``openai`` client sends to the Bedrock host; a transport hands the request to the local OpenAI server
unchanged (path, headers, body), so the test sees what Bedrock would receive.
"""

from __future__ import annotations

import base64
import pickle
import urllib.parse
from datetime import timedelta
from typing import Any

import boto3
import httpx
import pytest

from ray_harness.models.openai import OpenAIModel
from ray_harness.types.exceptions import ModelConfigurationError
from tests.providers.fake_servers import OpenAIServer, text

HI = [{"role": "user", "content": [{"text": "hi"}]}]


class ToLocal(httpx.AsyncHTTPTransport):
    """Sends every request to the local server, keeping its path; records the host it was meant for."""

    def __init__(self, server: OpenAIServer) -> None:
        super().__init__()
        self.port = server.port
        self.hosts: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.hosts.append(request.url.host)
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self.port)
        return await super().handle_async_request(request)


@pytest.fixture
def aws_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDMANTLETEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


def mantle_model(server: OpenAIServer, model_id: str, config: dict[str, Any]) -> tuple[OpenAIModel, ToLocal]:
    transport = ToLocal(server)
    client_args = {"http_client": httpx.AsyncClient(transport=transport), "max_retries": 0}
    return OpenAIModel(model_id, client_args=client_args, bedrock_mantle_config=config), transport


def presigned(authorization: str) -> dict[str, Any]:
    """What a Bedrock API key holds: a SigV4-presigned CallWithBearerToken request."""
    scheme, _, token = authorization.partition(" ")
    assert scheme == "Bearer" and token.startswith("bedrock-api-key-")
    url = base64.b64decode(token.removeprefix("bedrock-api-key-")).decode()
    host, _, query = url.partition("/?")
    return {"host": host, **{key: values[0] for key, values in urllib.parse.parse_qs(query).items()}}


@pytest.mark.parametrize(("model_id", "endpoint", "host", "path"), [
    ("openai.gpt-oss-120b-1:0", None, "bedrock-mantle.eu-west-1.api.aws", "/v1/chat/completions"),
    ("openai.gpt-5.4", None, "bedrock-mantle.eu-west-1.api.aws", "/openai/v1/chat/completions"),
    ("us.openai.gpt-oss-120b-1:0", "bedrock-runtime", "bedrock-runtime.eu-west-1.amazonaws.com",
     "/openai/v1/chat/completions"),
])
async def test_requests_go_to_bedrock_with_a_minted_token(openai_server: OpenAIServer, aws_keys: None, model_id: str,
                                                          endpoint: str | None, host: str, path: str) -> None:
    openai_server.script(text("hello"))
    config: dict[str, Any] = {"region": "eu-west-1", "expiry": timedelta(minutes=30)}
    if endpoint:
        config["endpoint"] = endpoint
    model, transport = mantle_model(openai_server, model_id, config)

    events = [event async for event in model.stream(HI)]

    assert "".join(event.get("contentBlockDelta", {}).get("delta", {}).get("text", "") for event in events) == "hello"
    received = openai_server.requests[0]
    assert (transport.hosts, received.path, received.body["model"]) == ([host], path, model_id)
    token = presigned(received.headers["authorization"])
    assert (token["host"], token["Action"], token["Version"], token["X-Amz-Expires"]) == (
        "bedrock.amazonaws.com", "CallWithBearerToken", "1", "1800")
    assert token["X-Amz-Credential"].startswith("AKIDMANTLETEST/") and "/eu-west-1/bedrock/" in token["X-Amz-Credential"]


async def test_each_request_carries_a_fresh_token_and_the_session_gives_the_region(
        openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    openai_server.script(text("a"), text("b"))
    session = boto3.Session(aws_access_key_id="AKIDSESSION", aws_secret_access_key="s", region_name="ap-south-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSESSION")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    model, transport = mantle_model(openai_server, "openai.gpt-oss-20b-1:0", {"boto_session": session})
    minted: list[dict[str, Any]] = []
    import aws_bedrock_token_generator

    real = aws_bedrock_token_generator.provide_token
    monkeypatch.setattr(aws_bedrock_token_generator, "provide_token",
                        lambda **kwargs: minted.append(kwargs) or real(**kwargs))

    for _ in range(2):
        _ = [event async for event in model.stream(HI)]

    assert minted == [{"region": "ap-south-1"}, {"region": "ap-south-1"}]
    assert transport.hosts == ["bedrock-mantle.ap-south-1.api.aws"] * 2


async def test_no_credentials_is_a_configuration_error(openai_server: OpenAIServer) -> None:
    model, _ = mantle_model(openai_server, "openai.gpt-oss-20b-1:0", {"region": "us-east-1"})

    with pytest.raises(ModelConfigurationError, match="could not mint an Amazon Bedrock token for region 'us-east-1'"):
        _ = [event async for event in model.stream(HI)]
    assert not openai_server.requests


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"bedrock_mantle_config": {"regoin": "us-east-1"}}, r"unknown key\(s\) \['regoin'\]"),
    ({"bedrock_mantle_config": {"endpoint": "bedrock"}}, "bedrock_mantle_config.endpoint must be"),
    ({"bedrock_mantle_config": {"region": "us-east-1.evil.example#"}}, "bedrock_mantle_config.region is not an AWS"),
    ({"bedrock_mantle_config": {"expiry": 60}}, "bedrock_mantle_config.expiry must be a datetime.timedelta"),
    ({"bedrock_mantle_config": {}, "client_args": {"api_key": "k", "base_url": "u"}}, "drop api_key, base_url from"),
    ({"bedrock_mantle_config": {}, "client": object()}, "drop client="),
])
def test_a_bad_mantle_config_is_refused_by_name(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OpenAIModel("openai.gpt-oss-20b-1:0", **kwargs)


def test_a_mantle_model_pickles_unless_it_holds_a_credentials_provider() -> None:
    session = boto3.Session(region_name="us-west-2")
    model = OpenAIModel("m", bedrock_mantle_config={"boto_session": session, "expiry": timedelta(hours=1)})

    clone = pickle.loads(pickle.dumps(model))

    assert clone.bedrock_mantle is not None
    assert clone.bedrock_mantle.config["boto_session"].region_name == "us-west-2"
    assert clone.bedrock_mantle.config["expiry"] == timedelta(hours=1)
    from botocore.credentials import EnvProvider

    with pytest.raises(TypeError, match="credentials_provider cannot be pickled"):
        pickle.dumps(OpenAIModel("m", bedrock_mantle_config={"credentials_provider": EnvProvider()}))


def test_without_the_token_generator_the_model_is_refused_where_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "aws_bedrock_token_generator", None)
    with pytest.raises(ImportError, match="pip install aws-bedrock-token-generator"):
        OpenAIModel("openai.gpt-oss-20b-1:0", bedrock_mantle_config={"region": "us-east-1"})
