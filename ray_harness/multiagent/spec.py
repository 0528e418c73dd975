"""Authority modes for model-driven multi-agent tools (Strands' ``strands.multiagent.spec``).

The vended ``subagent`` and ``swarm`` tools let the model configure child agents at run time. Each
configurable property of a child (an *axis*: ``instructions``, ``tools``, ``model``, and the role
``agent_type``) takes an authority mode the developer chooses:

- :class:`Fixed` — the developer pins the value; the model never sees the axis.
- :class:`Inherit` — the child takes the parent's value; the model never sees the axis.
- :class:`Open` — the model writes a free-form string.
- :class:`Choice` — the model picks from a developer-supplied set (one, or several with ``multiple=True``).

A :class:`Preset` is a named role (instructions, tools, model) the model selects with ``agent_type``.
:func:`resolve_specs` turns the model's arguments into :class:`AgentSpec` values (per axis: the
model's value, then the preset's, then the axis default), and an :data:`AgentBuilder` turns a spec
into an ``Agent``; :func:`default_builder` builds one the way the parent was built.

Every type here is a frozen dataclass of plain values, so tools holding them pickle (agents ship to
Ray hosts with their tools).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.models import Model, ModelRouter

__all__ = ("AgentBuilder", "AgentSpec", "Axis", "Choice", "Fixed", "Inherit", "Open", "Option", "Preset",
           "check_axes", "default_builder", "resolve_specs", "to_schema_properties")

logger = logging.getLogger(__name__)

AgentBuilder = Callable[["AgentSpec"], "Agent"]
"""Turns a resolved :class:`AgentSpec` into the child ``Agent`` (see :func:`default_builder`)."""


class _Unset(enum.Enum):
    # An enum member, not a bare object(): it stays the same object when an Option is pickled (a tool holding
    # Choice options ships to a Ray host), so "no value given" is still recognised there.
    UNSET = "UNSET"


_UNSET: Any = _Unset.UNSET
"""The default of :attr:`Option.value`, so ``None`` can be a real value."""

_AXIS_DESCRIPTIONS = {
    "agent_type": "Role to assign this agent.",
    "instructions": "A system prompt defining this agent's role.",
    "tools": ("Subset of tools to grant this agent. Fewer is safer; it cannot exceed your own. "
              "Omit to grant all inherited tools."),
    "model": "Which model this agent runs on. Omit to inherit the parent's model.",
}
"""What the model reads for each axis (Strands' text)."""


@dataclass(frozen=True)
class Fixed:
    """The developer pins the value; the axis adds no parameter for the model."""

    value: Any = None


@dataclass(frozen=True)
class Inherit:
    """The child takes the parent's value; the axis adds no parameter for the model."""


@dataclass(frozen=True)
class Open:
    """The model writes the value freely; the axis adds a string parameter."""


@dataclass(frozen=True)
class Option:
    """One entry of a :class:`Choice`: the ``name`` the model picks, the ``value`` it stands for (default: the name)."""

    name: str
    value: Any = _UNSET
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Option.name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.description, str):
            raise ValueError(f"Option.description must be a string, got {type(self.description).__name__}")


@dataclass(frozen=True)
class Choice:
    """The model picks from a developer-supplied set: bare names or :class:`Option` s.

    ``multiple=True`` lets it pick several (required for the ``tools`` axis).
    """

    options: Sequence[str | Option]
    multiple: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.options, str) or not isinstance(self.options, Sequence):
            raise ValueError(f"Choice.options must be a list of names or Options, got {self.options!r}")
        for index, entry in enumerate(self.options):
            if not isinstance(entry, str | Option):
                raise ValueError(f"Choice.options[{index}] must be a string or an Option, got {entry!r}")
        if not isinstance(self.multiple, bool):
            raise ValueError(f"Choice.multiple must be a bool, got {self.multiple!r}")

    def normalized(self) -> list[Option]:
        """The options as :class:`Option` s whose ``value`` is set (a bare name, or an unset value, is the name)."""
        result = []
        for entry in self.options:
            if isinstance(entry, Option):
                result.append(entry if entry.value is not _UNSET else Option(entry.name, entry.name, entry.description))
            else:
                result.append(Option(entry, entry))
        return result

    def value_for(self, name: str) -> Any:
        """The value behind the option ``name``, or ``name`` itself when no option has that name."""
        for option in self.normalized():
            if option.name == name:
                return option.value
        return name


Axis: TypeAlias = Fixed | Inherit | Open | Choice
"""Any authority mode an axis can take."""


@dataclass(frozen=True)
class Preset:
    """A named role: part of a child's configuration, selected by the model through ``agent_type``."""

    instructions: str | None = None
    tools: Sequence[str] | None = None
    model: Model | ModelRouter | str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.instructions is not None and not isinstance(self.instructions, str):
            raise ValueError(f"Preset.instructions must be a string or None, got {type(self.instructions).__name__}")
        if self.tools is not None and (isinstance(self.tools, str) or not isinstance(self.tools, Sequence)
                                       or not all(isinstance(name, str) for name in self.tools)):
            raise ValueError(f"Preset.tools must be a list of tool names or None, got {self.tools!r}")
        if not isinstance(self.description, str):
            raise ValueError(f"Preset.description must be a string, got {type(self.description).__name__}")


@dataclass
class AgentSpec:
    """A child's resolved configuration, handed to the :data:`AgentBuilder`.

    ``tools=None`` means every tool the parent has; ``model=None`` the parent's model.
    """

    name: str | None = None
    agent_type: str | None = None
    instructions: str | None = None
    tools: list[str] | None = None
    model: Model | ModelRouter | str | None = None


def _describe_preset(preset: Preset) -> str:
    """The preset's description and which fields it sets (not the instruction text: the schema stays small)."""
    parts = []
    if preset.instructions is not None:
        parts.append("instructions")
    if preset.tools is not None:
        parts.append(f"tools: {', '.join(preset.tools) or 'none'}")
    if preset.model is not None:
        parts.append(f"model: {preset.model}" if isinstance(preset.model, str) else "model")
    if not parts:
        return preset.description
    sets = f"sets {'; '.join(parts)}"
    return f"{preset.description} ({sets})" if preset.description else sets


def _choice_property(key: str, axis: Choice, description: str) -> dict[str, Any]:
    options = axis.normalized()
    if not options:
        raise ValueError(f"{key}=Choice([]) offers no options; use Fixed(...), or omit {key} to use its default.")
    if key == "tools" and not axis.multiple:
        raise ValueError(f"{key}=Choice(...) must be multiple=True; a child agent selects a subset of {key}.")
    names = [option.name for option in options]
    lines = [f"- {option.name}: {option.description}" for option in options if option.description]
    if lines:
        description = f"{description}\nOptions:\n" + "\n".join(lines)
    prop: dict[str, Any] = {"type": "array", "items": {"type": "string", "enum": names}} if axis.multiple \
        else {"type": "string", "enum": names}
    prop["description"] = description
    return prop


def to_schema_properties(*, presets: Mapping[str, Preset], default_preset: str | None, instructions: Axis | None,
                         tools: Axis | None, model: Axis | None) -> dict[str, Any]:
    """The JSON Schema properties of the axes the model sees (``Open`` and ``Choice``), plus ``agent_type`` over ``presets``.

    Raises:
        ValueError: A ``Choice`` axis has no options, or the ``tools`` ``Choice`` is not ``multiple``; the
            message names the axis.
    """
    agent_type = Choice([Option(name, description=_describe_preset(preset)) for name, preset in presets.items()]) \
        if presets else None
    axes: dict[str, Axis | None] = {"agent_type": agent_type, "instructions": instructions, "tools": tools,
                                    "model": model}
    props: dict[str, Any] = {}
    for key, axis in axes.items():
        description = _AXIS_DESCRIPTIONS[key]
        if key == "agent_type" and default_preset is not None:
            description = f"{description} Omit to use the default ({default_preset!r})."
        if isinstance(axis, Open):
            props[key] = {"type": "string", "description": description}
        elif isinstance(axis, Choice):
            props[key] = _choice_property(key, axis, description)
    return props


def check_axes(*, presets: Mapping[str, Preset], default_preset: str | None, instructions: Any, tools: Any,
               model: Any) -> None:
    """Check a tool factory's axis arguments before any schema is built; each error names the argument.

    Raises:
        ValueError: An axis has a mode it does not take, a preset is not a ``Preset``, or ``default_preset``
            names no preset.
    """
    allowed: dict[str, tuple[type, ...]] = {"instructions": (Open, Choice, Fixed), "tools": (Choice, Fixed, Inherit),
                                            "model": (Inherit, Choice, Fixed)}
    for key, axis in (("instructions", instructions), ("tools", tools), ("model", model)):
        if axis is not None and not isinstance(axis, allowed[key]):
            modes = " | ".join(kind.__name__ for kind in allowed[key])
            raise ValueError(f"{key} must be {modes}, got {axis!r}")
    if isinstance(tools, Fixed) and tools.value is not None and (
            isinstance(tools.value, str) or not isinstance(tools.value, Sequence)):
        raise ValueError(f"tools=Fixed(...) must hold a list of tool names or None, got {tools.value!r}")
    for key, preset in presets.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"presets keys must be non-empty strings, got {key!r}")
        if not isinstance(preset, Preset):
            raise ValueError(f"presets[{key!r}] must be a Preset, got {type(preset).__name__}")
    if default_preset is not None and default_preset not in presets:
        raise ValueError(f"default_preset {default_preset!r} is not one of presets {sorted(presets)}")


def _resolve_scalar(model_value: Any, axis: Axis, preset_value: Any = None) -> Any:
    """A scalar axis: the model's value (if the axis takes it), then the preset's, then the axis default."""
    if model_value is not _UNSET:
        if isinstance(axis, Open):
            return model_value
        if isinstance(axis, Choice) and any(option.name == model_value for option in axis.normalized()):
            return axis.value_for(model_value)
    if preset_value is not None:
        return preset_value
    return axis.value if isinstance(axis, Fixed) else None


def _resolve_list(model_value: Any, axis: Axis, preset_values: Sequence[str] | None = None) -> list[str] | None:
    """A list axis: the model's picks (unknown names dropped), then the preset's, then the axis default.

    ``None`` means every inherited tool.
    """
    if isinstance(axis, Choice):
        allowed = [option.name for option in axis.normalized()]
        if model_value is not _UNSET:
            requested = [model_value] if isinstance(model_value, str) else \
                model_value if isinstance(model_value, list) else []
            return [axis.value_for(name) for name in requested if name in allowed]
        if preset_values is not None:
            # A preset may not grant more than the choice allows.
            allowed_values = {axis.value_for(name) for name in allowed}
            return [name for name in preset_values if name in allowed_values]
        return [axis.value_for(name) for name in allowed] if axis.multiple else None
    if preset_values is not None:
        return list(preset_values)
    if isinstance(axis, Fixed):
        return list(axis.value) if axis.value is not None else None
    return None


def _checked_name(index: int, model_input: Any, seen: set[str]) -> str:
    if not isinstance(model_input, Mapping):
        raise ValueError(f"Agent at index {index} must be a dict, got {type(model_input).__name__}")
    name = model_input.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"Agent at index {index} must have a non-empty 'name' string")
    name = name.strip()
    if name in seen:
        raise ValueError(f"Duplicate agent name {name!r} at index {index}")
    seen.add(name)
    return name


def resolve_specs(model_inputs: list[Mapping[str, Any]], *, presets: Mapping[str, Preset],
                  default_preset: str | None, instructions: Open | Choice | Fixed,
                  tools: Choice | Fixed | Inherit | None = None,
                  model: Inherit | Choice | Fixed | None = None) -> list[AgentSpec]:
    """Combine each of the model's agent inputs with the axis modes into an :class:`AgentSpec`.

    Per axis the model's argument wins (when the axis shows it to the model), then the preset's value, then
    the axis default (``Fixed`` value, ``Inherit``: ``None``). An input without ``agent_type`` takes the
    default preset, unless it writes its own ``instructions`` (where the axis lets it).

    Args:
        model_inputs: The model's arguments, one mapping per agent, each with a ``name``.
        presets: Roles by ``agent_type``.
        default_preset: The role of an input without ``agent_type``.
        instructions: The mode of the ``instructions`` axis.
        tools: The mode of the ``tools`` axis (default ``Inherit()``).
        model: The mode of the ``model`` axis (default ``Inherit()``).

    Raises:
        ValueError: ``model_inputs`` is not a list, an input is not a dict, a name is missing, empty or
            repeated, or an ``agent_type`` is no preset's name; the message names the input and field.
    """
    tools = Inherit() if tools is None else tools
    model = Inherit() if model is None else model
    if not isinstance(model_inputs, list):
        raise ValueError(f"agents must be a list, got {type(model_inputs).__name__}")
    seen: set[str] = set()
    specs: list[AgentSpec] = []
    for index, model_input in enumerate(model_inputs):
        name = _checked_name(index, model_input, seen)
        # agent_type is a closed set: a given value must be a preset's exact name.
        requested_type = model_input.get("agent_type")
        known = isinstance(requested_type, str) and requested_type in presets
        if requested_type is not None and not known:
            raise ValueError(f"Unknown agent_type {requested_type!r}; valid values: {sorted(presets)}.")
        own_instructions = isinstance(instructions, Open | Choice) and "instructions" in model_input
        agent_type = requested_type if known else None if own_instructions else default_preset
        preset = presets.get(agent_type) if agent_type else None
        specs.append(AgentSpec(
            name=name, agent_type=agent_type,
            instructions=_resolve_scalar(model_input.get("instructions", _UNSET), instructions,
                                         preset.instructions if preset else None),
            tools=_resolve_list(model_input.get("tools", _UNSET), tools, preset.tools if preset else None),
            model=_resolve_scalar(model_input.get("model", _UNSET), model, preset.model if preset else None),
        ))
    return specs


def default_builder(parent: Agent | None) -> AgentBuilder:
    """A builder of children made the way ``parent`` was: its model, tools, sandbox, interventions and callbacks.

    ``spec.tools=None`` gives the child every tool of the parent; a list gives only those the parent has (a name
    it lacks is logged and skipped), and a sandbox's own tools the list leaves out are removed too. The child
    shares the parent's intervention handlers, so its tool calls pass the same approvals. ``spec.model=None``
    is the parent's model.
    """

    def build(spec: AgentSpec) -> Agent:
        from ray_harness.agent.agent import Agent

        parent_tools = dict(parent.tool_registry.registry) if parent is not None else {}
        if spec.tools is None:
            child_tools = list(parent_tools.values())
        else:
            child_tools = []
            for tool_name in spec.tools:
                if tool_name in parent_tools:
                    child_tools.append(parent_tools[tool_name])
                else:
                    logger.warning("tool_name=<%s> | a child agent asked for a tool its parent does not have; skipped",
                                   tool_name)
        registry = getattr(parent, "_interventions", None)
        child_model: Any = spec.model or (parent.model if parent is not None else None)
        child = Agent(
            model=child_model, tools=child_tools, system_prompt=spec.instructions or "",
            name=spec.name or "agent",
            sandbox=getattr(parent, "_sandbox", None),
            callback_handler=parent.callback_handler if parent is not None else None,
            trace_attributes=parent.trace_attributes if parent is not None else None,
            interventions=list(registry._handlers) if registry is not None else None,
        )
        if spec.tools is not None:
            # A sandbox vends its own tools to the agent given it; a selection leaving them out means without them.
            granted = {item.tool_name for item in child_tools}
            for tool_name in child.tool_registry.names:
                if tool_name not in granted:
                    child.tool_registry.remove(tool_name)
        return child

    return build
