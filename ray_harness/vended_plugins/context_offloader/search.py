"""Reading an offloaded text back: grep-like pattern matches with context, or a span of lines.

Output is numbered (1-indexed, the numbers a follow-up ``line_range`` takes), matching lines are marked ``>``,
gaps between non-adjacent lines are marked ``---``, and the whole is capped at a character budget so a
retrieval cannot flood the context it was offloaded from.
"""

from __future__ import annotations

import re

__all__ = ("is_searchable", "search_text")

_PATTERN_LIMIT = 200
# A quantified group that is quantified again ("(a+)+") can backtrack for ever: such a pattern is matched
# literally instead. A heuristic, as Strands': it does not catch every catastrophic pattern.
_NESTED_QUANTIFIER = re.compile(r"[+*]\s*\)\s*[+*]")
_TEXTUAL_APPLICATION_TYPES = frozenset({
    "application/json", "application/xml", "application/javascript", "application/typescript",
    "application/yaml", "application/x-yaml", "application/toml", "application/sql", "application/graphql",
    "application/xhtml+xml",
})


def is_searchable(content_type: str) -> bool:
    """Whether content of this MIME type is text that patterns and line ranges apply to."""
    return content_type.startswith("text/") or content_type in _TEXTUAL_APPLICATION_TYPES


def search_text(text: str, *, pattern: str | None, line_range: tuple[int, int] | None, context_lines: int,
                max_chars: int) -> str:
    """The lines of ``text`` matching ``pattern`` (with context), or the lines of ``line_range``, or both.

    Raises:
        ValueError: ``line_range`` does not start at 1 or later, ends before it starts, or starts past the end.
    """
    lines = text.split("\n")
    if lines == [""]:
        return "Content is empty (0 lines)."
    first, last = 0, len(lines) - 1
    if line_range is not None:
        start, end = line_range
        if start < 1:
            raise ValueError(f"line_range.start ({start}) must be >= 1.")
        if start > end:
            raise ValueError(f"line_range.start ({start}) must be <= line_range.end ({end}).")
        if start > len(lines):
            raise ValueError(f"line_range.start ({start}) is beyond content length ({len(lines)} lines).")
        first, last = start - 1, min(end, len(lines)) - 1
    if not pattern:
        body = _numbered(lines, list(range(first, last + 1)), set())
        return f"[Lines {first + 1}-{last + 1} of {len(lines)}]\n\n" + _cap(body, max_chars, "narrow your range")
    scope = f" in lines {first + 1}-{last + 1}" if line_range is not None else ""
    regex = _compile(pattern)
    matches = {index for index in range(first, last + 1) if regex.search(lines[index])}
    if not matches:
        return f"No matches found for pattern '{pattern}'{scope} (searched {last - first + 1} lines)."
    around = max(0, context_lines)
    shown = sorted({index for match in matches
                    for index in range(max(first, match - around), min(last, match + around) + 1)})
    label = re.sub(r"[\n\r/\]]", " ", pattern)[:50]
    header = f"[{len(matches)} match{'es' if len(matches) > 1 else ''} for /{label}/{scope}]"
    return f"{header}\n\n" + _cap(_numbered(lines, shown, matches), max_chars, "narrow your search")


def _compile(pattern: str) -> re.Pattern[str]:
    """The pattern as a regex, or as a literal when it is not a valid (or a risky) regex."""
    pattern = pattern[:_PATTERN_LIMIT]
    if not _NESTED_QUANTIFIER.search(pattern):
        try:
            return re.compile(pattern)
        except re.error:
            pass
    return re.compile(re.escape(pattern))


def _numbered(lines: list[str], indices: list[int], marked: set[int]) -> str:
    width = len(str(indices[-1] + 1)) if indices else 1
    out: list[str] = []
    for position, index in enumerate(indices):
        if position and index != indices[position - 1] + 1:
            out.append("---")
        out.append(f"{'>' if index in marked else ' '} {str(index + 1).rjust(width)}| {lines[index]}")
    return "\n".join(out)


def _cap(body: str, max_chars: int, advice: str) -> str:
    """``body`` cut at the last line break within ``max_chars``, with a note when it was cut."""
    if len(body) <= max_chars:
        return body
    cut = body.rfind("\n", 0, max_chars)
    return body[:cut if cut > 0 else max_chars] + f"\n\n[output truncated, {advice}]"
