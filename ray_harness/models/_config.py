"""Provider configuration, validated with pydantic so a bad value names its field."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ray_harness.types.validation import describe_validation_error

__all__ = ("ProviderConfig", "REQUEST_OPTION_KEYS", "split_params", "validated")

# Keys of ``params`` that are options of the SDK call itself rather than fields of the JSON body.
REQUEST_OPTION_KEYS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})


class ProviderConfig(BaseModel):
    """What ``get_config()`` returns and ``update_config()`` changes."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), frozen=True)

    model_id: str = Field(min_length=1)
    params: dict[str, Any] | None = None


ConfigT = TypeVar("ConfigT", bound=ProviderConfig)


def validated(config_type: type[ConfigT], values: dict[str, Any], provider: str) -> ConfigT:
    """Build ``config_type`` from ``values`` or raise ``ValueError`` naming each bad field."""
    try:
        return config_type.model_validate(values)
    except ValidationError as error:
        raise ValueError(f"invalid {provider} config: {describe_validation_error(error, 'config')}") from None


def split_params(params: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split user ``params`` into SDK call options and body fields.

    Body fields travel as ``extra_body`` so any field the API accepts works, including ones newer than the
    installed SDK's typed signature (e.g. ``temperature``, ``thinking``, ``top_k``).
    """
    options: dict[str, Any] = {}
    body: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if key == "extra_body" and isinstance(value, dict):
            body.update(value)
        elif key in REQUEST_OPTION_KEYS:
            options[key] = value
        else:
            body[key] = value
    return options, body
