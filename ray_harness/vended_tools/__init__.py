"""Ready-made tools (Strands' ``strands.vended_tools``), with Strands' names, inputs and factories.

- ``sleep`` / ``make_sleep`` — a bounded pause that ``agent.cancel()`` ends at once.
- ``stop`` / ``make_stop`` — the model ends the agent loop (``stop_reason == "cancelled"``) with a final message.
- ``handoff_to_user`` / ``make_handoff_to_user`` — the model asks the human, through an interrupt.
- ``notebook`` / ``make_notebook`` — text notebooks kept in ``agent.state``.
- ``shell`` / ``make_shell``, ``file_editor`` / ``make_file_editor``, ``python_repl`` / ``make_python_repl`` —
  commands, files and Python in the agent's sandbox (``agent.sandbox``) or one bound with ``sandbox=``.
- ``http_request`` / ``make_http_request`` — raw HTTP calls through ``httpx``.
- ``subagent`` / ``make_subagent``, ``swarm`` / ``make_swarm`` — the model configures and runs a child agent, or a
  team of them, within authority modes the developer sets (:mod:`ray_harness.multiagent.spec`).
- ``web_fetch`` / ``make_web_fetch`` — fetch a page; an analyst agent answers the model's prompt about it, or the
  model reads it as markdown (``mode="markdown"``).
- ``make_a2a_client`` — the model discovers and messages remote A2A agents the developer allowed.
- ``make_mcp_router`` — the model connects to MCP servers the developer allowed, lists and calls their tools.

As in Strands, ``web_fetch``, ``make_web_fetch`` and ``make_a2a_client`` are attributes of this package but not
in ``__all__`` (Strands loads them lazily, for their optional extras; ray_harness needs no extra). Every tool here
pickles, so an agent holding them ships to a Ray host (except one made with a live HTTP client). See
``docs/concepts/vended-tools.md``.
"""

from __future__ import annotations

# Each tool is bound after its module (of the same name) is imported, so the package attribute is the tool,
# as in Strands: `from ray_harness.vended_tools import shell` is the tool, `from ray_harness.vended_tools.shell import ShellOutput`
# takes the module's type.
from ray_harness.vended_tools.a2a_client import make_a2a_client as make_a2a_client  # not in __all__, as in Strands
from ray_harness.vended_tools.file_editor import file_editor, make_file_editor
from ray_harness.vended_tools.handoff_to_user import HANDOFF_INTERRUPT_NAME, handoff_to_user, make_handoff_to_user
from ray_harness.vended_tools.http_request import http_request, make_http_request
from ray_harness.vended_tools.mcp_router import make_mcp_router
from ray_harness.vended_tools.notebook import make_notebook, notebook
from ray_harness.vended_tools.python_repl import make_python_repl, python_repl
from ray_harness.vended_tools.shell import make_shell, shell
from ray_harness.vended_tools.sleep import make_sleep, sleep
from ray_harness.vended_tools.stop import make_stop, stop
from ray_harness.vended_tools.subagent import make_subagent, subagent
from ray_harness.vended_tools.swarm import make_swarm, swarm
from ray_harness.vended_tools.web_fetch import (  # not in __all__, as in Strands
    make_web_fetch as make_web_fetch,
    web_fetch as web_fetch,
)

__all__ = [
    "HANDOFF_INTERRUPT_NAME",
    "file_editor",
    "handoff_to_user",
    "http_request",
    "make_file_editor",
    "make_handoff_to_user",
    "make_http_request",
    "make_mcp_router",
    "make_notebook",
    "make_python_repl",
    "make_shell",
    "make_sleep",
    "make_stop",
    "make_subagent",
    "make_swarm",
    "notebook",
    "python_repl",
    "shell",
    "sleep",
    "stop",
    "subagent",
    "swarm",
]
