"""Converse messages for the Bedrock Converse API (nearly as they are) and its stream events back."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any, cast

from ray_harness.models._bedrock_models import json_results_as_text, refuses_reasoning
from ray_harness.models._bedrock_recovery import SEPARATOR_TURN, separates_turns
from ray_harness.models._citations import bedrock_citations_block, citation_deltas
from ray_harness.models._tool_history import tool_use_input
from ray_harness.types.content import ContentBlock, Messages
from ray_harness.types.streaming import StreamEvent
from ray_harness.types.tools import ToolChoice, ToolSpec

__all__ = ("convert_event", "converse_events", "format_messages", "format_tool_config", "strict_schema")

# Keys Bedrock accepts in a message's content block; anything else would be rejected by boto3's validation.
_BLOCK_KEYS = {"text", "toolUse", "toolResult", "reasoningContent", "image", "document", "cachePoint", "video",
               "guardContent"}

# The image formats a guardrail screens (botocore's GuardrailConverseImageFormat); others stay plain images.
_GUARD_IMAGE_FORMATS = {"png", "jpeg"}

# Converse stop reasons the agent would not recognise, as the ones it acts on. Output cut off by the context window
# is output cut off, as AnthropicModel reports it too (the agent raises MaxTokensReachedException).
_STOP_REASONS = {"model_context_window_exceeded": "max_tokens"}


def format_messages(messages: Messages, *, guard_latest: bool = False, include_status: bool = True,
                    model_id: str = "", separate_tool_results: bool = False) -> list[dict[str, Any]]:
    """Converse messages for ``converse_stream``; consecutive messages of one role are sent as one turn.

    Converse rejects a history whose roles do not alternate, and a valid one can still have two user turns in a
    row: a session repaired after a crash (the killed tool's result), then the next prompt.

    ``include_status``: tool results carry their ``status`` (some models refuse the field; Strands'
    ``include_tool_result_status``).

    ``guard_latest``: the text and images of the last user message that has any go in ``guardContent`` blocks, so
    a guardrail screens only them (Strands' ``guardrail_latest_message``). That is the prompt, also on the turns
    after it that carry tool results.

    ``model_id``: reasoning blocks that model would refuse are left out, and it gets tool results' ``json`` blocks
    as text when it misreads them (see :mod:`ray_harness.models._bedrock_models`).

    ``separate_tool_results``: a user message of tool results only and a user message after it without any are two
    turns, with a neutral assistant turn between them (for a model that refuses them as one, as Strands sends them).
    """
    guarded = _last_prompt_index(messages) if guard_latest else None
    json_as_text = json_results_as_text(model_id)
    formatted: list[dict[str, Any]] = []
    previous: list[dict[str, Any]] = []  # the last message's blocks, as sent
    for index, message in enumerate(messages):
        blocks = [block for block in message["content"] if "reasoningContent" not in block
                  or not refuses_reasoning(model_id, cast(dict[str, Any], block["reasoningContent"]))]
        content = [converted for converted in (_format_block(block, include_status, json_as_text) for block in blocks)
                   if converted is not None]
        if index == guarded:
            content = [_guarded(block) for block in content]
        if not content:
            continue
        if separate_tool_results and formatted and formatted[-1]["role"] == message["role"] == "user" \
                and separates_turns(previous, content):
            formatted.append(copy.deepcopy(SEPARATOR_TURN))
        previous = content
        if formatted and formatted[-1]["role"] == message["role"]:
            formatted[-1]["content"].extend(content)
        else:
            formatted.append({"role": message["role"], "content": content})
    return formatted


def _last_prompt_index(messages: Messages) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message["role"] == "user" and any("text" in block or "image" in block for block in message["content"]):
            return index
    return None


def _guarded(block: dict[str, Any]) -> dict[str, Any]:
    if "text" in block and block["text"].strip():  # Bedrock refuses a blank guardContent block
        return {"guardContent": {"text": {"text": block["text"]}}}
    if "image" in block and block["image"].get("format") in _GUARD_IMAGE_FORMATS:
        return {"guardContent": {"image": block["image"]}}
    return block


def _format_block(block: ContentBlock, include_status: bool = True, json_as_text: bool = False
                  ) -> dict[str, Any] | None:
    if "text" in block:
        return {"text": block["text"]} if block["text"] else None
    if "json" in block:  # a harness-only block: Bedrock takes JSON inside tool results only
        return {"text": json.dumps(block["json"])}
    if "toolResult" in block:
        result = block["toolResult"]
        formatted: dict[str, Any] = {"toolUseId": result["toolUseId"],
                                     "content": [{"text": json.dumps(part["json"])} if json_as_text and "json" in part
                                                 else dict(part) for part in result["content"]] or [{"text": ""}]}
        if include_status:
            formatted["status"] = result.get("status", "success")
        return {"toolResult": formatted}
    if "toolUse" in block:
        use = block["toolUse"]
        return {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"], "input": tool_use_input(use)}}
    if "citationsContent" in block:
        return bedrock_citations_block(block["citationsContent"])
    keys = set(block) & _BLOCK_KEYS
    if not keys:
        raise TypeError(f"content block with keys {sorted(block)} cannot be sent to Bedrock")
    return {key: block[key] for key in keys}  # type: ignore[literal-required]


_CONVERSE_SPEC_KEYS = ("name", "description", "inputSchema", "strict")


def format_tool_config(tool_specs: list[ToolSpec] | None, tool_choice: ToolChoice | None, *,
                       strict: bool = False) -> dict[str, Any] | None:
    """Bedrock ``toolConfig``; its ``toolChoice`` has exactly our Converse shape.

    ``strict`` (Strands' ``strict_tools``): each spec says ``"strict": true`` and its schema is made strict
    (:func:`strict_schema`), so Bedrock constrains the tool input to it.
    """
    if not tool_specs:
        return None
    # Only the keys Converse's ToolSpecification has: a spec's outputSchema / annotations (Strands' ToolSpec has
    # both) would fail the request in botocore's validation (Strands sends these keys alone too).
    specs = [{key: spec[key] for key in _CONVERSE_SPEC_KEYS if key in spec} for spec in tool_specs]  # type: ignore[literal-required]
    if strict:
        specs = [{**spec, "inputSchema": {"json": strict_schema(spec["inputSchema"]["json"])}, "strict": True}
                 for spec in specs]
    config: dict[str, Any] = {"tools": [{"toolSpec": spec} for spec in specs]}
    if tool_choice:
        if not set(tool_choice) <= {"auto", "any", "tool"} or len(tool_choice) != 1:
            raise ValueError(f"unknown tool_choice {tool_choice!r}; expected one of auto, any, tool")
        config["toolChoice"] = dict(tool_choice)
    return config


def strict_schema(schema: Any) -> Any:
    """A copy of a JSON schema with ``"additionalProperties": false`` on every object that does not set it.

    Bedrock's strict tool use requires it. Applied through ``properties``, ``items``, ``anyOf`` / ``allOf`` /
    ``oneOf`` and ``$defs`` / ``definitions``.
    """
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {key: strict_schema(value) if key in _SUBSCHEMA_KEYS else value for key, value in schema.items()}
    for key in ("properties", "$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            strict[key] = {name: strict_schema(value) for name, value in schema[key].items()}
    if strict.get("type") == "object" and "additionalProperties" not in strict:
        strict["additionalProperties"] = False
    return strict


_SUBSCHEMA_KEYS = frozenset({"items", "anyOf", "allOf", "oneOf"})


def convert_event(event: dict[str, Any], latency_ms: int) -> StreamEvent | None:
    """One boto3 stream event as ours: the same Converse shape, with usage normalised and our latency filled in."""
    if "metadata" in event:
        metadata = dict(event["metadata"])
        if "usage" in metadata:
            metadata["usage"] = _usage(metadata["usage"])
        metrics = dict(metadata.get("metrics") or {})
        metrics.setdefault("latencyMs", latency_ms)
        metadata["metrics"] = metrics
        return {"metadata": metadata}  # type: ignore[return-value]
    if event.get("messageStop", {}).get("stopReason") in _STOP_REASONS:
        return {"messageStop": {**event["messageStop"],  # type: ignore[return-value]
                                "stopReason": _STOP_REASONS[event["messageStop"]["stopReason"]]}}
    for key in ("messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop",
                "redactContent"):
        if key in event:
            return {key: event[key]}  # type: ignore[return-value]
    return None


def converse_events(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A ``converse`` (non-streaming) response as the ``converse_stream`` events it stands for (as Strands does)."""
    message = response["output"]["message"]
    yield {"messageStart": {"role": message.get("role", "assistant")}}
    for index, block in enumerate(message.get("content") or []):
        yield from _block_deltas(index, block)
        yield {"contentBlockStop": {"contentBlockIndex": index}}
    stop: dict[str, Any] = {"stopReason": response.get("stopReason", "end_turn")}
    if response.get("additionalModelResponseFields"):
        stop["additionalModelResponseFields"] = response["additionalModelResponseFields"]
    yield {"messageStop": stop}
    metadata = {key: response[key] for key in ("usage", "metrics", "trace") if key in response}
    if metadata:
        yield {"metadata": metadata}


def _block_deltas(index: int, block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    def delta(payload: dict[str, Any]) -> dict[str, Any]:
        return {"contentBlockDelta": {"contentBlockIndex": index, "delta": payload}}

    if "toolUse" in block:
        use = block["toolUse"]
        yield {"contentBlockStart": {"contentBlockIndex": index,
                                     "start": {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}}}
        yield delta({"toolUse": {"input": json.dumps(use.get("input", {}))}})
    elif "text" in block:
        yield delta({"text": block["text"]})
    elif "citationsContent" in block:  # its text, then its citations, as the stream sends them (and Strands)
        yield from (delta(payload) for payload in citation_deltas(block["citationsContent"]))
    elif "reasoningContent" in block:
        reasoning = block["reasoningContent"]
        text = reasoning.get("reasoningText") or {}
        if "text" in text:
            yield delta({"reasoningContent": {"text": text["text"]}})
        if text.get("signature"):
            yield delta({"reasoningContent": {"signature": text["signature"]}})
        if "redactedContent" in reasoning:
            yield delta({"reasoningContent": {"redactedContent": reasoning["redactedContent"]}})


def _usage(usage: dict[str, Any]) -> dict[str, int]:
    """``inputTokens`` counting cached prompt tokens too, as the other providers and ``ModelPrices`` count them.

    Bedrock reports cache reads and writes apart from ``inputTokens`` (and adds them into ``totalTokens``).
    """
    cache_read = int(usage.get("cacheReadInputTokens", 0) or 0)
    cache_write = int(usage.get("cacheWriteInputTokens", 0) or 0)
    input_tokens = int(usage.get("inputTokens", 0) or 0) + cache_read + cache_write
    output_tokens = int(usage.get("outputTokens", 0) or 0)
    converted = {"inputTokens": input_tokens, "outputTokens": output_tokens,
                 "totalTokens": input_tokens + output_tokens}
    if cache_read:
        converted["cacheReadInputTokens"] = cache_read
    if cache_write:
        converted["cacheWriteInputTokens"] = cache_write
    return converted
