"""Strands' ``strands.experimental.hooks.multiagent``: the multi-agent events of :mod:`ray_harness.hooks`.

The very objects of :mod:`ray_harness.hooks`; importing this module warns (``DeprecationWarning``), as Strands'
does, since the events live in ``hooks``.
"""

from __future__ import annotations

import warnings

from ray_harness.hooks import (
    AfterMultiAgentInvocationEvent,
    AfterNodeCallEvent,
    BeforeMultiAgentInvocationEvent,
    BeforeNodeCallEvent,
    MultiAgentInitializedEvent,
)

__all__ = ("AfterMultiAgentInvocationEvent", "AfterNodeCallEvent", "BeforeMultiAgentInvocationEvent",
           "BeforeNodeCallEvent", "MultiAgentInitializedEvent")

warnings.warn("ray_harness.experimental.hooks.multiagent is deprecated, as in Strands: import the events from "
              "ray_harness.hooks", DeprecationWarning, stacklevel=2)
