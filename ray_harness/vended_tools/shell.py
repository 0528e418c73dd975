"""``shell``: run a command in a sandbox and return its ``output``, ``error`` and ``exit_code``.

Strands' ``strands.vended_tools.shell``. ``make_shell(sandbox=...)`` binds a sandbox; without one (as the default
``shell``) each call runs in the calling agent's ``agent.sandbox``. Every call is a fresh shell: variables and
the working directory do not carry over. A non-zero exit code is a result, not an error; a timeout is an error
result carrying the partial output. Unlike Strands', ``agent.cancel()`` kills a running command.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

from typing import Annotated

from pydantic import Field

from ray_harness.sandbox.base import Sandbox
from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.types.exceptions import RayHarnessError
from ray_harness.vended_tools._sandboxed import ExecutionOutput, active_sandbox, run_in_sandbox

__all__ = ("SANDBOX_SHELL_DESCRIPTION", "ShellExecutionError", "ShellOutput", "make_shell", "shell")

ShellOutput = ExecutionOutput
"""The result: ``output`` (stdout), ``error`` (stderr) and ``exit_code`` (non-zero: the command failed)."""

DEFAULT_TIMEOUT = 120
SANDBOX_SHELL_DESCRIPTION = (
    "Executes shell commands and returns output (stdout), error (stderr), and exit_code (non-zero means the "
    "command failed). Each call runs in a fresh shell; state such as variables and the working directory does "
    "not persist across calls."
)


class ShellExecutionError(RayHarnessError, RuntimeError):
    """The sandbox could not run the command (or the agent was cancelled while it ran)."""


def make_shell(*, sandbox: Sandbox | None = None, name: str = "shell",
               description: str = SANDBOX_SHELL_DESCRIPTION) -> DecoratedFunctionTool:
    """A shell tool.

    Args:
        sandbox: The sandbox every call runs in; ``None``: the calling agent's ``agent.sandbox``.
        name: The tool's name.
        description: What the model reads.
    """

    @tool(name=name, description=description, context=True)
    async def shell_tool(command: str, tool_context: ToolContext,
                         timeout: Annotated[int, Field(gt=0)] = DEFAULT_TIMEOUT) -> ShellOutput:
        """Executes a shell command and returns its output and exit code.

        Args:
            command: The shell command to execute.
            timeout: Timeout in seconds (default: 120).
            tool_context: Injected by the agent (not an input).
        """
        active = active_sandbox(sandbox, tool_context)
        return await run_in_sandbox(lambda: active.execute_streaming(command, timeout=timeout), tool_context,
                                    ShellExecutionError)

    return shell_tool


shell = make_shell()
"""The default shell tool: runs in the calling agent's sandbox."""
