"""``ToolRegistry``: the tools of one agent, by name."""

from __future__ import annotations

import inspect
from typing import Any

from ray_harness.tools._spec import normalize_tool_spec
from ray_harness.tools.base import AgentTool, ToolProvider
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.types.tools import ToolSpec

__all__ = ("AgentTool", "DecoratedFunctionTool", "ToolRegistry")


_NOT_LOADED_HINT = (" (unlike Strands, tools are not loaded from file paths, module paths or modules: import the "
                    "module and pass its @tool functions; a TOOL_SPEC module tool is "
                    "PythonAgentTool(module.TOOL_SPEC['name'], module.TOOL_SPEC, <its function>))")


class ToolRegistry:
    """The tools of one agent, by name, plus the tool providers whose tools load at the first run."""

    def __init__(self) -> None:
        self._tools: dict[str, AgentTool] = {}
        self._providers: list[ToolProvider] = []
        self._providers_loaded = False
        self._normalized: tuple[list[ToolSpec], list[ToolSpec]] | None = None  # (raw specs, what they became)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_normalized", None)  # a copy of every schema: not worth shipping to an actor
        return state

    def process_tools(self, tools: list[Any] | None) -> None:
        """Register every item of ``tools`` (see :meth:`register`)."""
        for item in tools or []:
            self.register(item)

    def register(self, item: Any) -> None:
        """Register a tool, a plain function, an agent (as a tool) or a tool provider."""
        if isinstance(item, AgentTool):
            self._add(item)
        elif hasattr(item, "as_tool") and callable(item.as_tool) and not isinstance(item, type):
            self._add(item.as_tool())
        elif isinstance(item, ToolProvider) and not inspect.isfunction(item):
            self._providers.append(item)
            self._providers_loaded = False
        elif isinstance(item, list | tuple):
            for inner in item:
                self.register(inner)
        elif inspect.isfunction(item) or inspect.ismethod(item):
            self._add(tool(item))
        else:
            raise ValueError(f"cannot use {item!r} as a tool: expected @tool function, AgentTool, Agent or tool "
                             f"provider{_NOT_LOADED_HINT if isinstance(item, str) or inspect.ismodule(item) else ''}")

    def register_tool(self, agent_tool: AgentTool) -> None:
        """Register one tool, as Strands' ``register_tool``.

        A tool whose ``supports_hot_reload`` is True (``@tool`` functions, ``PythonAgentTool``) replaces a
        registered tool of its name, as Strands' hot reload does; any other tool of a registered name is refused.

        Raises:
            TypeError: ``agent_tool`` is not an ``AgentTool``.
            ValueError: Its name is registered and it does not support hot reload, or it differs from a
                registered name only by ``-`` and ``_``.
        """
        if not isinstance(agent_tool, AgentTool):
            raise TypeError(f"register_tool takes an AgentTool, got {type(agent_tool).__name__}; use register() "
                            f"for functions, agents and tool providers")
        name = agent_tool.tool_name
        if name in self._tools and not agent_tool.supports_hot_reload:
            raise ValueError(f"tool name {name!r} is already registered; only a tool whose supports_hot_reload is "
                             f"True (a @tool function, a PythonAgentTool) replaces one, or use replace()")
        self._add(agent_tool, replace=True)

    def replace(self, new_tool: AgentTool) -> None:
        """Put ``new_tool`` in the place of the registered tool of its name (Strands' ``replace``).

        Raises:
            ValueError: No tool of its name is registered.
        """
        name = new_tool.tool_name
        if name not in self._tools:
            raise ValueError(f"cannot replace tool {name!r}: no tool of that name is registered")
        self._tools[name] = new_tool

    @property
    def dynamic_tools(self) -> dict[str, AgentTool]:
        """The registered tools marked as loaded at run time (``AgentTool.mark_dynamic()``), by name."""
        return {name: agent_tool for name, agent_tool in self._tools.items() if agent_tool.is_dynamic}

    def _add(self, agent_tool: AgentTool, *, replace: bool = False) -> None:
        name = agent_tool.tool_name
        if self._tools.get(name) is agent_tool:
            return  # the same tool listed twice (tools=common + extra), as Strands accepts it
        if name in self._tools and not replace:
            # NOTE: Strands keeps the last of two @tool functions of one name; one of them silently lost is a bug.
            raise ValueError(f"tool name {name!r} is already registered")
        # As in Strands: `agent.tool.my_tool` reaches `my-tool` too, so two names equal but for - and _ would clash.
        twin = next((known for known in self._tools if known != name
                     and known.replace("-", "_") == name.replace("-", "_")), None)
        if twin is not None:
            raise ValueError(f"tool name {name!r} is already registered as {twin!r}: names may not differ only by "
                             f"'-' and '_'")
        self._tools[name] = agent_tool

    def add_default(self, agent_tool: AgentTool) -> None:
        """Add a vended tool unless a user tool of the same name exists (the user's wins)."""
        if agent_tool.tool_name not in self._tools:
            self._add(agent_tool)

    async def load_providers(self) -> None:
        """Load the tools of every provider once (MCP servers start here)."""
        if self._providers_loaded:
            return
        for provider in self._providers:
            for agent_tool in await provider.load_tools():
                name = agent_tool.tool_name
                known = self._tools.get(name)
                if known is agent_tool:
                    continue  # loaded by an earlier invocation that failed later on
                if known is not None:
                    # Two MCP servers often share tool names; the bare "already registered" names neither.
                    raise ValueError(f"tool name {name!r} of {provider!r} is already registered (by {known!r}); "
                                     f"give one of them a prefix (MCPClient(..., prefix=...)) or rename the tool")
                self._add(agent_tool)
        self._providers_loaded = True

    @property
    def providers(self) -> list[ToolProvider]:
        """The registered tool providers."""
        return list(self._providers)

    @property
    def has_providers(self) -> bool:
        """Whether any tool provider is registered (asked per invocation: no copy of :attr:`providers`)."""
        return bool(self._providers)

    def remove(self, name: str) -> None:
        """Unregister the tool ``name`` (an absent name is ignored)."""
        self._tools.pop(name, None)

    def get(self, name: str) -> AgentTool | None:
        """The tool named ``name``, or ``None``."""
        return self._tools.get(name)

    @property
    def registry(self) -> dict[str, AgentTool]:
        """Tool name → tool (the live mapping)."""
        return self._tools

    @property
    def names(self) -> list[str]:
        """The tool names, in registration order."""
        return list(self._tools)

    def get_all_specs(self) -> list[ToolSpec]:
        """The specs of every tool as the model receives them, in registration order.

        Read afresh each time (a tool's ``tool_spec`` may be replaced at run time) and normalised as in Strands:
        a bare input schema is wrapped in ``{"json": ...}``; a schema gets ``type``, ``properties`` and
        ``required``, each property a ``type`` and a ``description`` (see ``ray_harness.tools._spec``).
        """
        raw = [t.tool_spec for t in self._tools.values()]
        cached = getattr(self, "_normalized", None)  # None in a registry pickled without it
        # Normalising is a deep copy of every schema; it runs before every model call, so it is redone only when
        # a spec object changed (a tool added or removed, a tool_spec replaced).
        if cached is None or len(cached[0]) != len(raw) or any(a is not b for a, b in zip(cached[0], raw, strict=True)):
            cached = self._normalized = (raw, [normalize_tool_spec(spec, name)
                                               for name, spec in zip(self._tools, raw, strict=True)])
        return cached[1]



