"""``config_to_agent``: an ``Agent`` from a JSON or YAML configuration (Strands' ``strands.experimental.agent_config``).

A configuration names the agent's ``name``, ``model`` (a ray_harness model string such as
``"anthropic:claude-sonnet-4-5"``, as ``Agent(model=...)`` takes; without one, the agent's default:
``RAY_HARNESS_MODEL``), ``prompt`` (its system prompt) and ``tools``, and nothing else. Each tool is a string:

- a path to a Python file (``"./tools/weather.py"``): its ``@tool`` functions;
- a module path (``"my_package.tools"``): its ``@tool`` functions, else a Strands module tool (``TOOL_SPEC`` and
  a function of the module's own name);
- a module path and a name (``"my_package.tools:forecast"``): that ``@tool`` function.

Tools that need constructing (an MCP client, a tool with arguments) are added in code: pass them as
``config_to_agent(config, tools=[...])`` (keyword arguments replace the configuration's) or register them after
(``agent.tool_registry.register(...)``). Example::

    from ray_harness.experimental import config_to_agent

    agent = config_to_agent("agent.yaml", callback_handler=None)

A tool loaded from a file path lives in a module of this process only; to run the agent on a Ray host, name
tools by module paths importable there.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ray_harness.tools.base import AgentTool
from ray_harness.tools.decorator import DecoratedFunctionTool

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("AGENT_CONFIG_SCHEMA", "config_to_agent")

AGENT_CONFIG_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Agent configuration",
    "description": "What config_to_agent builds an Agent from",
    "type": "object",
    "properties": {
        "name": {"type": ["string", "null"], "default": None, "description": "The agent's name"},
        "model": {"type": ["string", "null"], "default": None,
                  "description": "A ray_harness model string (e.g. 'anthropic:<model id>'); the default model if null"},
        "prompt": {"type": ["string", "null"], "default": None, "description": "The agent's system prompt"},
        "tools": {"type": "array", "items": {"type": "string"}, "default": [],
                  "description": "Tools by file path, module path, or 'module.path:function'"},
    },
    "additionalProperties": False,
}
"""The configuration's JSON Schema (draft-07), for editors and other validators; :func:`config_to_agent` checks it."""

_YAML_SUFFIXES = (".yaml", ".yml")
# Configuration key -> Agent argument.
_ARGUMENTS = {"name": "name", "model": "model", "prompt": "system_prompt", "tools": "tools"}


class _AgentConfig(BaseModel):
    """:data:`AGENT_CONFIG_SCHEMA` as the model that checks it (strict: a number is no model string)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str | None = None
    model: str | None = None
    prompt: str | None = None
    tools: list[str] = []


def config_to_agent(config: str | os.PathLike[str] | dict[str, Any], **kwargs: Any) -> Agent:
    """An ``Agent`` from a configuration file (JSON, or YAML for ``.yaml``/``.yml``) or dict.

    Args:
        config: A file path (a ``file://`` prefix is allowed) or the configuration as a dict.
        **kwargs: More ``Agent`` arguments; they replace the configuration's (``system_prompt=`` replaces
            ``prompt``).

    Returns:
        The agent.

    Raises:
        FileNotFoundError: No file at the path.
        json.JSONDecodeError: The JSON file does not parse.
        ValueError: ``config`` is neither a path nor a dict, the YAML does not parse, the configuration breaks
            :data:`AGENT_CONFIG_SCHEMA` (the field is named), or a tool cannot be loaded (its index is named).
    """
    values = _read(config)
    try:
        checked = _AgentConfig.model_validate(values)
    except ValidationError as error:
        problem = error.errors()[0]
        where = " -> ".join(str(part) for part in problem["loc"]) or "root"
        raise ValueError(f"Configuration validation error at {where}: {problem['msg']}") from None
    arguments: dict[str, Any] = {}
    for key, argument in _ARGUMENTS.items():
        value = getattr(checked, key)
        if value is not None and argument not in kwargs:
            arguments[argument] = load_tools(value) if key == "tools" else value
    arguments.update(kwargs)
    from ray_harness.agent.agent import Agent

    return Agent(**arguments)


def _read(config: Any) -> Any:
    if isinstance(config, dict):
        return dict(config)
    if not isinstance(config, str | os.PathLike):
        raise ValueError(f"config must be a file path or a dict, got {type(config).__name__}")
    text_path = os.fspath(config)
    path = Path(text_path.removeprefix("file://")).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"Configuration file not found: {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() not in _YAML_SUFFIXES:
        return json.loads(text)
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f"Configuration file {path} is not valid YAML: {error}") from None


def load_tools(specs: list[str]) -> list[AgentTool]:
    """The tools each string of ``specs`` names (see the module's documentation), in order."""
    tools: list[AgentTool] = []
    for index, spec in enumerate(specs):
        try:
            tools.extend(_load(spec))
        except (ImportError, AttributeError, ValueError, TypeError, OSError) as error:
            raise ValueError(f"Configuration tools -> {index}: cannot load tool {spec!r}: {error}") from error
    return tools


def _load(spec: str) -> list[AgentTool]:
    path = Path(spec).expanduser()
    if path.is_file():
        return _module_tools(_file_module(path), path.stem)
    module_path, _, attribute = spec.partition(":")
    module = importlib.import_module(module_path)
    if not attribute:
        return _module_tools(module, module_path.rpartition(".")[2])
    target = getattr(module, attribute, None)
    if not isinstance(target, AgentTool):
        raise AttributeError(f"module {module_path!r} has no @tool function {attribute!r}")
    return [target]


def _file_module(path: Path) -> ModuleType:
    """The Python file at ``path`` as a module of its own (one per file: two ``tools.py`` do not collide)."""
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    name = f"_ray_harness_config_tool_{resolved.stem}_{digest}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    module_spec = importlib.util.spec_from_file_location(name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"{resolved} is not a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # while it runs (dataclasses and pydantic look their module up) and after
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _module_tools(module: ModuleType, tool_name: str) -> list[AgentTool]:
    """A module's ``@tool`` functions (those it imported too, as in Strands); else its Strands module tool (``TOOL_SPEC`` and a function ``tool_name``)."""
    found: list[AgentTool] = [value for _, value in inspect.getmembers(module)
                              if isinstance(value, DecoratedFunctionTool)]
    if found:
        return found
    spec = getattr(module, "TOOL_SPEC", None)
    if not isinstance(spec, dict):
        raise AttributeError(f"module {module.__name__!r} has no @tool function and no TOOL_SPEC")
    function = getattr(module, tool_name, None)
    if not callable(function):
        raise AttributeError(f"module tool {tool_name!r} has TOOL_SPEC but no function {tool_name!r}")
    from ray_harness.tools.python_tool import PythonAgentTool

    return [PythonAgentTool(tool_name, spec, function)]  # type: ignore[arg-type]
