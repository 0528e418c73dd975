"""Background tool execution: ``Agent(background_tasks=True)`` or a :class:`BackgroundTasksConfig` (Strands' feature).

The model may run a tool in the background (``agentic`` tools get a ``_background_execution`` flag in their
schema; ``always`` tools always do): the call is answered at once with a task id, the tool runs on a thread of
the agent's own, and its result reaches the conversation as a synthetic ``strands_manage_background_task``
``get`` call and its result — before the next model call, or at the end of the invocation, which by default waits
for the tasks (``wait_for_completion``) and lets the model answer them. ``strands_manage_background_task`` lets
the model list, inspect or cancel tasks. ``agent.cancel()``, ``agent.shutdown()`` and a cancelled invocation
cancel the running tasks; a pickled agent carries the tasks' records, not the running work.

As in Strands, only :class:`BackgroundTasksConfig` is public; the plugin that does the work is internal.
"""

from ray_harness.background_tasks._types import BackgroundTasksConfig

__all__ = ["BackgroundTasksConfig"]
