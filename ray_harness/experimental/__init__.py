"""Experimental features (Strands' ``strands.experimental``): they may change without notice.

:func:`config_to_agent` (:mod:`ray_harness.experimental.agent_config`) builds an ``Agent`` from a JSON or YAML
configuration. Names load on first use: importing this package imports nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ray_harness._lazy import lazy_attributes

if TYPE_CHECKING:
    from ray_harness.experimental.agent_config import config_to_agent

__all__ = ("config_to_agent",)

__getattr__ = lazy_attributes(__name__, {"config_to_agent": f"{__name__}.agent_config"})
