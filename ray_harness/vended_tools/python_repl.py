"""``python_repl``: run Python code in a sandbox and return its ``output``, ``error`` and ``exit_code``.

Strands' ``strands.vended_tools.python_repl``, through the sandbox's ``execute_code``. Each call is a fresh
interpreter: variables and imports do not carry over, files written in the sandbox do. ``make_python_repl``
binds a sandbox or picks the interpreter; without a sandbox each call uses the calling agent's ``agent.sandbox``.
Unlike Strands', ``agent.cancel()`` kills running code.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

from typing import Annotated

from pydantic import Field

from ray_harness.sandbox._validation import check_language
from ray_harness.sandbox.base import Sandbox
from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.types.exceptions import RayHarnessError
from ray_harness.vended_tools._sandboxed import ExecutionOutput, active_sandbox, run_in_sandbox

__all__ = ("PYTHON_REPL_DESCRIPTION", "PythonReplError", "PythonReplOutput", "make_python_repl", "python_repl")

PythonReplOutput = ExecutionOutput
"""The result: ``output`` (stdout), ``error`` (stderr, tracebacks) and ``exit_code`` (non-zero: the code failed)."""

DEFAULT_LANGUAGE = "python3"
DEFAULT_TIMEOUT = 120
PYTHON_REPL_DESCRIPTION = (
    "Executes Python code and returns output (stdout), error (stderr), and exit_code (non-zero means the code "
    "failed). Each call runs in a fresh interpreter; variables, imports, and definitions do not persist across "
    "calls. Files written to the working directory persist while the sandbox is alive, so save intermediate "
    "results to files when later calls need them. stdin is not available (input() fails). Use print() to surface "
    "values."
)


class PythonReplError(RayHarnessError, RuntimeError):
    """The sandbox could not run the code (or the agent was cancelled); errors in the code are results."""


def make_python_repl(*, sandbox: Sandbox | None = None, name: str = "python_repl",
                     description: str = PYTHON_REPL_DESCRIPTION, language: str = DEFAULT_LANGUAGE
                     ) -> DecoratedFunctionTool:
    """A Python tool.

    Args:
        sandbox: The sandbox every call runs in; ``None``: the calling agent's ``agent.sandbox``.
        name: The tool's name.
        description: What the model reads.
        language: The interpreter the code is fed to (default ``python3``).

    Raises:
        ValueError: ``name`` is empty or ``language`` is no bare interpreter name.
    """
    if not name:
        raise ValueError("name must be a non-empty string")
    check_language(language)  # the sandbox checks it too, but only at the first call

    @tool(name=name, description=description, context=True)
    async def python_repl_tool(code: str, tool_context: ToolContext,
                               timeout: Annotated[int, Field(gt=0)] = DEFAULT_TIMEOUT) -> PythonReplOutput:
        """Executes Python code and returns its output, error, and exit code.

        Args:
            code: Python source to execute.
            timeout: Timeout in seconds (default: 120). Must be positive.
            tool_context: Injected by the agent (not an input).
        """
        active = active_sandbox(sandbox, tool_context)
        return await run_in_sandbox(lambda: active.execute_code_streaming(code, language, timeout=timeout),
                                    tool_context, PythonReplError)

    return python_repl_tool


python_repl = make_python_repl()
"""The default Python tool: runs in the calling agent's sandbox."""
