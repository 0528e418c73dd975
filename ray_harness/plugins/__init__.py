"""Plugins: hooks, tools and setup in one object, attached with ``Agent(plugins=[...])`` (Strands' plugins).

:class:`Plugin` subclasses name themselves, mark methods with :func:`hook` (the event type comes from the
annotation; a union subscribes to each event) and with :func:`ray_harness.tool`, and may override
``init_agent(agent)`` (sync or async). :class:`MultiAgentPlugin` is the same for a Graph or Swarm
(``plugins=[...]``, ``GraphBuilder.set_plugins``): ``@hook`` methods and ``init_multi_agent(orchestrator)``.
A class may subclass both.
"""

from ray_harness.plugins.decorator import hook
from ray_harness.plugins.multiagent_plugin import MultiAgentPlugin
from ray_harness.plugins.plugin import Plugin

__all__ = ["MultiAgentPlugin", "Plugin", "hook"]
