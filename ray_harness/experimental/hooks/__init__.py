"""Strands' ``strands.experimental.hooks``: the old names of four hook events, deprecated as in Strands.

``BeforeToolInvocationEvent``, ``AfterToolInvocationEvent``, ``BeforeModelInvocationEvent`` and
``AfterModelInvocationEvent`` are :class:`ray_harness.hooks.BeforeToolCallEvent`, ``AfterToolCallEvent``,
``BeforeModelCallEvent`` and ``AfterModelCallEvent``; each access warns (``DeprecationWarning``) with the current
name. :mod:`.multiagent` holds the multi-agent events.
"""

from __future__ import annotations

from ray_harness._strands_paths import moved

__all__ = ("AfterModelInvocationEvent", "AfterToolInvocationEvent", "BeforeModelInvocationEvent",
           "BeforeToolInvocationEvent")

__getattr__ = moved(__name__, {
    "BeforeToolInvocationEvent": ("ray_harness.hooks", "BeforeToolCallEvent"),
    "AfterToolInvocationEvent": ("ray_harness.hooks", "AfterToolCallEvent"),
    "BeforeModelInvocationEvent": ("ray_harness.hooks", "BeforeModelCallEvent"),
    "AfterModelInvocationEvent": ("ray_harness.hooks", "AfterModelCallEvent"),
})
