"""``ConfiguredModel``: the config handling the provider models share."""

from __future__ import annotations

from typing import Any, ClassVar

from ray_harness.models._config import ProviderConfig, validated
from ray_harness.models.base import Model

__all__ = ("ConfiguredModel",)


class ConfiguredModel(Model):
    """A provider model whose configuration is a validated, frozen ``ProviderConfig``."""

    config_type: ClassVar[type[ProviderConfig]] = ProviderConfig
    provider: ClassVar[str] = "provider"
    config: ProviderConfig

    def _set_config(self, values: dict[str, Any]) -> None:
        self.config = validated(self.config_type, values, self.provider)

    def update_config(self, **model_config: Any) -> None:
        self._set_config({**self.config.model_dump(), **model_config})

    def get_config(self) -> dict[str, Any]:
        return self.config.model_dump()
