"""Host event loops do not register the async generators they start.

An event loop (asyncio's, and uvloop's, which Ray runs an async actor's loops on when it is installed)
registers every async generator at its first step (``sys.set_asyncgen_hooks(firstiter=...)``) in a
``WeakSet``, only so that ``loop.shutdown_asyncgens()`` can close the ones still suspended when the loop is
shut down. The registration (a weak reference with a callback, removed again when the generator is freed)
costs about a microsecond, and one agent invocation steps through a dozen async generators (the agent loop's
layers, the model stream; a P2 row's graph about 56): a row's host path costs ≈5 % less CPU without it. A
host's loops are never shut down that way (Ray ends the process; ``shutdown_asyncgens`` is not called), so
host processes leave the registration out. The finalizer hook stays: a generator dropped while suspended is
still closed on its loop (``aclose()`` scheduled there), as before.

The hooks are per thread and Ray runs one event loop per concurrency group, each in its own thread, so each
loop thread turns the registration off at its first invocation (:func:`untrack_here`). Enabled only in host
processes (by ``AgentHost.__init__``); elsewhere (a driver, a test, a Serve replica) nothing changes.
"""

from __future__ import annotations

import sys

__all__ = ("enable", "untrack_here")

_enabled = False


def enable() -> None:
    """This process is a host: its loop threads may stop registering async generators."""
    global _enabled
    _enabled = True


def untrack_here() -> None:
    """On a host, stop this thread's event loop from registering the async generators it starts (idempotent)."""
    if _enabled and sys.get_asyncgen_hooks().firstiter is not None:
        sys.set_asyncgen_hooks(firstiter=None)  # the finalizer is kept
