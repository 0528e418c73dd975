"""ray_harness.multiagent.spec: authority modes, presets, the schema they give the model, and resolution."""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent
from ray_harness.multiagent import AgentSpec, Choice, Fixed, Inherit, Open, Option, Preset
from ray_harness.multiagent.spec import check_axes, default_builder, resolve_specs, to_schema_properties
from ray_harness.testing import ScriptedModel, text
from ray_harness.tools import tool


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return key


@tool
def write(key: str) -> str:
    """Write a key.

    Args:
        key: The key.
    """
    return key


def resolve(inputs: list[Any], **axes: Any) -> list[AgentSpec]:
    axes.setdefault("presets", {})
    axes.setdefault("default_preset", None)
    axes.setdefault("instructions", Open())
    return resolve_specs(inputs, **axes)


# -- each authority mode -----------------------------------------------------------------------------------------


def test_fixed_pins_the_value_and_ignores_the_model() -> None:
    (spec,) = resolve([{"name": "a", "instructions": "mine", "tools": ["x"], "model": "m"}],
                      instructions=Fixed("pinned"), tools=Fixed(["lookup"]), model=Fixed("model-a"))
    assert spec == AgentSpec(name="a", agent_type=None, instructions="pinned", tools=["lookup"], model="model-a")


def test_inherit_leaves_the_axis_to_the_parent() -> None:
    (spec,) = resolve([{"name": "a", "tools": ["x"], "model": "m"}], tools=Inherit(), model=Inherit())
    assert (spec.tools, spec.model) == (None, None)  # None: the builder takes the parent's


def test_open_takes_the_models_text() -> None:
    (spec,) = resolve([{"name": " a ", "instructions": "be brief"}])
    assert (spec.name, spec.instructions) == ("a", "be brief")


def test_choice_maps_names_to_values_and_drops_unknown_picks() -> None:
    model = Choice([Option("fast", "model-fast", "quick"), "slow"])
    tools = Choice([Option("read", "lookup"), "write"], multiple=True)
    specs = resolve([{"name": "a", "model": "fast", "tools": ["read", "nope"]},
                     {"name": "b", "model": "bogus", "tools": "write"},
                     {"name": "c"}], model=model, tools=tools)
    assert [(s.model, s.tools) for s in specs] == [("model-fast", ["lookup"]), (None, ["write"]),
                                                   (None, ["lookup", "write"])]  # omitted: every choice


def test_a_preset_fills_what_the_model_left_out_and_the_model_wins_where_it_may() -> None:
    presets = {"reader": Preset(instructions="read only", tools=["read", "write"], model="m-r"),
               "plain": Preset(description="no settings")}
    tools = Choice([Option("read", "read")], multiple=True)  # the preset may not grant more than the choice
    specs = resolve([{"name": "a", "agent_type": "reader"}, {"name": "b"}, {"name": "c", "instructions": "own"}],
                    presets=presets, default_preset="reader", tools=tools, model=Choice(["m-x"]))
    assert [(s.agent_type, s.instructions, s.tools, s.model) for s in specs] == [
        ("reader", "read only", ["read"], "m-r"),
        ("reader", "read only", ["read"], "m-r"),   # no agent_type: the default preset
        (None, "own", ["read"], None),              # its own instructions: no default role
    ]


@pytest.mark.parametrize(("inputs", "message"), [
    ({"name": "a"}, "agents must be a list"),
    (["a"], "index 0 must be a dict"),
    ([{"name": ""}], "index 0 must have a non-empty 'name'"),
    ([{"name": "a"}, {"name": "a "}], "Duplicate agent name 'a' at index 1"),
    ([{"name": "a", "agent_type": "boss"}], "Unknown agent_type 'boss'; valid values: \\['worker'\\]"),
])
def test_resolution_errors_name_the_input_and_field(inputs: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve(inputs, presets={"worker": Preset()})


# -- the schema the model sees ------------------------------------------------------------------------------------


def test_only_open_and_choice_axes_reach_the_schema() -> None:
    props = to_schema_properties(presets={"r": Preset(instructions="x", tools=["a"], description="reads")},
                                 default_preset="r", instructions=Fixed("x"),
                                 tools=Choice([Option("a", description="the a tool"), "b"], multiple=True),
                                 model=Inherit())
    assert set(props) == {"agent_type", "tools"}
    assert props["agent_type"]["enum"] == ["r"] and "Omit to use the default ('r')" in props["agent_type"]["description"]
    assert "- r: reads (sets instructions; tools: a)" in props["agent_type"]["description"]
    assert props["tools"]["type"] == "array" and props["tools"]["items"]["enum"] == ["a", "b"]
    assert "- a: the a tool" in props["tools"]["description"]
    assert to_schema_properties(presets={}, default_preset=None, instructions=Open(), tools=None,
                                model=None) == {"instructions": {"type": "string",
                                                                 "description": "A system prompt defining this agent's role."}}


@pytest.mark.parametrize(("axes", "message"), [
    ({"tools": Choice([], multiple=True)}, "tools=Choice\\(\\[\\]\\) offers no options"),
    ({"tools": Choice(["a"])}, "tools=Choice\\(...\\) must be multiple=True"),
])
def test_schema_errors_name_the_axis(axes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        to_schema_properties(presets={}, default_preset=None, instructions=Open(), model=None, **{"tools": None, **axes})


@pytest.mark.parametrize(("build", "message"), [
    (lambda: Option(""), "Option.name"),
    (lambda: Choice("ab"), "Choice.options"),
    (lambda: Choice([1]),  # type: ignore[list-item]
     "Choice.options\\[0\\]"),
    (lambda: Preset(tools="lookup"), "Preset.tools"),
    (lambda: Preset(instructions=3),  # type: ignore[arg-type]
     "Preset.instructions"),
    (lambda: check_axes(presets={}, default_preset=None, instructions=Inherit(), tools=None, model=None),
     "instructions must be Open \\| Choice \\| Fixed"),
    (lambda: check_axes(presets={}, default_preset=None, instructions=None, tools=Open(), model=None), "tools must be"),
    (lambda: check_axes(presets={}, default_preset=None, instructions=None, tools=Fixed("lookup"), model=None),
     "tools=Fixed"),
    (lambda: check_axes(presets={"r": "x"},  # type: ignore[dict-item]
                        default_preset=None, instructions=None, tools=None, model=None),
     "presets\\['r'\\] must be a Preset"),
    (lambda: check_axes(presets={}, default_preset="r", instructions=None, tools=None, model=None),
     "default_preset 'r'"),
])
def test_bad_modes_and_presets_are_named(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_an_option_without_a_value_keeps_meaning_its_name_after_pickling() -> None:
    choice = pickle.loads(cloudpickle.dumps(Choice([Option("fast", description="quick")])))
    assert choice.value_for("fast") == "fast"


def test_resolution_matches_strands() -> None:
    strands_spec = pytest.importorskip("strands.multiagent.spec")
    cases: list[tuple[list[Any], dict[str, Any]]] = [
        ([{"name": "a"}, {"name": "b", "agent_type": "r", "tools": ["x"]}, {"name": "c", "instructions": "i"}],
         {"tools": ("Choice", ["x", "y"], True), "model": ("Choice", ["m"], False)}),
        ([{"name": "a", "model": "m", "tools": "y"}], {"tools": ("Fixed", ["x"]), "model": ("Fixed", "z")}),
        ([{"name": "a", "instructions": "own", "agent_type": "r"}], {"instructions": ("Choice", ["own"], False)}),
    ]
    for inputs, axes in cases:
        ours, theirs = {}, {}
        for key, (kind, *args) in axes.items():
            ours[key] = {"Choice": Choice, "Fixed": Fixed}[kind](*args)
            theirs[key] = getattr(strands_spec, kind)(*args)
        ours.setdefault("instructions", Open())
        theirs.setdefault("instructions", strands_spec.Open())
        mine = resolve_specs(inputs, presets={"r": Preset(instructions="ri", tools=["x"])}, default_preset="r", **ours)
        strands = strands_spec._resolve_specs(inputs, presets={"r": strands_spec.Preset(instructions="ri", tools=["x"])},
                                              default_preset="r", **theirs)
        assert [vars(spec) for spec in mine] == [vars(spec) for spec in strands]


# -- the default builder ------------------------------------------------------------------------------------------


def test_the_default_builder_makes_a_child_like_its_parent() -> None:
    parent = Agent(ScriptedModel(text("hi")), tools=[lookup, write], trace_attributes={"team": "t"})
    child = default_builder(parent)(AgentSpec(name="kid", instructions="be kid", tools=["lookup", "absent"]))
    assert (child.name, child.system_prompt, child.tool_names) == ("kid", "be kid", ["lookup"])
    assert child.model is parent.model and child.trace_attributes == {"team": "t"}
    everything = default_builder(parent)(AgentSpec(name="all"))
    assert everything.tool_names == ["lookup", "write"]
