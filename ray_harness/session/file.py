"""Sessions in a local directory: ``FileSessionRepository`` and ``FileSessionManager``.

Every write goes to a temporary file in the target directory and is moved into place with
``os.replace``, so a crash leaves either the old or the new file, never half of one. Directories
are created with mode 0o700 and files with 0o600: sessions hold whole conversations.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ray_harness.session.manager import RepositorySessionManager
from ray_harness.session.repository import BlobSessionRepository
from ray_harness.types.exceptions import SessionException

__all__ = ("FileSessionManager", "FileSessionRepository", "default_storage_dir")

_ENV_DIR = "RAY_HARNESS_SESSION_DIR"


def default_storage_dir() -> Path:
    """``$RAY_HARNESS_SESSION_DIR``, else ``~/.ray_harness/sessions``."""
    configured = os.environ.get(_ENV_DIR)
    return Path(configured) if configured else Path.home() / ".ray_harness" / "sessions"


class FileSessionRepository(BlobSessionRepository):
    """Session records as JSON files under ``storage_dir``."""

    def __init__(self, storage_dir: str | os.PathLike[str] | None = None) -> None:
        self.storage_dir = Path(storage_dir) if storage_dir is not None else default_storage_dir()

    def _path(self, key: str) -> Path:
        return self.storage_dir.joinpath(*key.split("/"))

    def _location(self, key: str) -> str:
        return str(self._path(key))

    def _read(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise SessionException(f"cannot read session file {path}: {error}") from None

    def _write(self, key: str, data: bytes) -> None:
        self._put(key, data, os.replace)

    def _create(self, key: str, data: bytes) -> bool:
        try:
            self._put(key, data, os.link)  # link fails if the name exists: an exclusive create of complete data
        except FileExistsError:
            return False
        return True

    def _put(self, key: str, data: bytes, place: Callable[[str, Path], None]) -> None:
        """Write ``data`` to a private temporary file beside ``key``'s, synced, then ``place`` it at the name."""
        path = self._path(key)
        try:
            _make_private_dirs(path.parent)
            handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0o600
            try:
                with os.fdopen(handle, "wb") as stream:
                    stream.write(data)
                    stream.flush()
                    os.fsync(stream.fileno())
                place(temp, path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(temp)  # gone after a replace; the second name of a link
        except FileExistsError:
            raise
        except OSError as error:
            raise SessionException(f"cannot write session file {path}: {error}") from None

    def _list_dir(self, key: str) -> list[str]:
        path = self._path(key)
        try:
            return os.listdir(path)
        except FileNotFoundError:
            return []
        except OSError as error:  # e.g. a file where the session's directory belongs
            raise SessionException(f"cannot list session directory {path}: {error}") from None

    def _delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def _delete_tree(self, key: str) -> None:
        shutil.rmtree(self._path(key), ignore_errors=True)


def _make_private_dirs(directory: Path) -> None:
    missing = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process created it meanwhile
            path.mkdir(mode=0o700)
        os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask


class FileSessionManager(RepositorySessionManager):
    """Persist agents of one session as files.

    Args:
        session_id: The session (a directory ``session_<id>``); no path separators or ``..``.
        storage_dir: Root directory; default ``$RAY_HARNESS_SESSION_DIR`` or ``~/.ray_harness/sessions``.
    """

    def __init__(self, session_id: str, storage_dir: str | os.PathLike[str] | None = None) -> None:
        self.storage_dir = Path(storage_dir) if storage_dir is not None else default_storage_dir()
        super().__init__(session_id, FileSessionRepository(self.storage_dir))

    @property
    def session_dir(self) -> Path:
        """The directory that holds this session's files."""
        return self.storage_dir / f"session_{self.session_id}"
