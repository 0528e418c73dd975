"""The ``AgentSkills`` plugin (Strands' ``strands.vended_plugins.skills.agent_skills``).

Progressive disclosure, as in Strands: before each invocation the names and descriptions of the skills are
appended to the system prompt (an ``<available_skills>`` XML block, replaced, not repeated, on the next
invocation); the ``skills`` tool returns one skill's full instructions and resource files when the agent asks.

Skill instances and ``https://`` URLs resolve when the plugin is made; filesystem paths resolve per agent, at
``init_agent``, through that agent's sandbox. A pickled plugin (an agent shipped to a Ray host) drops its
per-agent skill sets and reloads them from the copy's own sandbox on first use.
"""

# No ``from __future__ import annotations``: the ``skills`` tool's annotations must be objects, not names,
# because a pickled agent ships the bound tool method by value and rebuilds its schema from them elsewhere.
import logging
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias
from xml.sax.saxutils import escape

from ray_harness.hooks.events import BeforeInvocationEvent
from ray_harness.plugins import Plugin, hook
from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import tool
from ray_harness.types.content import SystemContentBlock
from ray_harness.vended_plugins.skills._sandbox_files import list_resources, load_path
from ray_harness.vended_plugins.skills.skill import Skill

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("AgentSkills", "SkillSource", "SkillSources")

logger = logging.getLogger(__name__)

_DEFAULT_STATE_KEY = "agent_skills"
_DEFAULT_MAX_RESOURCE_FILES = 20

SkillSource: TypeAlias = str | Path | Skill
"""One skill source: a path (a skill directory, a parent of skill directories, a ``SKILL.md``), an
``https://`` URL of raw ``SKILL.md`` content, or a ``Skill``."""

SkillSources: TypeAlias = SkillSource | list[SkillSource]
"""One skill source or a list of them."""


def _as_list(sources: Any) -> list[SkillSource]:
    """``sources`` as a list, each entry checked (the error names it)."""
    listed = sources if isinstance(sources, list) else [sources]
    for index, source in enumerate(listed):
        if not isinstance(source, (str, Path, Skill)):
            raise TypeError(f"skills[{index}] must be a str, Path or Skill, got {type(source).__name__}")
    return listed


def _remember(skills: dict[str, Skill], skill: Skill) -> None:
    if skill.name in skills:
        logger.warning("name=<%s> | duplicate skill name, overwriting previous skill", skill.name)
    skills[skill.name] = skill


class AgentSkills(Plugin):
    """Give an agent Agent Skills: their metadata in the system prompt, their instructions through a tool.

    Example::

        from ray_harness import Agent
        from ray_harness.vended_plugins.skills import AgentSkills, Skill

        agent = Agent(plugins=[AgentSkills(skills=["./skills/", Skill(name="greet", description="Say hi")])])

    Args:
        skills: One source or a list: a path to a skill directory (with a ``SKILL.md``), to a parent of skill
            directories or to a ``SKILL.md``; an ``https://`` URL of raw ``SKILL.md`` content; a ``Skill``.
        state_key: The ``agent.state`` key of the plugin's state (``activated_skills``, ``last_injected_xml``).
        max_resource_files: How many resource files an activated skill lists at most.
        strict: Raise on a skill's validation problems instead of logging a warning. A skill that fails to load
            from a path or URL is skipped with a warning either way (as in Strands), so one bad skill does not
            hide the others.

    Raises:
        TypeError: A source is not a ``str``, ``Path`` or ``Skill``; ``state_key`` is not a string or
            ``max_resource_files`` not an int.
        ValueError: ``state_key`` is empty or ``max_resource_files`` below 1.
    """

    name = "agent_skills"

    def __init__(self, skills: SkillSources, state_key: str = _DEFAULT_STATE_KEY,
                 max_resource_files: int = _DEFAULT_MAX_RESOURCE_FILES, strict: bool = False) -> None:
        if not isinstance(state_key, str):
            raise TypeError(f"state_key must be a string, got {type(state_key).__name__}")
        if not state_key:
            raise ValueError("state_key must not be empty")
        if isinstance(max_resource_files, bool) or not isinstance(max_resource_files, int):
            raise TypeError(f"max_resource_files must be an int, got {type(max_resource_files).__name__}")
        if max_resource_files < 1:
            raise ValueError(f"max_resource_files must be at least 1, got {max_resource_files}")
        self._strict = bool(strict)
        self._state_key = state_key
        self._max_resource_files = max_resource_files
        self._skills, self._skill_paths = self._resolve(_as_list(skills))
        self._agent_skills: weakref.WeakKeyDictionary[Any, dict[str, Skill]] = weakref.WeakKeyDictionary()
        super().__init__()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_agent_skills"]  # weak references do not pickle; a copy reloads from its agent's sandbox
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._agent_skills = weakref.WeakKeyDictionary()

    async def init_agent(self, agent: "Agent") -> None:
        """Load the path sources through ``agent.sandbox``."""
        skills = await self._loaded_for(agent)
        if not skills:
            logger.warning("no skills were loaded, the agent will have no skills available")

    @tool(context=True)
    async def skills(self, skill_name: str, tool_context: ToolContext) -> str:
        """Activate a skill to load its full instructions.

        Use this tool to load the complete instructions for a skill listed in
        the available_skills section of your system prompt.

        Args:
            skill_name: Name of the skill to activate.
            tool_context: Given by the agent.
        """
        agent = tool_context.agent
        skills = await self._loaded_for(agent)
        if not skill_name:
            return f"Error: skill_name is required. Available skills: {', '.join(skills)}"
        found = skills.get(skill_name)
        if found is None:
            return f"Skill '{skill_name}' not found. Available skills: {', '.join(skills)}"
        self._track_activated_skill(agent, skill_name)
        return await self._activation_text(found, agent.sandbox)

    @hook
    async def _on_before_invocation(self, event: BeforeInvocationEvent) -> None:
        """Replace the previous ``<available_skills>`` block of the system prompt with a fresh one."""
        agent = event.agent
        await self._loaded_for(agent)
        state = agent.state.get(self._state_key)
        last = state.get("last_injected_xml") if isinstance(state, dict) else None
        xml = self._generate_skills_xml(agent)
        if isinstance(agent.system_prompt, list):
            # Content blocks: only the injected block goes, so cache points and other blocks stay where they are.
            # (A string prompt stays a string below: ray_harness keeps a prompt in the form it was given, where
            # Strands turns it into blocks.)
            blocks = list(agent.system_prompt)
            if last is not None:
                if {"text": last} in blocks:
                    blocks.remove({"text": last})
                else:
                    logger.warning("unable to find previously injected skills XML in system prompt, re-appending")
            injected: SystemContentBlock = {"text": xml}
            self._set_state_field(agent, "last_injected_xml", xml)
            agent.system_prompt = [*blocks, injected]
            return
        prompt = agent.system_prompt if isinstance(agent.system_prompt, str) else ""
        if last is not None:
            if last in prompt:
                prompt = prompt.replace(last, "")
            else:
                logger.warning("unable to find previously injected skills XML in system prompt, re-appending")
        injection = f"\n\n{xml}" if prompt else xml
        self._set_state_field(agent, "last_injected_xml", injection)
        agent.system_prompt = prompt + injection

    def get_available_skills(self, agent: "Agent | None" = None) -> list[Skill]:
        """The skills of ``agent`` (with its path-loaded ones), or without an agent only Skill and URL sources."""
        return list(self._skills_for(agent).values())

    def set_available_skills(self, skills: SkillSources) -> None:
        """Replace the skills; path sources reload per agent on its next invocation. Activation state stays."""
        self._skills, self._skill_paths = self._resolve(_as_list(skills))
        self._agent_skills = weakref.WeakKeyDictionary()

    def get_activated_skills(self, agent: "Agent") -> list[str]:
        """The skills ``agent`` activated, most recent last."""
        state = agent.state.get(self._state_key)
        return list(state.get("activated_skills", [])) if isinstance(state, dict) else []

    # -- internals ------------------------------------------------------------------------------------------------

    def _resolve(self, sources: list[SkillSource]) -> tuple[dict[str, Skill], list[str | Path]]:
        """Skill and URL sources resolved now; path sources kept for each agent's sandbox."""
        resolved: dict[str, Skill] = {}
        paths: list[str | Path] = []
        for source in sources:
            if isinstance(source, Skill):
                _remember(resolved, source)
            elif isinstance(source, str) and source.startswith("https://"):
                try:
                    _remember(resolved, Skill.from_url(source, strict=self._strict))
                except (RuntimeError, ValueError) as error:
                    logger.warning("url=<%s> | failed to load skill from URL: %s", source, error)
            else:
                paths.append(source)
        return resolved, paths

    def _skills_for(self, agent: Any) -> dict[str, Skill]:
        return self._skills if agent is None else self._agent_skills.get(agent, self._skills)

    async def _loaded_for(self, agent: Any) -> dict[str, Skill]:
        """``agent``'s skill set, its path sources loaded through its sandbox on first use."""
        if agent in self._agent_skills:
            return self._agent_skills[agent]
        skills = dict(self._skills)
        for source in self._skill_paths:
            for skill in await load_path(agent.sandbox, source, strict=self._strict):
                _remember(skills, skill)
        self._agent_skills[agent] = skills
        return skills

    async def _activation_text(self, skill: Skill, sandbox: Any) -> str:
        """The ``skills`` tool's answer: instructions, metadata lines, then the resource files."""
        if not skill.instructions:
            return f"Skill '{skill.name}' activated (no instructions available)."
        parts = [skill.instructions]
        metadata = []
        if skill.allowed_tools:
            metadata.append(f"Allowed tools: {', '.join(skill.allowed_tools)}")
        if skill.compatibility:
            metadata.append(f"Compatibility: {skill.compatibility}")
        if skill.path is not None:
            metadata.append(f"Location: {skill.path / 'SKILL.md'}")
        if metadata:
            parts.append("\n---\n" + "\n".join(metadata))
        if skill.path is not None:
            resources = await list_resources(sandbox, str(skill.path), self._max_resource_files)
            if resources:
                parts.append("\nAvailable resources:\n" + "\n".join(f"  {name}" for name in resources))
        return "\n".join(parts)

    def _generate_skills_xml(self, agent: Any = None) -> str:
        """The ``<available_skills>`` block: each skill's name, description and (from a path) location."""
        skills = self._skills_for(agent)
        if not skills:
            return "<available_skills>\nNo skills are currently available.\n</available_skills>"
        lines = ["<available_skills>"]
        for skill in skills.values():
            lines += ["<skill>", f"<name>{escape(skill.name)}</name>",
                      f"<description>{escape(skill.description)}</description>"]
            if skill.path is not None:
                lines.append(f"<location>{escape(str(skill.path / 'SKILL.md'))}</location>")
            lines.append("</skill>")
        lines.append("</available_skills>")
        return "\n".join(lines)

    def _set_state_field(self, agent: Any, key: str, value: Any) -> None:
        state = agent.state.get(self._state_key)
        if state is not None and not isinstance(state, dict):
            raise TypeError(f"expected dict for state key '{self._state_key}', got {type(state).__name__}")
        state = state or {}
        state[key] = value
        agent.state.set(self._state_key, state)

    def _track_activated_skill(self, agent: Any, skill_name: str) -> None:
        """Move ``skill_name`` to the end of the activated list (no duplicates)."""
        activated = [name for name in self.get_activated_skills(agent) if name != skill_name]
        self._set_state_field(agent, "activated_skills", [*activated, skill_name])
