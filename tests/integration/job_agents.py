"""An agent that shows which Ray job the metrics it records are tagged with (tests of the ``job`` tag).

Importable by module path, so a RemoteAgent builds it in its actor (``"tests.integration.job_agents:job_reporter"``).
"""

from __future__ import annotations

import json
from typing import Any

from ray_harness import Agent, tool
from ray_harness.hooks.events import BeforeInvocationEvent
from ray_harness.testing import ScriptedModel, text, tool_call

# The tags of every ``ray_harness_tokens`` increment this process handed to Ray (default tags filled in).
_handed: list[dict[str, str]] = []


def _watch_tokens(event: Any) -> None:
    """Record what the process's Ray metrics sink hands to Ray for ``ray_harness_tokens`` from now on.

    A hook before the invocation: the runtime installs the sink at the first invocation, before the hooks run.
    """
    from ray_harness.runtime._telemetry import _state

    tokens = _state["sink"]._tokens
    if getattr(tokens, "_watched", False):
        return
    record = tokens._record

    def watched(value: float, tags: dict[str, str] | None = None) -> None:
        _handed.append({**tokens._default_tags, **(tags or {})})
        record(value, tags=tags)

    tokens._record, tokens._watched = watched, True


@tool
def handed_jobs() -> str:
    """The jobs of the token counts this process handed to Ray so far (a JSON list), after handing all over."""
    from ray_harness.runtime._telemetry import flush_metrics

    flush_metrics()
    return json.dumps(sorted({tags["job"] for tags in _handed}))


def job_reporter() -> Agent:
    """Answers twice (one invocation each), then reports the jobs its metrics were tagged with."""
    model = ScriptedModel(text("first"), text("second"), tool_call("handed_jobs", {}), text("reported"))
    agent = Agent(model, tools=[handed_jobs], name="job_reporter", retry_strategy=None)
    agent.add_hook(_watch_tokens, BeforeInvocationEvent)
    return agent
