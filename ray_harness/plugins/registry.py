"""Attaching plugins to an agent: validation, ``init_agent``, then hooks and tools.

The checks and steps here are shared with orchestrators (:mod:`ray_harness.plugins.multiagent_registry`).

As in Strands, each plugin's ``init_agent`` runs first (awaited when it returns an awaitable), then its
``@hook`` methods are registered through ``agent.add_hook`` and its ``@tool`` methods through the agent's tool
registry. Unlike Strands, every entry is checked before any plugin is initialised, so a wrong entry is named
before an earlier plugin has changed the agent. The registry keeps the plugins by name and no reference back
to the agent: it pickles with it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ray_harness.agent._sync import run_sync
from ray_harness.hooks.registry import infer_event_types, is_hook_provider
from ray_harness.plugins._base import HookedPlugin
from ray_harness.plugins.decorator import HOOK_EVENT_TYPES
from ray_harness.plugins.plugin import Plugin

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

P = TypeVar("P", bound=HookedPlugin)

__all__ = ("NamedPlugins", "PluginRegistry", "check_plugins", "checked_name", "register_hooks", "register_plugins", "run_init")


class NamedPlugins(Generic[P]):
    """Plugins by name, in registration order (the part agent and orchestrator registries share)."""

    def __init__(self) -> None:
        self._plugins: dict[str, P] = {}

    @property
    def plugins(self) -> dict[str, P]:
        """Name → plugin (a copy)."""
        return dict(self._plugins)

    def _add(self, plugin: P, kind: type[Any]) -> None:
        name = checked_name(plugin, "plugin", kind)
        if name in self._plugins:
            raise ValueError(f"plugin_name=<{name}> | plugin already registered")
        self._plugins[name] = plugin


class PluginRegistry(NamedPlugins[Plugin]):
    """The plugins of one agent, by name, in registration order."""

    def add_and_init(self, agent: Agent, plugin: Plugin) -> None:
        """Initialise ``plugin`` with ``agent`` and register its hooks and tools there.

        Raises:
            TypeError: ``plugin`` is not a :class:`Plugin`, or its ``name`` is not a string.
            ValueError: Its name is empty or already taken by another plugin of the agent.
        """
        self._add(plugin, Plugin)
        run_init(plugin.init_agent(agent))
        register_hooks(plugin, agent.add_hook)
        if plugin.tools:
            agent.tool_registry.process_tools(list(plugin.tools))


def register_plugins(agent: Agent, plugins: Any) -> PluginRegistry:
    """``Agent(plugins=...)``: check every entry, then add and initialise each in order.

    Raises:
        TypeError: ``plugins`` is not a list (or tuple) of :class:`Plugin` objects; the error names the entry.
        ValueError: Two plugins share a name, or a name is empty.
    """
    check_plugins(plugins, Plugin)
    registry = PluginRegistry()
    for plugin in plugins:
        registry.add_and_init(agent, plugin)
    return registry


def check_plugins(plugins: Any, kind: type[Any]) -> None:
    """Check a ``plugins=`` list of ``kind`` objects before any of them is initialised.

    ``kind`` is :class:`Plugin` or :class:`~ray_harness.plugins.MultiAgentPlugin` (typed ``type[Any]``: both
    are abstract).

    Raises:
        TypeError: ``plugins`` is not a list (or tuple) of ``kind`` objects; the error names the entry.
        ValueError: Two plugins share a name, or a name is empty.
    """
    if not isinstance(plugins, list | tuple):
        raise TypeError(f"plugins must be a list of {kind.__name__} objects, got {type(plugins).__name__}")
    names: dict[str, int] = {}
    for index, plugin in enumerate(plugins):
        name = checked_name(plugin, f"plugins[{index}]", kind)
        if name in names:
            raise ValueError(f"plugin_name=<{name}> | plugin already registered (plugins[{names[name]}] and "
                             f"plugins[{index}] share the name)")
        names[name] = index


def checked_name(plugin: Any, field: str, kind: type[Any] = Plugin) -> str:
    """The name of ``plugin``, after checking that it is a ``kind`` with a usable name."""
    if not isinstance(plugin, kind):
        raise TypeError(f"{field} must be a ray_harness.plugins.{kind.__name__}, got {_described(plugin, kind)}")
    name = plugin.name
    if not isinstance(name, str):
        raise TypeError(f"{field}.name must be a string, got {type(name).__name__}")
    if not name.strip():
        raise ValueError(f"{field}.name must not be empty")
    return name


def _described(value: Any, kind: type[Any]) -> str:
    """``value``'s type, with the likely mistake behind it."""
    described = type(value).__name__
    if isinstance(value, type) and issubclass(value, kind):
        return f"the class {value.__name__} (pass an instance: {value.__name__}())"
    if type(value).__module__.split(".")[0] == "strands":
        return f"{described} from Strands (subclass ray_harness.plugins.{kind.__name__} and use its hook decorator)"
    if isinstance(value, HookedPlugin):  # the other kind of plugin
        if kind is Plugin:
            return f"{described}, a MultiAgentPlugin (pass it to Graph or Swarm plugins=, or subclass Plugin too)"
        return f"{described}, an agent Plugin (pass it to Agent(plugins=), or subclass MultiAgentPlugin too)"
    if is_hook_provider(value):
        return f"{described}, a hook provider (pass it in hooks=)"
    return described


def run_init(started: Awaitable[None] | None) -> None:
    """Wait for an ``init_*`` method's awaitable, when it returned one (even from a method not declared async)."""
    if inspect.isawaitable(started):
        run_sync(_wait(started))  # constructors are sync; run_sync uses a thread when a loop runs here


def register_hooks(plugin: HookedPlugin, add_hook: Callable[[Any, list[Any]], None]) -> None:
    """Register each hook of ``plugin`` through ``add_hook`` (an agent's or an orchestrator's)."""
    for callback in plugin.hooks:
        event_types = getattr(callback, HOOK_EVENT_TYPES, None) or infer_event_types(callback)
        add_hook(callback, list(event_types))


async def _wait(awaitable: Awaitable[None]) -> None:
    await awaitable
