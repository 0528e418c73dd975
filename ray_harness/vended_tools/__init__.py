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

Not provided: ``web_fetch``, ``make_a2a_client`` and ``make_mcp_router``. Every tool here pickles, so an agent
holding them ships to a Ray host. See ``docs/concepts/vended-tools.md``.
"""

from __future__ import annotations

# Each tool is bound after its module (of the same name) is imported, so the package attribute is the tool,
# as in Strands: `from ray_harness.vended_tools import shell` is the tool, `from ray_harness.vended_tools.shell import ShellOutput`
# takes the module's type.
from ray_harness.vended_tools.file_editor import file_editor, make_file_editor
from ray_harness.vended_tools.handoff_to_user import HANDOFF_INTERRUPT_NAME, handoff_to_user, make_handoff_to_user
from ray_harness.vended_tools.http_request import http_request, make_http_request
from ray_harness.vended_tools.notebook import make_notebook, notebook
from ray_harness.vended_tools.python_repl import make_python_repl, python_repl
from ray_harness.vended_tools.shell import make_shell, shell
from ray_harness.vended_tools.sleep import make_sleep, sleep
from ray_harness.vended_tools.stop import make_stop, stop
from ray_harness.vended_tools.subagent import make_subagent, subagent
from ray_harness.vended_tools.swarm import make_swarm, swarm

__all__ = [
    "HANDOFF_INTERRUPT_NAME",
    "file_editor",
    "handoff_to_user",
    "http_request",
    "make_file_editor",
    "make_handoff_to_user",
    "make_http_request",
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
