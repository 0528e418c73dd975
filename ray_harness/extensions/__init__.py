"""Contributed middleware: pip-installed packages observe every model and tool call.

An extension is an ``install(registry, config)`` callable, registered as an entry point in the group
``ray_harness.extensions`` and enabled with ``RAY_HARNESS_EXTENSIONS="name1,name2"`` (or
:func:`use`). ``install`` registers contributors; each time an agent's chain is assembled (once per lead
invocation, once per sub-agent execution) every contributor's ``contribute_middlewares(app_store, ctx)``
returns :class:`MiddlewarePlacement` items, which the host resolves onto the model and tool stacks by
their :class:`Placement` guarantee. Every contribution is observation-only and fault-isolated: it can
never change a request or a result, and its failures are logged on ``ray_harness.extensions``, never
raised into the agent.
"""

from ray_harness.extensions.loading import ENTRY_POINT_GROUP, ENV_VAR, ExtensionHandle, ExtensionRegistry, use
from ray_harness.extensions.types import (
    AgentBuildContext,
    AgentMiddleware,
    AgentScope,
    ExtensionData,
    ExtensionError,
    LifecycleContext,
    MiddlewarePlacement,
    Placement,
    task_store,
)

__all__ = (
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "AgentBuildContext",
    "AgentMiddleware",
    "AgentScope",
    "ExtensionData",
    "ExtensionError",
    "ExtensionHandle",
    "ExtensionRegistry",
    "LifecycleContext",
    "MiddlewarePlacement",
    "Placement",
    "task_store",
    "use",
)
