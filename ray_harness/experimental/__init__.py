"""Experimental features (Strands' ``strands.experimental``): they may change without notice.

:func:`config_to_agent` (:mod:`ray_harness.experimental.agent_config`) builds an ``Agent`` from a JSON or YAML
configuration. Strands' experimental import paths are kept for switched programs: :mod:`.checkpoint`
(ray_harness's checkpoints), :mod:`.hooks` (and ``.hooks.multiagent``), :mod:`.steering` and :mod:`.tools`
(deprecated aliases, as in Strands). Strands' ``context_manager`` is not provided. Names and submodules load on
first use: importing this package imports nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ray_harness._lazy import lazy_attributes

if TYPE_CHECKING:
    from ray_harness.experimental.agent_config import config_to_agent

__all__ = ("checkpoint", "config_to_agent", "steering", "tools")

_SUBMODULES = frozenset({"checkpoint", "hooks", "steering", "tools"})
_names = lazy_attributes(__name__, {"config_to_agent": f"{__name__}.agent_config"})


def __getattr__(name: str) -> Any:
    # A submodule asked for as an attribute (``experimental.checkpoint``) is imported, as Strands' package does
    # eagerly; the import sets it on this package, so later look-ups skip this function.
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    return _names(name)
