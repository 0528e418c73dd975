"""Strands' ``strands.experimental.steering``: deprecated aliases of :mod:`ray_harness.vended_plugins.steering`.

Each of Strands' names (``SteeringHandler``, ``Proceed``, ``Guide``, ``Interrupt``, ``ToolSteeringAction``,
``ModelSteeringAction``, ...) gives the object ``ray_harness.vended_plugins.steering`` holds, with a
``DeprecationWarning``; the names that package leaves out (the context providers, the ledger, the LLM handler)
raise its ``ImportError``. Strands' ``experimental.steering.core``, ``.context_providers`` and ``.handlers`` are
not provided: import from ``ray_harness.vended_plugins.steering``.
"""

from __future__ import annotations

from ray_harness._strands_paths import moved

__all__: tuple[str, ...] = ()

_NAMES = ("ToolSteeringAction", "ModelSteeringAction", "Proceed", "Guide", "Interrupt", "SteeringHandler",
          "SteeringContextCallback", "SteeringContextProvider", "LedgerBeforeToolCall", "LedgerAfterToolCall",
          "LedgerProvider", "LLMSteeringHandler", "LLMPromptMapper")

__getattr__ = moved(__name__, {name: ("ray_harness.vended_plugins.steering", name) for name in _NAMES})
