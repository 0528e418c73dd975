"""``ContextInjector``: just-in-time text folded into each model call's input, never into the history.

Example::

    import datetime

    from ray_harness import Agent
    from ray_harness.vended_plugins.context_injector import ContextInjector

    agent = Agent(plugins=[ContextInjector(lambda context: f"<now>{datetime.datetime.now().isoformat()}</now>")])
"""

from ray_harness.injection.types import InjectionContext, InjectionTrigger
from ray_harness.vended_plugins.context_injector.plugin import ContextInjector

__all__ = ("ContextInjector", "InjectionContext", "InjectionTrigger")
