"""Session records as stored, their schema version, and parsing that names the bad file.

Every record is one JSON object with ``schema_version`` (currently ``"1"``). Bytes inside messages
(images, documents) are stored as ``{"__bytes__": "<base64>"}``. A record that is not valid JSON,
has wrong types or an unknown schema version raises :class:`SessionException` naming where it was
read from; nothing is reset or overwritten.

A record without ``schema_version`` is one the Strands SDK wrote (same folder layout): its agent's
interrupt state under ``_internal_state``, its bytes as ``{"__bytes_encoded__": true, "data": ...}`` and
a message's ``redact_message`` replacing the message are read as Strands reads them, so a session
survives switching the imports. A Strands Graph's or Swarm's state is not ours to read: it is refused by name.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ray_harness.types.content import Message
from ray_harness.types.exceptions import SessionException
from ray_harness.types.validation import describe_validation_error

__all__ = (
    "SCHEMA_VERSION",
    "AgentRecord",
    "MessageRecord",
    "MultiAgentRecord",
    "SessionRecord",
    "decode_json",
    "dump_record",
    "encode_json",
    "now",
    "parse_record",
    "validate_id",
)

SCHEMA_VERSION = "1"
_BYTES_KEY = "__bytes__"
_STRANDS_BYTES_KEY = "__bytes_encoded__"

R = TypeVar("R", bound=BaseModel)


def now() -> str:
    """The current UTC time as an ISO 8601 string (the records' timestamps)."""
    return datetime.now(UTC).isoformat()


def validate_id(value: Any, what: str) -> str:
    """Ids become path segments and object keys: no separators, no ``..``, nothing empty."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    if "/" in value or "\\" in value or ".." in value or "\x00" in value:
        raise ValueError(f"{what} {value!r} must not contain path separators ('/' or '\\\\'), '..' or NUL")
    if len(value) > 200:
        raise ValueError(f"{what} must be at most 200 characters, got {len(value)}")
    return value


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")

    schema_version: str = SCHEMA_VERSION
    created_at: str = Field(default_factory=now)
    updated_at: str = Field(default_factory=now)


class SessionRecord(_Record):
    """A session: its id and kind."""

    session_id: str
    session_type: str = "AGENT"


class AgentRecord(_Record):
    """One agent of a session: its state, conversation manager state, interrupt state and pending results."""

    agent_id: str
    state: dict[str, Any] = Field(default_factory=dict)
    conversation_manager_state: dict[str, Any] = Field(default_factory=dict)
    interrupt_state: dict[str, Any] = Field(default_factory=dict)
    pending_tool_results: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Results of tools that finished while their batch was still running (used to repair a crash)."""


class MessageRecord(_Record):
    """One message of an agent's history, at position ``message_id``."""

    message_id: int = Field(ge=0)
    message: Message


class MultiAgentRecord(_Record):
    """The state of one Graph or Swarm in a session."""

    multi_agent_id: str
    state: dict[str, Any]


def encode_json(value: Any) -> Any:
    """``value`` with every ``bytes`` replaced by a JSON-safe marker object."""
    if isinstance(value, bytes | bytearray):
        return {_BYTES_KEY: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {key: encode_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encode_json(item) for item in value]
    return value


def decode_json(value: Any) -> Any:
    """The inverse of :func:`encode_json`: byte markers (ours and Strands') become ``bytes`` again."""
    if isinstance(value, dict):
        if len(value) == 1 and _BYTES_KEY in value and isinstance(value[_BYTES_KEY], str):
            return base64.b64decode(value[_BYTES_KEY])
        if value.get(_STRANDS_BYTES_KEY) is True and isinstance(value.get("data"), str) and len(value) == 2:
            return base64.b64decode(value["data"])
        return {key: decode_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_json(item) for item in value]
    return value


def dump_record(record: BaseModel, location: str) -> bytes:
    """``record`` as UTF-8 JSON bytes.

    Raises:
        SessionException: A value is not JSON serializable; the message names ``location``.
    """
    try:
        text = json.dumps(encode_json(record.model_dump(mode="python")), ensure_ascii=False, indent=1,
                          allow_nan=False)
    except (TypeError, ValueError) as error:
        raise SessionException(f"cannot write {location}: value is not JSON serializable ({error})") from None
    return text.encode("utf-8")


def parse_record(raw: bytes, model: type[R], location: str) -> R:
    """Parse and validate one stored record, or raise ``SessionException`` naming ``location``."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SessionException(f"corrupted session file {location}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise SessionException(f"corrupted session file {location}: expected a JSON object, "
                               f"got {type(data).__name__}")
    version = data.get("schema_version")
    if version is None:
        data = _from_strands(data, model, location)
    elif version != SCHEMA_VERSION:
        raise SessionException(f"session file {location} has schema_version {version!r}; "
                               f"this ray_harness reads schema_version {SCHEMA_VERSION!r}")
    try:
        return model.model_validate(decode_json(data))
    except ValidationError as error:
        raise SessionException(
            f"corrupted session file {location}: {describe_validation_error(error, model.__name__)}") from None


def _from_strands(data: dict[str, Any], model: type[BaseModel], location: str) -> dict[str, Any]:
    """A record the Strands SDK wrote, in this module's form (see the module docstring)."""
    if model is MultiAgentRecord:
        raise SessionException(f"session file {location} holds a Graph's or Swarm's state written by the Strands "
                               "SDK (no schema_version); ray_harness reads Strands' agent sessions, not its "
                               "multi-agent state: start that Graph or Swarm in a new session")
    data = dict(data)
    if model is AgentRecord:
        internal = data.pop("_internal_state", None)
        if isinstance(internal, dict) and isinstance(internal.get("interrupt_state"), dict):
            data["interrupt_state"] = _strands_interrupt_state(internal["interrupt_state"])
    elif model is MessageRecord:
        if data.get("redact_message") is not None:
            data["message"] = data["redact_message"]  # Strands reads the redacted message in its place
        message = data.get("message")
        if isinstance(message, dict):
            data["message"] = {key: value for key, value in message.items() if key != "tracking_id"}
    return data


def _strands_interrupt_state(state: dict[str, Any]) -> dict[str, Any]:
    """Strands keeps an interrupted tool batch under ``pending_tool_execution``; ours is in the context."""
    state = dict(state)
    pending = state.pop("pending_tool_execution", None)
    if isinstance(pending, dict) and isinstance(pending.get("assistant_message"), dict):
        message = {key: value for key, value in pending["assistant_message"].items() if key in ("role", "content")}
        context = state.get("context")
        context = context if isinstance(context, dict) else {}
        state["context"] = {**context, "tool_use_message": message,
                            "tool_results": list(pending.get("completed_tool_results") or [])}
    return state
