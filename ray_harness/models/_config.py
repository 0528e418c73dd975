"""Provider configuration, validated with pydantic so a bad value names its field."""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ray_harness.types.validation import describe_validation_error

__all__ = ("ProviderConfig", "REQUEST_OPTION_KEYS", "split_params", "validated")

# Keys of ``params`` that are options of the SDK call itself rather than fields of the JSON body.
REQUEST_OPTION_KEYS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})


class ProviderConfig(BaseModel):
    """What ``get_config()`` returns and ``update_config()`` changes.

    Also a read-only mapping, as Strands' ``model.config`` dict reads: ``config["model_id"]``,
    ``config.get("params", {})``, ``"cache_config" in config``, ``keys()``/``values()``/``items()``, ``{**config}``.
    A setting left unset (``None``) is not a key, as a key never given is absent from Strands' dict, so
    ``config.get(key, default)`` gives the default for it. Change settings with ``update_config()``.
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), frozen=True)

    model_id: str = Field(min_length=1)
    params: dict[str, Any] | None = None

    def _mapping(self) -> dict[str, Any]:
        return {name: value for name in type(self).model_fields if (value := getattr(self, name)) is not None}

    def __getitem__(self, key: str) -> Any:
        value = getattr(self, key, None) if key in type(self).model_fields else None
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        """The setting ``key``, or ``default`` when it is unset (as ``dict.get``)."""
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]  # a mapping iterates its keys, as dict does
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())

    def keys(self) -> KeysView[str]:
        """The settings that are set."""
        return self._mapping().keys()

    def values(self) -> ValuesView[Any]:
        """The values of the settings that are set."""
        return self._mapping().values()

    def items(self) -> ItemsView[str, Any]:
        """The settings that are set, with their values."""
        return self._mapping().items()


Mapping.register(ProviderConfig)  # isinstance(model.config, Mapping) holds, as for Strands' dict


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
