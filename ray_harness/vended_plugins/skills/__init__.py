"""``AgentSkills``: Agent Skills (AgentSkills.io ``SKILL.md`` directories), as ``strands.vended_plugins.skills``.

Example::

    from ray_harness import Agent
    from ray_harness.vended_plugins.skills import AgentSkills, Skill

    skill = Skill.from_file("./skills/pdf-processing")
    skills = Skill.from_directory("./skills/")
    agent = Agent(plugins=[AgentSkills(skills=["./skills/pdf-processing"])])

The skills' names and descriptions go into the system prompt before each invocation; the agent loads a skill's
instructions (and the list of its ``scripts/``, ``references/`` and ``assets/`` files) with the ``skills`` tool.
"""

from ray_harness.vended_plugins.skills.agent_skills import AgentSkills, SkillSource, SkillSources
from ray_harness.vended_plugins.skills.skill import Skill

__all__ = ("AgentSkills", "Skill", "SkillSource", "SkillSources")
