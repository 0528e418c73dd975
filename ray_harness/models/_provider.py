"""``ConfiguredModel``: the config handling the provider models share."""

from __future__ import annotations

from typing import Any, ClassVar

from ray_harness.models._config import ProviderConfig, validated
from ray_harness.models._context_windows import known_context_window
from ray_harness.models.base import Model

__all__ = ("ConfiguredModel", "context_window_of")


def context_window_of(context_window: Any, context_window_limit: Any = None) -> int | None:
    """The context window given as ``context_window`` or by Strands' name ``context_window_limit``.

    Raises:
        ValueError: Not a positive integer, or both names given with different values.
    """
    if context_window is not None and context_window_limit is not None and context_window != context_window_limit:
        raise ValueError(f"context_window={context_window!r} and context_window_limit={context_window_limit!r} "
                         "disagree; give one (context_window_limit is Strands' name for it)")
    value = context_window if context_window is not None else context_window_limit
    name = "context_window" if context_window is not None else "context_window_limit"
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be a positive number of tokens, got {value!r}")
    return value


class ConfiguredModel(Model):
    """A provider model whose configuration is a validated, frozen ``ProviderConfig``."""

    config_type: ClassVar[type[ProviderConfig]] = ProviderConfig
    provider: ClassVar[str] = "provider"
    config: ProviderConfig

    @property
    def context_window(self) -> int | None:
        """The window set (``context_window=`` / ``context_window_limit=``), else the known one of ``model_id``.

        Known windows follow the model id (``update_config(model_id=...)``), as Strands resolves them.
        """
        given: int | None = self.__dict__.get("_context_window")
        return given if given is not None else known_context_window(self.config.model_id)

    @context_window.setter
    def context_window(self, value: int | None) -> None:
        self.__dict__["_context_window"] = value

    def _set_config(self, values: dict[str, Any]) -> None:
        self.config = validated(self.config_type, values, self.provider)

    def update_config(self, **model_config: Any) -> None:
        """Change configuration keys for later calls; ``context_window`` (or Strands' ``context_window_limit``) too.

        Raises:
            ValueError: An unknown key or a bad value, named.
        """
        windows = {key: model_config.pop(key) for key in ("context_window", "context_window_limit")
                   if key in model_config}
        if model_config:
            self._set_config({**self.config.model_dump(), **model_config})
        if windows:
            self.context_window = context_window_of(windows.get("context_window"),
                                                    windows.get("context_window_limit"))

    def get_config(self) -> dict[str, Any]:
        """The settings that are set, with ``context_window_limit`` when the window is known (as in Strands).

        A setting left unset (``None``) has no key, as a key never given is absent from Strands' config dict, so
        ``get_config().get("params", {})`` is a dict; a setting with a default (``max_tokens``, ``streaming``) is
        there with its value, the one requests use.
        """
        config = {key: value for key, value in self.config.model_dump().items() if value is not None}
        if self.context_window is not None:
            config["context_window_limit"] = self.context_window
        return config

    def _refresh_config(self) -> None:
        """Re-validate an unpickled config: one pickled by an older release lacks the settings added since."""
        if "context_window" in self.__dict__:  # pickled when the window was a plain attribute
            self.context_window = self.__dict__.pop("context_window")
        known = self.config_type.model_fields
        self.config = self.config_type.model_validate({key: value for key, value in vars(self.config).items()
                                                       if key in known})
