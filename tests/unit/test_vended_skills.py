"""``ray_harness.vended_plugins.skills``: the ``AgentSkills`` plugin (sandbox loading, prompt, tool, state)."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import cloudpickle
import pytest

from ray_harness import Agent
from ray_harness.sandbox import LocalEnvironment
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.vended_plugins.skills import AgentSkills, Skill

PDF_MD = """---
name: pdf-processing
description: Extract text & tables from PDFs
allowed-tools: Read Bash
compatibility: needs pdftotext
---
# PDF
Run scripts/extract.py on the file.
"""
NOTES_MD = "---\nname: notes\ndescription: Take notes\n---\nWrite notes in references/style.md style.\n"


def _skills_tree(root: Path) -> Path:
    """``root/skills`` with two skills (one with resources) and a directory that is no skill."""
    skills = root / "skills"
    pdf = skills / "pdf-processing"
    (pdf / "scripts" / "lib").mkdir(parents=True)
    (pdf / "SKILL.md").write_text(PDF_MD)
    (pdf / "scripts" / "extract.py").write_text("print('x')")
    (pdf / "scripts" / "lib" / "util.py").write_text("")
    (pdf / "assets").mkdir()
    (pdf / "assets" / "logo.png").write_bytes(b"png")
    (skills / "notes").mkdir()
    (skills / "notes" / "SKILL.md").write_text(NOTES_MD)
    (skills / "empty").mkdir()
    return skills


def _tool_text(agent: Agent, index: int = 2) -> str:
    return str(agent.messages[index]["content"][0]["toolResult"]["content"][0]["text"])


def test_a_parent_directory_loads_each_skill_through_the_sandbox_and_the_prompt_lists_them(tmp_path: Path) -> None:
    _skills_tree(tmp_path)
    model = ScriptedModel(text("ok"))
    # A relative path: only the sandbox's working directory makes it resolve (the test process's cwd does not).
    plugin = AgentSkills(skills="skills")
    agent = Agent(model, system_prompt="Be brief.", sandbox=LocalEnvironment(tmp_path), plugins=[plugin])
    assert [skill.name for skill in plugin.get_available_skills(agent)] == ["notes", "pdf-processing"]
    assert plugin.get_available_skills() == []  # path skills belong to an agent
    agent("hi")
    assert model.calls[0].system_prompt == (
        "Be brief.\n\n<available_skills>\n"
        "<skill>\n<name>notes</name>\n<description>Take notes</description>\n"
        "<location>skills/notes/SKILL.md</location>\n</skill>\n"
        "<skill>\n<name>pdf-processing</name>\n<description>Extract text &amp; tables from PDFs</description>\n"
        "<location>skills/pdf-processing/SKILL.md</location>\n</skill>\n</available_skills>")


def test_the_injected_block_is_replaced_not_repeated_on_the_next_invocation(tmp_path: Path) -> None:
    model = ScriptedModel(text("one"), text("two"))
    plugin = AgentSkills(skills=[Skill(name="a", description="first")])
    agent = Agent(model, system_prompt="Base.", plugins=[plugin])
    agent("1")
    plugin.set_available_skills(Skill(name="b", description="second"))
    agent("2")
    second = model.calls[1].system_prompt
    assert second == "Base.\n\n<available_skills>\n<skill>\n<name>b</name>\n<description>second</description>\n" \
                     "</skill>\n</available_skills>"


def test_content_block_prompts_keep_their_blocks_and_get_one_skills_block() -> None:
    model = ScriptedModel(text("one"), text("two"))
    prompt = [{"text": "Base."}, {"cachePoint": {"type": "default"}}]
    agent = Agent(model, system_prompt=prompt, plugins=[AgentSkills(skills=Skill(name="a", description="d"))])  # type: ignore[arg-type]
    agent("1")
    agent("2")
    sent = model.calls[1].system_prompt
    assert isinstance(sent, list) and sent[:2] == prompt and len(sent) == 3
    assert "<name>a</name>" in sent[2]["text"]


def test_a_single_skill_directory_and_a_skill_md_path_load(tmp_path: Path) -> None:
    skills = _skills_tree(tmp_path)
    plugin = AgentSkills(skills=[str(skills / "pdf-processing"), skills / "notes" / "SKILL.md"])
    agent = Agent(ScriptedModel(), sandbox=LocalEnvironment(tmp_path), plugins=[plugin])
    loaded = {skill.name: skill for skill in plugin.get_available_skills(agent)}
    assert sorted(loaded) == ["notes", "pdf-processing"]
    assert loaded["pdf-processing"].allowed_tools == ["Read", "Bash"]
    assert loaded["notes"].path == skills / "notes"


def test_the_skills_tool_returns_instructions_metadata_and_resources_and_tracks_activation(tmp_path: Path) -> None:
    skills = _skills_tree(tmp_path)
    model = ScriptedModel(tool_call("skills", {"skill_name": "pdf-processing"}), tool_call("skills", {"skill_name": "notes"}),
                          tool_call("skills", {"skill_name": "pdf-processing"}), text("done"))
    plugin = AgentSkills(skills=str(skills))
    agent = Agent(model, sandbox=LocalEnvironment(tmp_path), plugins=[plugin])
    agent("use pdf")
    assert _tool_text(agent) == (
        "# PDF\nRun scripts/extract.py on the file.\n\n---\nAllowed tools: Read, Bash\n"
        f"Compatibility: needs pdftotext\nLocation: {skills / 'pdf-processing' / 'SKILL.md'}\n\n"
        "Available resources:\n  scripts/extract.py\n  scripts/lib/util.py\n  assets/logo.png")
    assert plugin.get_activated_skills(agent) == ["notes", "pdf-processing"]  # most recent last, no duplicates
    assert agent.state.get("agent_skills")["activated_skills"] == ["notes", "pdf-processing"]


def test_resource_listing_is_capped_at_max_resource_files(tmp_path: Path) -> None:
    skills = _skills_tree(tmp_path)
    model = ScriptedModel(tool_call("skills", {"skill_name": "pdf-processing"}), text("done"))
    agent = Agent(model, sandbox=LocalEnvironment(tmp_path),
                  plugins=[AgentSkills(skills=str(skills), max_resource_files=2, state_key="mine")])
    agent("go")
    assert _tool_text(agent).endswith("  scripts/extract.py\n  scripts/lib/util.py\n  ... (truncated at 2 files)")
    assert agent.state.get("mine")["activated_skills"] == ["pdf-processing"]


def test_resource_listing_stops_three_directory_levels_down(tmp_path: Path) -> None:
    skill = tmp_path / "deep"
    (skill / "references" / "a" / "b" / "c").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: deep\ndescription: d\n---\nbody")
    (skill / "references" / "a" / "b" / "two.md").write_text("")
    (skill / "references" / "a" / "b" / "c" / "three.md").write_text("")
    agent = Agent(ScriptedModel(tool_call("skills", {"skill_name": "deep"}), text("done")),
                  sandbox=LocalEnvironment(tmp_path), plugins=[AgentSkills(skills="deep")])
    agent("go")
    assert _tool_text(agent).endswith("Available resources:\n  references/a/b/two.md")


def test_an_unknown_or_empty_skill_name_lists_the_available_ones() -> None:
    model = ScriptedModel(tool_call("skills", {"skill_name": "nope"}), tool_call("skills", {"skill_name": ""}),
                          text("done"))
    plugin = AgentSkills(skills=[Skill(name="a", description="d"), Skill(name="b", description="e", instructions="x")])
    agent = Agent(model, plugins=[plugin])
    agent("go")
    assert _tool_text(agent) == "Skill 'nope' not found. Available skills: a, b"
    assert _tool_text(agent, 4) == "Error: skill_name is required. Available skills: a, b"
    assert plugin.get_activated_skills(agent) == []


def test_a_skill_without_instructions_activates_with_a_note() -> None:
    model = ScriptedModel(tool_call("skills", {"skill_name": "a"}), text("done"))
    agent = Agent(model, plugins=[AgentSkills(skills=Skill(name="a", description="d"))])
    agent("go")
    assert _tool_text(agent) == "Skill 'a' activated (no instructions available)."


def test_a_bad_skill_in_a_directory_is_skipped_with_a_warning_naming_its_file(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    skills = _skills_tree(tmp_path)
    (skills / "broken").mkdir()
    (skills / "broken" / "SKILL.md").write_text("---\nname: broken\n---\nno description")
    plugin = AgentSkills(skills=str(skills), strict=True)
    with caplog.at_level(logging.WARNING):
        agent = Agent(ScriptedModel(), sandbox=LocalEnvironment(tmp_path), plugins=[plugin])
    assert [skill.name for skill in plugin.get_available_skills(agent)] == ["notes", "pdf-processing"]
    assert f"path=<{skills}/broken/SKILL.md> | failed to load skill: SKILL.md content must have a 'description'" \
        in caplog.text


def test_lenient_loads_a_name_unlike_its_directory_with_a_warning_strict_skips_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "dir-name").mkdir()
    (tmp_path / "dir-name" / "SKILL.md").write_text("---\nname: other\ndescription: d\n---\n")
    lenient, strict = AgentSkills(skills="dir-name"), AgentSkills(skills="dir-name", strict=True)
    with caplog.at_level(logging.WARNING):
        agent = Agent(ScriptedModel(), sandbox=LocalEnvironment(tmp_path), plugins=[lenient])
    assert [skill.name for skill in lenient.get_available_skills(agent)] == ["other"]
    assert "name=<other>, directory=<dir-name> | skill name does not match" in caplog.text
    strict_agent = Agent(ScriptedModel(), sandbox=LocalEnvironment(tmp_path), plugins=[strict])
    assert strict.get_available_skills(strict_agent) == []


def test_a_missing_path_is_warned_about_and_leaves_no_skills(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plugin = AgentSkills(skills="missing")
    with caplog.at_level(logging.WARNING):
        agent = Agent(ScriptedModel(), sandbox=LocalEnvironment(tmp_path), plugins=[plugin])
    assert plugin.get_available_skills(agent) == []
    assert "path=<missing> | skill source does not exist" in caplog.text
    assert "no skills were loaded" in caplog.text


def test_constructor_arguments_are_checked_and_errors_name_them() -> None:
    with pytest.raises(TypeError, match=r"skills\[1\] must be a str, Path or Skill, got int"):
        AgentSkills(skills=["a", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_resource_files must be at least 1"):
        AgentSkills(skills=[], max_resource_files=0)
    with pytest.raises(ValueError, match="state_key must not be empty"):
        AgentSkills(skills=[], state_key="")


@pytest.mark.parametrize("ship", [pickle.dumps, cloudpickle.dumps])
def test_a_pickled_agent_keeps_its_skills_and_the_tool_works_on_the_copy(tmp_path: Path, ship: object) -> None:
    skills = _skills_tree(tmp_path)
    model = ScriptedModel(tool_call("skills", {"skill_name": "notes"}), text("done"))
    plugin = AgentSkills(skills=[str(skills), Skill(name="inline", description="given", instructions="do it")])
    agent = Agent(model, sandbox=LocalEnvironment(tmp_path), plugins=[plugin])
    copy: Agent = pickle.loads(ship(agent))  # type: ignore[operator]
    copy("go")
    copied = copy._plugin_registry.plugins["agent_skills"]
    assert isinstance(copied, AgentSkills) and copied is not plugin
    # The copy reloaded the path skills through its own sandbox; the driver's plugin saw no activation.
    assert _tool_text(copy).startswith("Write notes in references/style.md style.\n\n---\nLocation: ")
    assert [skill.name for skill in copied.get_available_skills(copy)] == ["inline", "notes", "pdf-processing"]
    assert copied.get_activated_skills(copy) == ["notes"] and plugin.get_activated_skills(agent) == []
    assert "<name>pdf-processing</name>" in str(copy.model.calls[0].system_prompt)  # type: ignore[attr-defined]


def test_a_direct_tool_call_on_a_pickled_copy_loads_its_path_skills_first(tmp_path: Path) -> None:
    _skills_tree(tmp_path)
    agent = Agent(ScriptedModel(), sandbox=LocalEnvironment(tmp_path), plugins=[AgentSkills(skills="skills")])
    copy: Agent = pickle.loads(pickle.dumps(agent))
    # No invocation ran on the copy: the tool itself loads the copy's skills through its sandbox.
    result = copy.tool.skills(skill_name="notes")
    assert result["content"] == [{"text": "Write notes in references/style.md style.\n\n---\n"
                                          "Location: skills/notes/SKILL.md"}]
