"""``EarlyCancels``: cancels that overtook their run, remembered (bounded) so the run starts cancelled.

A cancel can reach a host, a runner or an orchestration host before the run it names (the caller cancels
while the request is still on its way). The id is remembered here, oldest first forgotten, and the run
that starts under it takes it and starts cancelled. A host remembers the ids of running runs it cancels as
well: the same run sent again (after its orchestration host was lost) starts cancelled. Not locked: each owner
holds its own guard around it.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ("EarlyCancels",)


class EarlyCancels:
    """Ids cancelled before their run started, at most ``size`` of them (the oldest are forgotten first).

    Args:
        size: How many ids to keep; a cancel older than that is lost (a run that never came).

    """

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def remember(self, run_id: str) -> None:
        """Keep ``run_id``: its run starts cancelled."""
        self._ids[run_id] = None
        self._ids.move_to_end(run_id)
        while len(self._ids) > self._size:
            self._ids.popitem(last=False)

    def take(self, run_id: str) -> bool:
        """Whether ``run_id`` was cancelled before it started (forgetting it: a re-run starts afresh)."""
        return self._ids.pop(run_id, False) is None

    def __len__(self) -> int:
        return len(self._ids)
