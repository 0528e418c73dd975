"""Ready-made plugins (Strands' ``strands.vended_plugins``): import each from its module.

- :mod:`ray_harness.vended_plugins.context_injector` — ``ContextInjector``: just-in-time text folded into each
  model call's input, never into the history.
- :mod:`ray_harness.vended_plugins.context_offloader` — ``ContextOffloader``: oversized tool results stored per
  block (memory, files, S3) and replaced by a preview the agent can search back through a tool.
- :mod:`ray_harness.vended_plugins.goal` — ``GoalLoop``: validate each answer against a goal (a judge agent or a
  validator function) and retry until it is met.
- :mod:`ray_harness.vended_plugins.skills` — ``AgentSkills``: Agent Skills (``SKILL.md``) listed in the system
  prompt and loaded on demand through a ``skills`` tool.
- :mod:`ray_harness.vended_plugins.steering` — Strands' steering import path: :mod:`ray_harness.steering`'s
  ``SteeringHandler`` and decisions under Strands' names (``Proceed``, ``Guide``, ``Interrupt``).
"""
