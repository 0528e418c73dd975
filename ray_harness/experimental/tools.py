"""Strands' ``strands.experimental.tools``: deprecated aliases, as in Strands (it exports nothing itself).

``ToolProvider`` is :class:`ray_harness.tools.ToolProvider`; ``stop`` and ``make_stop`` are those of
:mod:`ray_harness.vended_tools`. Each access warns (``DeprecationWarning``) with the current path.
"""

from __future__ import annotations

from ray_harness._strands_paths import moved

__all__: tuple[str, ...] = ()

__getattr__ = moved(__name__, {"ToolProvider": ("ray_harness.tools", "ToolProvider"),
                               "stop": ("ray_harness.vended_tools", "stop"),
                               "make_stop": ("ray_harness.vended_tools", "make_stop")})
