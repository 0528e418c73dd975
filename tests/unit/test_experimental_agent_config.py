"""``ray_harness.experimental.config_to_agent``: an Agent from a JSON or YAML configuration, as Strands'."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.experimental import agent_config, config_to_agent
from ray_harness.testing import ScriptedModel, text, tool_call

_TOOLS = '''
from ray_harness import tool


@tool
def shout(words: str) -> str:
    """Say it louder."""
    return words.upper()


@tool
def whisper(words: str) -> str:
    """Say it softer."""
    return words.lower()
'''

_MODULE_TOOL = '''
TOOL_SPEC = {"name": "legacy_echo", "description": "Echo the input.",
             "inputSchema": {"json": {"type": "object", "properties": {"value": {"type": "string"}}}}}


def legacy_echo(tool_use, **kwargs):
    return {"toolUseId": tool_use["toolUseId"], "status": "success",
            "content": [{"text": tool_use["input"]["value"]}]}
'''


@pytest.fixture
def tools_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "config_tools_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "speech.py").write_text(_TOOLS)
    (package / "legacy_echo.py").write_text(_MODULE_TOOL)
    monkeypatch.syspath_prepend(str(tmp_path))
    return package


def test_importing_the_package_imports_nothing_else() -> None:
    code = ("import sys, ray_harness.experimental\n"
            "print('ray_harness.experimental.agent_config' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_dict_configures_name_prompt_and_tools_by_module_path(tools_package: Path) -> None:
    model = ScriptedModel(tool_call("shout", {"words": "hi"}), text("done"))
    agent = config_to_agent({"name": "helper", "prompt": "Be loud.", "tools": ["config_tools_pkg.speech"]},
                            model=model)
    assert isinstance(agent, Agent)
    assert (agent.name, agent.system_prompt, sorted(agent.tool_names)) == ("helper", "Be loud.", ["shout", "whisper"])
    agent("go")
    assert agent.messages[2]["content"][0]["toolResult"]["content"][0]["text"] == "HI"


def test_a_model_string_is_a_ray_harness_model_string() -> None:
    agent = config_to_agent({"model": "openai-compatible:http://localhost:1/v1#tiny"})
    assert agent.model.get_config()["model_id"] == "tiny"


def test_a_json_file_with_a_file_prefix_and_tools_by_file_path_and_module_tool(tools_package: Path, tmp_path: Path) -> None:
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"prompt": "p", "tools": [str(tools_package / "speech.py"),
                                                           "config_tools_pkg.legacy_echo"]}))
    agent = config_to_agent(f"file://{config}", model=ScriptedModel())
    assert agent.tool_names == ["shout", "whisper", "legacy_echo"]
    agent.model = ScriptedModel(tool_call("legacy_echo", {"value": "v"}), text("done"))
    agent("go")
    assert agent.messages[2]["content"][0]["toolResult"]["content"][0]["text"] == "v"


def test_a_yaml_file(tools_package: Path, tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(textwrap.dedent("""\
        name: yaml-agent
        prompt: |
          Two lines
          of prompt.
        tools:
          - config_tools_pkg.speech:whisper
        """))
    agent = config_to_agent(config, model=ScriptedModel())
    assert (agent.name, agent.system_prompt, agent.tool_names) == ("yaml-agent", "Two lines\nof prompt.\n", ["whisper"])


def test_keyword_arguments_replace_the_configurations(tools_package: Path) -> None:
    agent = config_to_agent({"name": "from-config", "prompt": "config", "tools": ["no_such_module_anywhere"]},
                            model=ScriptedModel(), name="from-kwargs", system_prompt="kwargs", tools=[])
    assert (agent.name, agent.system_prompt, agent.tool_names) == ("from-kwargs", "kwargs", [])


def test_nulls_leave_the_agents_defaults() -> None:
    agent = config_to_agent({"name": None, "prompt": None, "tools": []}, model=ScriptedModel())
    assert (agent.name, agent.system_prompt, agent.tool_names) == ("agent", None, [])


@pytest.mark.parametrize(("config", "match"), [
    ({"name": 3}, "Configuration validation error at name: Input should be a valid string"),
    ({"tools": ["ok", 4]}, "Configuration validation error at tools -> 1: Input should be a valid string"),
    ({"tools": "config_tools_pkg.speech"}, "Configuration validation error at tools: Input should be a valid list"),
    ({"temperature": 0.2}, "Configuration validation error at temperature: Extra inputs are not permitted"),
])
def test_a_configuration_breaking_the_schema_is_named(config: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        config_to_agent(config, model=ScriptedModel())


@pytest.mark.parametrize(("tool", "match"), [
    ("no_such_module_anywhere", r"tools -> 0: cannot load tool 'no_such_module_anywhere': No module named"),
    ("config_tools_pkg.speech:mumble", r"has no @tool function 'mumble'"),
    ("config_tools_pkg", r"has no @tool function and no TOOL_SPEC"),
])
def test_a_tool_that_cannot_be_loaded_is_named(tools_package: Path, tool: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        config_to_agent({"tools": [tool]}, model=ScriptedModel())


def test_files_and_config_types_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="Configuration file not found"):
        config_to_agent(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(json.JSONDecodeError):
        config_to_agent(str(tmp_path / "bad.json"))
    (tmp_path / "bad.yml").write_text("name: [")
    with pytest.raises(ValueError, match="is not valid YAML"):
        config_to_agent(str(tmp_path / "bad.yml"))
    with pytest.raises(ValueError, match="config must be a file path or a dict, got list"):
        config_to_agent([], model=ScriptedModel())  # type: ignore[arg-type]


def test_tools_by_module_path_ship_with_the_agent(tools_package: Path) -> None:
    agent = config_to_agent({"tools": ["config_tools_pkg.speech"]}, model=ScriptedModel())
    copy = pickle.loads(pickle.dumps(agent))
    assert copy.tool_names == agent.tool_names


def test_the_schema_describes_what_is_checked() -> None:
    schema = agent_config.AGENT_CONFIG_SCHEMA
    assert set(schema["properties"]) == {"name", "model", "prompt", "tools"}
    assert schema["additionalProperties"] is False
