"""Values that sandbox operations stream and return.

They are plain frozen dataclasses: cheap to build per output chunk, and they
pickle, so a sandbox hosted in a Ray actor can send them back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ("ExecutionResult", "FileInfo", "OutputFile", "StreamChunk", "StreamType")

StreamType = Literal["stdout", "stderr"]


@dataclass(frozen=True)
class StreamChunk:
    """A piece of output, as it was produced."""

    data: str
    stream_type: StreamType = "stdout"


@dataclass(frozen=True)
class OutputFile:
    """A file a code execution produced (shell sandboxes return none)."""

    name: str
    content: bytes
    mime_type: str = "application/octet-stream"


@dataclass(frozen=True)
class ExecutionResult:
    """The last item of an execution stream.

    ``stdout``/``stderr`` hold the retained output. A sandbox retains at most
    ``max_output_chars`` characters per stream (the start and the end, joined by
    a ``[... N characters truncated ...]`` marker); ``truncated`` says whether
    anything was dropped. The streamed chunks always carry everything.
    """

    exit_code: int
    stdout: str
    stderr: str
    output_files: list[OutputFile] = field(default_factory=list)
    truncated: bool = False


@dataclass(frozen=True)
class FileInfo:
    """One directory entry. ``size`` is ``None`` when the backend lists through a shell."""

    name: str
    is_dir: bool
    size: int | None = None
