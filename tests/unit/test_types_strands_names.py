"""A Strands program importing from ``strands.types.<module>`` keeps working with ``ray_harness.types.<module>``.

The names are written here as Strands 1.62 has them (the suite must not need Strands); when Strands is installed,
a second test checks that the lists are still complete and that the shapes (keys, and which are required) agree,
but for the differences listed with their reason.
"""

from __future__ import annotations

import importlib
import types
from typing import Any, NotRequired, Required, get_origin

import pytest
from typing_extensions import get_type_hints, is_typeddict

STRANDS_NAMES = {
    "content": ["AudioContent", "CachePoint", "CitationsContentBlock", "ContentBlock", "ContentBlockDelta",
                "ContentBlockStart", "ContentBlockStartToolUse", "ContentBlockStop", "DeltaContent", "DocumentContent",
                "GuardContent", "GuardContentText", "ImageContent", "Message", "MessageMetadata", "Messages", "Metrics",
                "ReasoningContentBlock", "ReasoningTextBlock", "Role", "SystemContentBlock", "SystemPrompt",
                "TextBlock", "ToolResult", "ToolUse", "Usage", "VideoContent", "get_message_metadata",
                "split_system_prompt"],
    "streaming": ["CitationLocation", "CitationSourceContentDelta", "CitationsDelta", "ContentBlockDelta",
                  "ContentBlockDeltaEvent", "ContentBlockDeltaText", "ContentBlockDeltaToolUse", "ContentBlockStart",
                  "ContentBlockStartEvent", "ContentBlockStopEvent", "ExceptionEvent", "MessageStartEvent",
                  "MessageStopEvent", "MetadataEvent", "Metrics", "ModelStreamErrorEvent",
                  "ReasoningContentBlockDelta", "RedactContentEvent", "Role", "StopReason", "StreamEvent", "Trace",
                  "Usage"],
    "tools": ["AgentTool", "DocumentContent", "ImageContent", "JSONSchema", "RunToolHandler", "Tool", "ToolChoice",
              "ToolChoiceAny", "ToolChoiceAnyDict", "ToolChoiceAuto", "ToolChoiceAutoDict", "ToolChoiceTool",
              "ToolChoiceToolDict", "ToolConfig", "ToolContext", "ToolFunc", "ToolGenerator", "ToolResult",
              "ToolResultBlock", "ToolResultContent", "ToolResultStatus", "ToolSpec", "ToolUse"],
    "event_loop": ["Metrics", "StopReason", "Usage"],
    "citations": ["Citation", "CitationGeneratedContent", "CitationLocation", "CitationSourceContent",
                  "CitationsConfig", "CitationsContentBlock", "DocumentCharLocation", "DocumentCharLocationDict",
                  "DocumentChunkLocation", "DocumentChunkLocationDict", "DocumentPageLocation",
                  "DocumentPageLocationDict", "SearchResultLocation", "SearchResultLocationDict", "WebLocation",
                  "WebLocationDict"],
    "exceptions": ["AggregateMemoryError", "CheckpointException", "ConcurrencyException", "ContextWindowOverflowException",
                   "EventLoopException", "IdempotencyAbortedError", "MCPClientInitializationError",
                   "MaxTokensReachedException", "ModelThrottledException", "ProviderTokenCountError", "SessionException",
                   "SnapshotException",
                   "StorageError", "StructuredOutputException", "ToolProviderException"],
}
LEFT_OUT: dict[str, set[str]] = {}  # Strands names a module has that ray_harness leaves out on purpose

# Strands' shapes ray_harness differs from on purpose (name → why); every other TypedDict has Strands' keys.
SHAPE_DIFFERENCES = {
    "ContentBlock": "no audio block (no provider here sends it); json blocks (tool results) are blocks here",
    "DocumentContent": "format, name and source are required: no provider accepts a document without them",
    "Message": "no tracking_id / metadata: validation keeps what providers are sent",
    "ReasoningTextBlock": "ReasoningText: a reasoning text has its text",
    "ToolUse": "no reasoningSignature: no provider here sends one",
    "Usage": "estimatedTokens added: how much of the count is an estimate",
    "ContentBlockDeltaEvent": "delta required: a delta event without a delta is none",
    "ContentBlockStartEvent": "start required",
    "MessageStopEvent": "stopReason required: the loop reads it from every stop",
}

_TYPING_HELPERS = {"ABC", "Any", "AsyncGenerator", "Awaitable", "Callable", "Generic", "Literal", "NotRequired",
                   "Protocol", "Required", "TYPE_CHECKING", "TypeAlias", "TypeVar", "TypedDict", "abstractmethod",
                   "dataclass", "field"}


@pytest.mark.parametrize("module", list(STRANDS_NAMES))
def test_every_strands_name_imports_from_ours(module: str) -> None:
    ours = importlib.import_module(f"ray_harness.types.{module}")
    missing = [name for name in STRANDS_NAMES[module] if not hasattr(ours, name)]
    assert missing == []
    assert set(STRANDS_NAMES[module]) <= set(ours.__all__)  # star imports and type checkers see them too


def test_the_added_helpers_behave_as_strands_ones() -> None:
    from ray_harness.types.content import TextBlock, get_message_metadata, split_system_prompt
    from ray_harness.types.tools import ToolResultBlock

    assert split_system_prompt("be brief") == ("be brief", [{"text": "be brief"}])
    blocks: Any = [{"text": "a"}, {"cachePoint": {"type": "default"}}, {"text": "b"}]
    assert split_system_prompt(blocks) == ("a\nb", blocks)
    assert split_system_prompt([{"cachePoint": {"type": "default"}}]) == (None, [{"cachePoint": {"type": "default"}}])
    assert split_system_prompt(None) == (None, None)
    assert get_message_metadata({"role": "user", "content": []}) == {}
    stored: Any = {"role": "user", "content": [], "metadata": {"custom": {"k": 1}}}
    assert get_message_metadata(stored) == {"custom": {"k": 1}}
    assert TextBlock("hi").to_dict() == {"text": "hi"}
    assert ToolResultBlock("t1", "error", [{"text": "no"}]).to_dict() == {
        "toolResult": {"toolUseId": "t1", "status": "error", "content": [{"text": "no"}]}}


def test_provider_token_count_error_is_ours() -> None:
    from ray_harness.types.exceptions import ProviderTokenCountError, RayHarnessError

    assert issubclass(ProviderTokenCountError, RayHarnessError)


def _public(module: types.ModuleType) -> set[str]:
    return {name for name in dir(module) if not name.startswith("_") and name not in _TYPING_HELPERS
            and not isinstance(getattr(module, name), types.ModuleType)}


def _shape(typed_dict: Any) -> tuple[set[str], set[str]]:
    hints = get_type_hints(typed_dict, include_extras=True)
    required = {key for key, hint in hints.items()
                if get_origin(hint) is Required or (typed_dict.__total__ and get_origin(hint) is not NotRequired)}
    return set(hints), required


@pytest.mark.parametrize("module", list(STRANDS_NAMES))
def test_the_lists_match_the_installed_strands(module: str) -> None:
    strands_module = importlib.import_module(f"{pytest.importorskip('strands').__name__}.types.{module}")
    assert _public(strands_module) - LEFT_OUT.get(module, set()) == set(STRANDS_NAMES[module])
    ours = importlib.import_module(f"ray_harness.types.{module}")
    for name in STRANDS_NAMES[module]:
        theirs = getattr(strands_module, name)
        if is_typeddict(theirs) and name not in SHAPE_DIFFERENCES:
            assert _shape(getattr(ours, name)) == _shape(theirs), name
