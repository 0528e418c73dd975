"""``Plugin``: one object that adds hooks, tools and setup to an agent (Strands' ``strands.plugins.Plugin``).

``Agent(plugins=[...])`` registers each plugin's ``@hook`` methods in the agent's hook registry and its
``@tool`` methods in its tool registry, after calling :meth:`Plugin.init_agent`. The hooks are bound methods
of the plugin: whatever state the plugin keeps is shared by its hooks and tools, and travels with the agent
when the agent is pickled into a Ray actor.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ray_harness.plugins._base import HookedPlugin
from ray_harness.plugins._discovery import discover_tools
from ray_harness.tools.decorator import DecoratedFunctionTool

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("Plugin",)


class Plugin(HookedPlugin):
    """Base class of agent plugins: a ``name``, ``@hook`` and ``@tool`` methods, and an optional ``init_agent``.

    ``name`` identifies the plugin (two plugins of one agent may not share it); a subclass sets it as a class
    attribute or a property. Decorated methods are found when the plugin is made, in declaration order with a
    parent class's methods first; an overriding method replaces its parent's (and drops it when the override
    is not decorated). A class may subclass :class:`~ray_harness.plugins.MultiAgentPlugin` too, to be passed
    to agents and to orchestrators.

    Example:
        ```python
        from ray_harness import tool
        from ray_harness.hooks import BeforeModelCallEvent
        from ray_harness.plugins import Plugin, hook

        class Counter(Plugin):
            name = "counter"

            def __init__(self) -> None:
                super().__init__()
                self.calls = 0

            @hook
            def count(self, event: BeforeModelCallEvent) -> None:
                self.calls += 1

            @tool
            def model_calls(self) -> int:
                '''How many model calls this agent made.'''
                return self.calls
        ```
    """

    def __init__(self) -> None:
        """Find the ``@hook`` and ``@tool`` methods (once, also under multiple inheritance)."""
        super().__init__()
        if "_tools" not in self.__dict__:
            self._tools: list[DecoratedFunctionTool] = discover_tools(self)

    @property
    def tools(self) -> list[DecoratedFunctionTool]:
        """The tools the agent registers: the ``@tool`` methods, bound to this plugin."""
        if "_tools" not in self.__dict__:
            self._tools = discover_tools(self)
        return self._tools

    def init_agent(self, agent: Agent) -> Awaitable[None] | None:
        """Set the agent up; called once per agent, before the plugin's hooks and tools are registered.

        Override it for setup the decorators do not cover (``agent.add_hook(...)``, ``agent.state``, ...);
        it may be ``async``. The default does nothing.

        Args:
            agent: The agent being built.
        """
        return None
