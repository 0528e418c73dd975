"""Context injection: text folded into one model call's input, never into the agent's history.

The configuration types shared by injection consumers (Strands' ``strands.injection``); reach injection
through :class:`ray_harness.vended_plugins.context_injector.ContextInjector`.
"""

from ray_harness.injection.types import (
    InjectionConfig,
    InjectionContext,
    InjectionTrigger,
    InjectionTriggerPredicate,
    TriggerCallback,
)

__all__ = ("InjectionConfig", "InjectionContext", "InjectionTrigger", "InjectionTriggerPredicate", "TriggerCallback")
