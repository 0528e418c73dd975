"""Ready-made intervention handlers (Strands' ``strands.vended_interventions``).

- :mod:`ray_harness.vended_interventions.hitl` — ``HumanInTheLoop``: a human approves tool calls (interrupt and
  resume by default, or asked inline), optionally only the calls a classifier finds risky.

Strands' ``CedarAuthorization`` (Cedar policies) is not provided: asking for it raises ``ImportError`` saying
so, where Strands raises ``ImportError`` when ``cedarpy`` is missing. It is not in ``__all__``, so
``from ray_harness.vended_interventions import *`` works.
"""

from typing import Any

from ray_harness.vended_interventions.hitl import HumanInTheLoop

__all__ = ["HumanInTheLoop"]

_NOT_PROVIDED = {
    "CedarAuthorization": "ray_harness does not provide Strands' CedarAuthorization (Cedar policy checks); write an "
                          "InterventionHandler whose before_tool_call returns Deny for calls your policy refuses",
}


def __getattr__(name: str) -> Any:
    # Looked up lazily, as Strands does, so the missing handler fails only for code that uses it.
    if name in _NOT_PROVIDED:
        raise ImportError(_NOT_PROVIDED[name], name=name, path=__file__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
