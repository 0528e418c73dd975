"""``MultiAgentPlugin``: hooks and setup for a Graph or Swarm in one object (Strands' ``MultiAgentPlugin``).

``Graph(plugins=[...])``, ``Swarm(plugins=[...])`` and ``GraphBuilder.set_plugins([...])`` call each plugin's
:meth:`MultiAgentPlugin.init_multi_agent`, then register its ``@hook`` methods in the orchestrator's hook
registry, as ``hooks=`` does for hook providers. Orchestrators have no tool registry, so ``@tool`` methods are
not taken. A class subclassing both :class:`~ray_harness.plugins.Plugin` and ``MultiAgentPlugin`` works at
both levels; its hooks are found once.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ray_harness.plugins._base import HookedPlugin

if TYPE_CHECKING:
    from ray_harness.multiagent.base import MultiAgentBase

__all__ = ("MultiAgentPlugin",)


class MultiAgentPlugin(HookedPlugin):
    """Base class of orchestrator plugins: a ``name``, ``@hook`` methods and an optional ``init_multi_agent``.

    ``name`` identifies the plugin (two plugins of one orchestrator may not share it). The ``@hook`` methods
    take multi-agent events (``BeforeNodeCallEvent``, ``AfterMultiAgentInvocationEvent``, ...); they are found
    when the plugin is made, in declaration order with a parent class's methods first.

    Example:
        ```python
        from ray_harness.hooks import AfterNodeCallEvent
        from ray_harness.plugins import MultiAgentPlugin, hook

        class NodeLog(MultiAgentPlugin):
            name = "node-log"

            def __init__(self) -> None:
                super().__init__()
                self.finished: list[str] = []

            @hook
            def done(self, event: AfterNodeCallEvent) -> None:
                self.finished.append(event.node_id)
        ```
    """

    def init_multi_agent(self, orchestrator: MultiAgentBase) -> Awaitable[None] | None:
        """Set the orchestrator up; called once per orchestrator, before the plugin's hooks are registered.

        Override it for setup ``@hook`` does not cover (``orchestrator.add_hook(...)``, ...); it may be
        ``async``. The default does nothing.

        Args:
            orchestrator: The Graph or Swarm being built (fully configured; its initialized event not yet sent).
        """
        return None
