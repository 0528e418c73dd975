"""``GoalLoop``: validate each answer against a goal and retry until it is met (Strands' goal plugin).

Example::

    from ray_harness import Agent
    from ray_harness.vended_plugins.goal import GoalLoop

    concise = GoalLoop(goal="At most 3 sentences, accessible to a 10-year-old.", max_attempts=3)
    agent = Agent(plugins=[concise])
    agent("Explain how rainbows form.")
    print(concise.last_result(agent))
"""

from ray_harness.vended_plugins.goal.judge import JUDGE_SYSTEM_PROMPT, JudgeOutcome, build_judge_prompt
from ray_harness.vended_plugins.goal.outcomes import (
    GoalAttempt,
    GoalResult,
    GoalStopReason,
    JudgeConfig,
    ValidationOutcome,
    Validator,
)
from ray_harness.vended_plugins.goal.plugin import GoalLoop

__all__ = (
    "JUDGE_SYSTEM_PROMPT",
    "GoalAttempt",
    "GoalLoop",
    "GoalResult",
    "GoalStopReason",
    "JudgeConfig",
    "JudgeOutcome",
    "ValidationOutcome",
    "Validator",
    "build_judge_prompt",
)
