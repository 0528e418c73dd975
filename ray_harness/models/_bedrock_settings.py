"""Strands' ``BedrockModel`` settings (``temperature=``, ``guardrail_id=``, ...) as the Converse fields they fill."""

from __future__ import annotations

from typing import Any

__all__ = ("REQUEST_SETTINGS", "with_settings")

_INFERENCE = {"max_tokens": "maxTokens", "temperature": "temperature", "top_p": "topP",
              "stop_sequences": "stopSequences"}
_GUARDRAIL = {"guardrail_id": "guardrailIdentifier", "guardrail_version": "guardrailVersion",
              "guardrail_trace": "trace", "guardrail_stream_processing_mode": "streamProcessingMode"}
_CHOICES = {"guardrail_trace": ("enabled", "disabled", "enabled_full"),
            "guardrail_stream_processing_mode": ("sync", "async")}

REQUEST_SETTINGS = frozenset({*_INFERENCE, *_GUARDRAIL, "additional_request_fields",
                              "additional_response_field_paths", "additional_args", "service_tier"})
"""The settings kept in ``params`` as request fields (``update_config()`` takes them too)."""


def with_settings(params: dict[str, Any] | None, settings: dict[str, Any]) -> dict[str, Any] | None:
    """``params`` with the given (not ``None``) settings written into their Converse fields.

    ``max_tokens``, ``temperature``, ``top_p``, ``stop_sequences`` → ``inferenceConfig``; ``guardrail_*`` →
    ``guardrailConfig`` (``trace`` ``"enabled"`` unless given, as in Strands; Bedrock needs both the id and the
    version); ``additional_request_fields`` → ``additionalModelRequestFields``;
    ``additional_response_field_paths`` → ``additionalModelResponseFieldPaths``; ``service_tier`` →
    ``serviceTier.type``; ``additional_args``: top-level request fields, as given.

    Raises:
        ValueError: A guardrail without its id or version, or a value outside a setting's choices.
    """
    given = {key: value for key, value in settings.items() if value is not None}
    if not given:
        return params
    merged = dict(params or {})
    for key, value in given.items():
        if key in _CHOICES and value not in _CHOICES[key]:
            raise ValueError(f"invalid Bedrock config: {key} must be one of {', '.join(_CHOICES[key])}, got {value!r}")
        if key in _INFERENCE:
            merged["inferenceConfig"] = {**(merged.get("inferenceConfig") or {}), _INFERENCE[key]: value}
        elif key in _GUARDRAIL:
            merged["guardrailConfig"] = {"trace": "enabled", **(merged.get("guardrailConfig") or {}),
                                         _GUARDRAIL[key]: value}
        elif key == "additional_request_fields":
            merged["additionalModelRequestFields"] = {**(merged.get("additionalModelRequestFields") or {}), **value}
        elif key == "additional_response_field_paths":
            merged["additionalModelResponseFieldPaths"] = list(value)
        elif key == "service_tier":
            merged["serviceTier"] = {"type": value}
        else:  # additional_args
            merged.update(value)
    guardrail = merged.get("guardrailConfig") or {}
    if given.keys() & _GUARDRAIL.keys():
        for setting in ("guardrail_id", "guardrail_version"):
            if _GUARDRAIL[setting] not in guardrail:
                raise ValueError(f"invalid Bedrock config: {setting} is missing (a guardrail needs guardrail_id "
                                 f"and guardrail_version)")
    return merged
