"""What ``shell`` and ``python_repl`` share: the sandbox a call runs in and one cancellable execution.

The execution goes through :func:`ray_harness.sandbox.tools.until_cancelled`, as ``sandbox_shell``'s does, so the
agent's cancel kills a running command (Strands' tools wait for it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, TypedDict

from ray_harness.sandbox.errors import SandboxTimeoutError
from ray_harness.sandbox.tools import until_cancelled
from ray_harness.sandbox.types import ExecutionResult

if TYPE_CHECKING:
    from ray_harness.sandbox.base import Sandbox, Stream
    from ray_harness.tools.base import ToolContext

TIMEOUT_EXIT_CODE = 124
"""The exit code a timed-out execution reports (that of ``timeout(1)``), as Strands reports it."""


class ExecutionOutput(TypedDict):
    """What a command or code run gives the model: ``output`` (stdout), ``error`` (stderr), ``exit_code``."""

    output: str
    error: str
    exit_code: int


def active_sandbox(bound: Sandbox | None, context: ToolContext) -> Sandbox:
    """The sandbox bound at creation, else the calling agent's (read at each call)."""
    if bound is not None:
        return bound
    sandbox = getattr(context.agent, "sandbox", None)
    if sandbox is None:
        raise RuntimeError("no sandbox: the tool was called without an agent and was not made with sandbox=...")
    return sandbox  # type: ignore[no-any-return]


async def run_in_sandbox(start: Callable[[], Stream], context: ToolContext,
                         failure: Callable[[str], Exception]) -> ExecutionOutput:
    """Run ``start()``'s execution to its end, or until the agent is cancelled.

    Raises:
        SandboxTimeoutError: The timeout passed; its message ends with the partial output as JSON (the model
            reads only the message).
        Exception: ``failure(text)`` when the sandbox could not run it, or the agent was cancelled meanwhile.
    """
    final: ExecutionResult | None = None
    try:
        async with aclosing(until_cancelled(start(), context.cancel_signal)) as items:
            async for item in items:
                if isinstance(item, ExecutionResult):
                    final = item
    except SandboxTimeoutError as error:
        partial: dict[str, Any] = {"output": error.stdout, "error": error.stderr, "exit_code": TIMEOUT_EXIT_CODE}
        error.args = (f"{error}\n{json.dumps(partial)}",)
        raise
    except Exception as error:
        raise failure(str(error)) from error
    if final is None:
        raise failure("cancelled: the agent was cancelled while it ran")
    return {"output": final.stdout, "error": final.stderr, "exit_code": final.exit_code}
