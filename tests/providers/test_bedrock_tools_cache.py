"""Strands' ``BedrockModel`` settings: ``strict_tools``, ``include_tool_result_status``, ``cache_config``."""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness.models import CacheConfig, CacheToolsConfig
from ray_harness.models.bedrock import BedrockModel
from tests.providers.conftest import bedrock_model
from tests.providers.fake_servers import BedrockServer, text

SPEC: Any = {"name": "lookup", "description": "Look up.", "inputSchema": {"json": {
    "type": "object", "properties": {"key": {"type": "string"},
                                     "filter": {"type": "object", "properties": {"tags": {
                                         "type": "array", "items": {"type": "object", "properties": {}}}}},
                                     "open": {"type": "object", "additionalProperties": True}},
    "$defs": {"Inner": {"type": "object"}}}}}
TOOL_TURNS: Any = [
    {"role": "user", "content": [{"text": "look k"}]},
    {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"key": "k"}}}]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "status": "error", "content": [{"text": "no"}]}}]},
]


async def send(server: BedrockServer, model: Any, messages: Any, specs: Any = None, system: Any = None
               ) -> dict[str, Any]:
    [_ async for _ in model.stream(messages, specs, system)]
    return server.bodies[-1]


async def test_strict_tools_marks_each_spec_and_closes_every_object(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("ok"), text("ok"))

    strict = await send(bedrock_server, bedrock_model(bedrock_server, strict_tools=True), TOOL_TURNS[:1], [SPEC])
    plain = await send(bedrock_server, bedrock_model(bedrock_server), TOOL_TURNS[:1], [SPEC])

    spec = strict["toolConfig"]["tools"][0]["toolSpec"]
    schema = spec["inputSchema"]["json"]
    assert spec["strict"] is True
    assert schema["additionalProperties"] is False
    assert schema["properties"]["filter"]["additionalProperties"] is False
    assert schema["properties"]["filter"]["properties"]["tags"]["items"]["additionalProperties"] is False
    assert schema["properties"]["open"]["additionalProperties"] is True  # a schema's own choice stays
    assert schema["$defs"]["Inner"]["additionalProperties"] is False
    assert "additionalProperties" not in SPEC["inputSchema"]["json"]  # the agent's spec is not changed
    assert plain["toolConfig"]["tools"] == [{"toolSpec": SPEC}]


async def test_a_spec_sends_only_the_keys_converse_knows(bedrock_server: BedrockServer) -> None:
    # Strands' ToolSpec has outputSchema and annotations; botocore refuses any key Converse's ToolSpecification lacks.
    bedrock_server.script(text("ok"), text("ok"))
    full = {**SPEC, "outputSchema": {"json": {"type": "object"}}, "annotations": {"readOnlyHint": True}}

    plain = await send(bedrock_server, bedrock_model(bedrock_server), TOOL_TURNS[:1], [full])
    strict = await send(bedrock_server, bedrock_model(bedrock_server, strict_tools=True), TOOL_TURNS[:1], [full])

    assert plain["toolConfig"]["tools"] == [{"toolSpec": SPEC}]
    assert set(strict["toolConfig"]["tools"][0]["toolSpec"]) == {"name", "description", "inputSchema", "strict"}


@pytest.mark.parametrize(("model_id", "setting", "sent"), [
    ("us.anthropic.claude-test-v1:0", "auto", True), ("amazon.nova-pro-v1:0", "auto", False),
    ("amazon.nova-pro-v1:0", True, True), ("anthropic.claude-test-v1:0", False, False),
    ("amazon.nova-pro-v1:0", None, False),
])
async def test_include_tool_result_status(bedrock_server: BedrockServer, model_id: str, setting: object,
                                          sent: bool) -> None:
    bedrock_server.script(text("ok"))
    model = bedrock_model(bedrock_server, model_id=model_id, include_tool_result_status=setting)

    body = await send(bedrock_server, model, TOOL_TURNS, [SPEC])

    result = body["messages"][-1]["content"][0]["toolResult"]
    assert ("status" in result) is sent
    assert result.get("status", "error") == "error"
    assert model.get_config()["include_tool_result_status"] == ("auto" if setting is None else setting)


async def test_cache_config_on_claude_places_system_message_and_tool_points(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("ok"))
    history = [{"role": "user", "content": [{"text": "first"}, {"cachePoint": {"type": "default"}}]},
               {"role": "assistant", "content": [{"text": "a"}]}, {"role": "user", "content": [{"text": "second"}]}]
    model = bedrock_model(bedrock_server, cache_config=CacheConfig(ttl="1h", tools_ttl="5m"))

    body = await send(bedrock_server, model, history, [SPEC], "sys")

    assert body["system"] == [{"text": "sys"}, {"cachePoint": {"type": "default", "ttl": "1h"}}]
    assert body["messages"][0]["content"] == [{"text": "first"}]  # earlier points go: four per request at most
    assert body["messages"][-1]["content"] == [{"text": "second"}, {"cachePoint": {"type": "default", "ttl": "1h"}}]
    assert body["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default", "ttl": "5m"}}
    assert model.get_config()["cache_config"] == CacheConfig(ttl="1h", tools_ttl="5m")


async def test_cache_config_auto_leaves_other_models_alone(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("ok"), text("ok"))
    auto = bedrock_model(bedrock_server, model_id="amazon.nova-pro-v1:0", cache_config=CacheConfig(),
                         cache_tools="default")
    forced = bedrock_model(bedrock_server, model_id="amazon.nova-pro-v1:0",
                           cache_config=CacheConfig(strategy="anthropic", system_prompt_ttl=False),
                           cache_tools=CacheToolsConfig(ttl="1h"))

    untouched = await send(bedrock_server, auto, TOOL_TURNS[:1], [SPEC], "sys")
    anthropic = await send(bedrock_server, forced, TOOL_TURNS[:1], [SPEC], "sys")

    assert untouched["system"] == [{"text": "sys"}]
    assert untouched["messages"][0]["content"] == [{"text": "look k"}]
    assert untouched["toolConfig"]["tools"] == [{"toolSpec": SPEC}]  # cache_config turns cache_tools off too
    assert anthropic["system"] == [{"text": "sys"}]
    assert anthropic["messages"][0]["content"] == [{"text": "look k"}, {"cachePoint": {"type": "default"}}]
    assert anthropic["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default", "ttl": "1h"}}


async def test_a_cache_point_never_directly_follows_a_non_pdf_document(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("ok"), text("ok"))
    document = {"document": {"format": "txt", "name": "notes", "source": {"bytes": b"notes"}}}
    model = bedrock_model(bedrock_server, cache_config=CacheConfig())

    after_text = await send(bedrock_server, model, [{"role": "user", "content": [{"text": "read"}, document]}])
    leading = await send(bedrock_server, model, [{"role": "user", "content": [document]}])

    assert [next(iter(block)) for block in after_text["messages"][0]["content"]] == ["text", "cachePoint", "document"]
    assert [next(iter(block)) for block in leading["messages"][0]["content"]] == ["document"]


def test_the_new_settings_are_validated_by_name() -> None:
    with pytest.raises(ValueError, match="strict_tools"):
        BedrockModel("m", strict_tools="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="include_tool_result_status"):
        BedrockModel("m", include_tool_result_status="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cache_config"):
        BedrockModel("m", cache_config=CacheConfig(strategy="bedrock"))  # type: ignore[arg-type]
    model = BedrockModel("m")
    model.update_config(strict_tools=True, include_tool_result_status=False)
    assert (model.get_config()["strict_tools"], model.get_config()["include_tool_result_status"]) == (True, False)


def test_region_name_and_boto_session_together_are_refused() -> None:
    import boto3

    session = boto3.Session(aws_access_key_id="AKIDTEST", aws_secret_access_key="secret", region_name="us-east-1")
    with pytest.raises(ValueError, match=r"region_name.*boto_session"):
        BedrockModel("m", region_name="eu-west-1", boto_session=session)
