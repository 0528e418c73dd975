"""Attaching plugins to an agent: validation, ``init_agent``, then hooks and tools.

As in Strands, each plugin's ``init_agent`` runs first (awaited when it returns an awaitable), then its
``@hook`` methods are registered through ``agent.add_hook`` and its ``@tool`` methods through the agent's tool
registry. Unlike Strands, every entry is checked before any plugin is initialised, so a wrong entry is named
before an earlier plugin has changed the agent. The registry keeps the plugins by name and no reference back
to the agent: it pickles with it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ray_harness.agent._sync import run_sync
from ray_harness.hooks.registry import infer_event_types, is_hook_provider
from ray_harness.plugins.decorator import HOOK_EVENT_TYPES
from ray_harness.plugins.plugin import Plugin

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("PluginRegistry", "register_plugins")


class PluginRegistry:
    """The plugins of one agent, by name, in registration order."""

    def __init__(self) -> None:
        self._plugins: dict[str, Plugin] = {}

    @property
    def plugins(self) -> dict[str, Plugin]:
        """Name → plugin (a copy)."""
        return dict(self._plugins)

    def add_and_init(self, agent: Agent, plugin: Plugin) -> None:
        """Initialise ``plugin`` with ``agent`` and register its hooks and tools there.

        Raises:
            TypeError: ``plugin`` is not a :class:`Plugin`, or its ``name`` is not a string.
            ValueError: Its name is empty or already taken by another plugin of the agent.
        """
        name = _checked(plugin, "plugin")
        if name in self._plugins:
            raise ValueError(f"plugin_name=<{name}> | plugin already registered")
        self._plugins[name] = plugin
        started = plugin.init_agent(agent)
        if inspect.isawaitable(started):
            run_sync(_wait(started))  # Agent() is sync; run_sync uses a thread when a loop runs here
        for callback in plugin.hooks:
            event_types = getattr(callback, HOOK_EVENT_TYPES, None) or infer_event_types(callback)
            agent.add_hook(callback, list(event_types))
        if plugin.tools:
            agent.tool_registry.process_tools(list(plugin.tools))


def register_plugins(agent: Agent, plugins: Any) -> PluginRegistry:
    """``Agent(plugins=...)``: check every entry, then add and initialise each in order.

    Raises:
        TypeError: ``plugins`` is not a list (or tuple) of :class:`Plugin` objects; the error names the entry.
        ValueError: Two plugins share a name, or a name is empty.
    """
    if not isinstance(plugins, list | tuple):
        raise TypeError(f"plugins must be a list of Plugin objects, got {type(plugins).__name__}")
    names: dict[str, int] = {}
    for index, plugin in enumerate(plugins):
        name = _checked(plugin, f"plugins[{index}]")
        if name in names:
            raise ValueError(f"plugin_name=<{name}> | plugin already registered (plugins[{names[name]}] and "
                             f"plugins[{index}] share the name)")
        names[name] = index
    registry = PluginRegistry()
    for plugin in plugins:
        registry.add_and_init(agent, plugin)
    return registry


def _checked(plugin: Any, field: str) -> str:
    """The name of ``plugin``, after checking that it is a plugin with a usable name."""
    if not isinstance(plugin, Plugin):
        raise TypeError(f"{field} must be a ray_harness.plugins.Plugin, got {_described(plugin)}")
    name = plugin.name
    if not isinstance(name, str):
        raise TypeError(f"{field}.name must be a string, got {type(name).__name__}")
    if not name.strip():
        raise ValueError(f"{field}.name must not be empty")
    return name


def _described(value: Any) -> str:
    """``value``'s type, with the likely mistake behind it."""
    kind = type(value)
    if isinstance(value, type) and issubclass(value, Plugin):
        return f"the class {value.__name__} (pass an instance: {value.__name__}())"
    if kind.__module__.split(".")[0] == "strands":
        return f"{kind.__name__} from Strands (subclass ray_harness.plugins.Plugin and use its hook decorator)"
    if is_hook_provider(value):
        return f"{kind.__name__}, a hook provider (pass it in hooks=)"
    return kind.__name__


async def _wait(awaitable: Awaitable[None]) -> None:
    await awaitable
