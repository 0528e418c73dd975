"""Bounded, incrementally decoded output retention for one stream."""

from __future__ import annotations

import codecs
from collections import deque

__all__ = ("DEFAULT_MAX_OUTPUT_CHARS", "RetainedOutput")

DEFAULT_MAX_OUTPUT_CHARS = 10_000_000
"""Characters of stdout (and, separately, stderr) an ``ExecutionResult`` keeps by default."""


class RetainedOutput:
    """Decodes one stream's bytes and keeps at most ``limit`` characters of it.

    Beyond the limit it keeps the first half and the last half (the end of a
    log is usually where the error is) and counts what it dropped, so a
    command printing gigabytes costs bounded memory while its chunks still
    stream. ``limit=None`` keeps everything (file reads need every byte).
    """

    def __init__(self, limit: int | None) -> None:
        if limit is not None and limit < 0:
            raise ValueError(f"max_output_chars must be >= 0 or None, got {limit}")
        self._limit = limit
        # errors="replace": a command may print arbitrary bytes; chunks split inside a
        # multi-byte character are completed by the incremental decoder.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self._dropped = 0

    @property
    def truncated(self) -> bool:
        return self._dropped > 0

    def feed(self, data: bytes, *, final: bool = False) -> str:
        """Decode ``data``, retain what fits and return the decoded text (for streaming)."""
        text = self._decoder.decode(data, final)
        if text:
            self._retain(text)
        return text

    def value(self) -> str:
        self._compact()
        head = "".join(self._head)
        tail = "".join(self._tail)
        if not self._dropped:
            return head + tail
        return f"{head}\n[... {self._dropped} characters truncated ...]\n{tail}"

    def _retain(self, text: str) -> None:
        if self._limit is None:
            self._head.append(text)
            return
        head_cap = self._limit - self._limit // 2
        if self._head_len < head_cap:
            taken = text[: head_cap - self._head_len]
            self._head.append(taken)
            self._head_len += len(taken)
            text = text[len(taken):]
            if not text:
                return
        self._tail.append(text)
        self._tail_len += len(text)
        if self._tail_len > 2 * (self._limit // 2) + 65_536:
            self._compact()

    def _compact(self) -> None:
        if self._limit is None:
            return
        tail_cap = self._limit // 2
        if self._tail_len <= tail_cap:
            return
        joined = "".join(self._tail)
        kept = joined[len(joined) - tail_cap:] if tail_cap else ""
        self._dropped += len(joined) - len(kept)
        self._tail = deque([kept]) if kept else deque()
        self._tail_len = len(kept)
