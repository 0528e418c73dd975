"""Tools whose annotations are strings (``from __future__ import annotations``) survive shipping by value.

cloudpickle ships a function by value (a script's ``__main__``, a nested function, a module registered by value)
with only the globals its code uses; the names its string annotations use — the script's own types,
``ToolContext`` — are not among them, so the tool's input model could not be built where it arrived.
"""

from __future__ import annotations

import importlib
import pickle
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import cloudpickle
import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_call

_MODULE = '''
from __future__ import annotations

from typing_extensions import TypedDict

from ray_harness import tool
from ray_harness.plugins import Plugin
from ray_harness.tools import ToolContext


class Range(TypedDict):
    start: int
    end: int


def make_tool():
    @tool(context=True)
    def pick(r: Range, tool_context: ToolContext) -> str:
        """Pick a range."""
        return f"{r['start']}-{r['end']} for {tool_context.agent.name}"

    return pick


@tool
def stamp(r: Range) -> str:
    """Stamp a range."""
    return f"{r['start']}-{r['end']}"


class Picker(Plugin):
    name = "picker"

    @tool(context=True)
    def pick(self, r: Range, tool_context: ToolContext) -> str:
        """Pick a range."""
        return f"{r['start']}-{r['end']} for {tool_context.agent.name}"
'''


@pytest.fixture
def future_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    (tmp_path / "shipped_tools_mod.py").write_text(textwrap.dedent(_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("shipped_tools_mod")
    yield module
    sys.modules.pop("shipped_tools_mod", None)


def _round_trip(agent: Agent) -> str:
    shipped: Agent = pickle.loads(cloudpickle.dumps(agent))  # as runtime="ray" ships agents to hosts
    shipped("go")
    result = shipped.messages[2]["content"][0]["toolResult"]
    assert result["status"] == "success", result
    return str(result["content"][0]["text"])


def _agent(**kwargs: object) -> Agent:
    model = ScriptedModel(tool_call("pick", {"r": {"start": 1, "end": 2}}), text("ok"))
    return Agent(model, name="shipper", callback_handler=None, **kwargs)  # type: ignore[arg-type]


def test_a_nested_tool_with_string_annotations_ships_by_value(future_module: ModuleType) -> None:
    assert _round_trip(_agent(tools=[future_module.make_tool()])) == "1-2 for shipper"


def test_a_plugin_tool_of_a_module_shipped_by_value_keeps_its_input_model(future_module: ModuleType) -> None:
    cloudpickle.register_pickle_by_value(future_module)  # as a script's classes ship: by value
    try:
        assert _round_trip(_agent(plugins=[future_module.Picker()])) == "1-2 for shipper"
    finally:
        cloudpickle.unregister_pickle_by_value(future_module)


def test_a_plugin_tool_method_ships_twice(future_module: ModuleType) -> None:
    """Driver → orchestration host → node host: the copy of the first hop ships again.

    A plugin's ``@tool`` method ships its function by value (the class attribute is the tool, not the function), so
    the copy's function has only the globals its code uses; the annotations resolved where it was built go along.
    """
    once: Agent = pickle.loads(cloudpickle.dumps(_agent(plugins=[future_module.Picker()])))
    assert _round_trip(once) == "1-2 for shipper"


def test_a_dynamic_mark_ships_with_the_tool_by_value_and_by_reference(future_module: ModuleType) -> None:
    nested = future_module.make_tool()
    nested.mark_dynamic()
    assert pickle.loads(cloudpickle.dumps(nested)).is_dynamic
    module_tool = future_module.stamp
    assert not module_tool.is_dynamic
    try:
        module_tool.mark_dynamic()
        data = cloudpickle.dumps(module_tool)  # by reference: a host imports the module and gets its tool unmarked
        module_tool._is_dynamic = False  # as in that host's fresh import
        shipped = pickle.loads(data)
        assert shipped is module_tool and shipped.is_dynamic
    finally:
        module_tool._is_dynamic = False


def test_a_module_tool_of_a_module_registered_by_value_ships_by_value(future_module: ModuleType,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cloudpickle.register_pickle_by_value(future_module)  # its host cannot import it
    try:
        data = cloudpickle.dumps(future_module.stamp)
    finally:
        cloudpickle.unregister_pickle_by_value(future_module)
    monkeypatch.delitem(sys.modules, "shipped_tools_mod")
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if "shipped" not in entry and
                                      not (Path(entry) / "shipped_tools_mod.py").exists()])
    shipped = pickle.loads(data)  # by reference this would import the module: ModuleNotFoundError
    assert shipped({"start": 3, "end": 4}) == "3-4"
    assert "shipped_tools_mod" not in sys.modules
