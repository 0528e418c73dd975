"""A small file store for agent snapshots, so a restarted actor restores its agent.

One file per key (``<dir>/<quoted key>.pkl``), replaced atomically (write a temp
file in the same directory, then ``os.replace``): a reader sees the old or the
new snapshot, never half of one, even when the writer is killed mid-write. No
``fsync``: this protects against process death (what Ray restarts from), not
against the machine losing power.

The directory is ``RAY_HARNESS_STATE_DIR`` if set, else ``~/.ray_harness/runtime``.
On a multi-node cluster point it at shared storage so a restarted actor on
another node finds its snapshot.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

from ray_harness.types.exceptions import SessionException

__all__ = ("FileAgentStore", "default_state_dir")


def default_state_dir() -> Path:
    configured = os.environ.get("RAY_HARNESS_STATE_DIR")
    return Path(configured) if configured else Path.home() / ".ray_harness" / "runtime"


class FileAgentStore:
    """Snapshots keyed by a string (the actor's namespace and name)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_state_dir()

    def path(self, key: str) -> Path:
        if not key:
            raise ValueError("store key must be a non-empty string")
        return self.directory / (urllib.parse.quote(key, safe="") + ".pkl")

    def save(self, key: str, snapshot: dict[str, Any]) -> None:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL)
        fd, temp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def load(self, key: str) -> dict[str, Any] | None:
        """Return the snapshot for ``key``, ``None`` if there is none; ``SessionException`` if it is unreadable."""
        target = self.path(key)
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            return None
        try:
            snapshot = pickle.loads(data)
        except Exception as error:
            raise SessionException(f"agent snapshot {str(target)!r} is unreadable: {error}") from error
        if not isinstance(snapshot, dict):
            raise SessionException(f"agent snapshot {str(target)!r} does not hold a dict")
        return snapshot

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"FileAgentStore({str(self.directory)!r})"
