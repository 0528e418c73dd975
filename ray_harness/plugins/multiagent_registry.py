"""Attaching plugins to a Graph or Swarm: validation, ``init_multi_agent``, then hooks.

As for agents (:mod:`ray_harness.plugins.registry`): every entry is checked first (:func:`check_multi_agent_plugins`,
which the orchestrator calls before it changes anything, e.g. before a Swarm gives its members the handoff tool),
then each plugin's ``init_multi_agent`` runs (awaited when it returns an awaitable) and its ``@hook`` methods are
registered through ``orchestrator.add_hook``. The registry keeps the plugins by name and no reference back to the
orchestrator: it pickles with it (``runtime="ray"`` ships the orchestrator, plugins included, to its
orchestration host).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray_harness.plugins.multiagent_plugin import MultiAgentPlugin
from ray_harness.plugins.registry import NamedPlugins, check_plugins, register_hooks, run_init

if TYPE_CHECKING:
    from ray_harness.multiagent.base import MultiAgentBase

__all__ = ("MultiAgentPluginRegistry", "check_multi_agent_plugins", "register_multi_agent_plugins")


class MultiAgentPluginRegistry(NamedPlugins[MultiAgentPlugin]):
    """The plugins of one orchestrator, by name, in registration order."""

    def add_and_init(self, orchestrator: MultiAgentBase, plugin: MultiAgentPlugin) -> None:
        """Initialise ``plugin`` with ``orchestrator`` and register its hooks there.

        Raises:
            TypeError: ``plugin`` is not a :class:`MultiAgentPlugin`, or its ``name`` is not a string.
            ValueError: Its name is empty or already taken by another plugin of the orchestrator.
        """
        self._add(plugin, MultiAgentPlugin)
        run_init(plugin.init_multi_agent(orchestrator))
        register_hooks(plugin, orchestrator.add_hook)


def check_multi_agent_plugins(plugins: Any) -> list[MultiAgentPlugin]:
    """``Graph/Swarm(plugins=...)``: the entries as a list, after checking each (``None``: no plugins).

    Raises:
        TypeError: ``plugins`` is not a list (or tuple) of :class:`MultiAgentPlugin` objects; names the entry.
        ValueError: Two plugins share a name, or a name is empty.
    """
    if plugins is None:
        return []
    check_plugins(plugins, MultiAgentPlugin)
    return list(plugins)


def register_multi_agent_plugins(orchestrator: MultiAgentBase, plugins: list[MultiAgentPlugin]
                                 ) -> MultiAgentPluginRegistry:
    """Add and initialise checked ``plugins`` (from :func:`check_multi_agent_plugins`) in order."""
    registry = MultiAgentPluginRegistry()
    for plugin in plugins:
        registry.add_and_init(orchestrator, plugin)
    return registry
