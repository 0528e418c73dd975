"""Run a coroutine to completion from sync code: ``agent(...)`` and every other sync entry point that drives one."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

__all__ = ("run_sync",)


def run_sync(coroutine: Any) -> Any:
    """Run ``coroutine`` to completion from sync code, even when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name="ray_harness-sync-call")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]

