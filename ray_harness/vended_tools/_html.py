"""HTML → markdown for ``web_fetch``, with the standard library's ``html.parser`` (no extra dependency).

What a model reads of a page: the title as a top heading, headings, paragraphs, lists, links (made absolute
against the page's URL), images by their alt text, code, quotes and table rows. Scripts, styles, navigation,
forms and embedded media are dropped; so are ``javascript:`` links and images (a link keeps its text) and the
bodies of ``data:`` images (they keep their alt text), which would only bloat the output.
"""

from __future__ import annotations

import re
import unicodedata
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

__all__ = ("html_to_markdown",)

_DROPPED = frozenset({"script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "video",
                      "audio", "form", "button", "select", "textarea", "nav", "head"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
                   "track", "wbr"})
_BLOCKS = frozenset({"p", "div", "section", "article", "main", "header", "footer", "aside", "figure",
                     "figcaption", "table", "thead", "tbody", "tfoot", "dl", "dt", "dd", "address", "details",
                     "summary", "body", "html", "center"})
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_EMPHASIS = {"strong": "**", "b": "**", "em": "*", "i": "*"}
_SPACES = re.compile(r"\s+")
_BLANK_RUNS = re.compile(r"\n{3,}")


def html_to_markdown(html: str, base_url: str = "") -> str:
    """``html`` as markdown a model can read; relative links resolve against ``base_url``."""
    parser = _Converter(base_url)
    parser.feed(html)
    parser.close()
    return parser.markdown()


def _scheme(url: str) -> str:
    """The URL's scheme, after any leading control, format or space characters (which browsers skip too)."""
    stripped = "".join(char for char in url if unicodedata.category(char) not in ("Cc", "Cf", "Zs"))
    return urlsplit(stripped).scheme.lower()


class _Converter(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self._base = base_url
        self._out: list[str] = []
        self._title: list[str] | None = None  # collecting the <title>'s text
        self._title_text = ""
        self._dropped = 0  # depth inside elements whose content is dropped
        self._pre = 0
        self._lists: list[list[int]] = []  # per open list: [items so far], or [-1] for an unordered one
        self._links: list[tuple[int, str | None]] = []  # per open <a>: where its text starts, its target
        self._quote = 0
        self._row_cells = 0

    # -- output ----------------------------------------------------------------------------------------

    def _tail(self) -> str:
        return "".join(self._out[-3:])[-2:]

    def _break(self, newlines: int) -> None:
        """End the current line (``1``) or paragraph (``2``), never at the very start."""
        if not self._out:
            return
        tail = self._tail()
        have = len(tail) - len(tail.rstrip("\n"))
        if have < newlines:
            self._out.append("\n" * (newlines - have))

    def _write(self, text: str) -> None:
        if not text:
            return
        if self._quote and (not self._out or self._tail().endswith("\n")):
            text = "> " * self._quote + text
        self._out.append(text)

    def markdown(self) -> str:
        lines = [line.rstrip() for line in "".join(self._out).split("\n")]
        body = _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()
        title = _SPACES.sub(" ", self._title_text).strip()
        return f"# {title}\n\n{body}".strip() if title else body

    # -- parser callbacks ----------------------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and self._title is None and not self._title_text:
            self._title = []
            return
        if tag == "body":
            self._dropped = 0  # a head left open ends where the body starts, as in a browser
        if self._dropped:
            if tag in _DROPPED:
                self._dropped += 1
            return
        if tag in _DROPPED:
            self._dropped = 1
            return
        self._open(tag, dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._title is not None:
            self._title_text, self._title = "".join(self._title), None
            return
        if self._dropped:
            if tag in _DROPPED:
                self._dropped -= 1
            return
        self._close(tag)

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.append(data)
            return
        if self._dropped:
            return
        if self._pre:
            self._out.append(data)
            return
        text = _SPACES.sub(" ", data)
        if text == " " or not text:
            if self._out and not self._tail().endswith((" ", "\n")):
                self._out.append(" ")
            return
        if not self._out or self._tail().endswith("\n"):
            text = text.lstrip()
        elif self._tail().endswith(" "):
            text = text.lstrip() if text.startswith(" ") else text
        self._write(text)

    # -- elements -------------------------------------------------------------------------------------

    def _open(self, tag: str, attrs: dict[str, str | None]) -> None:  # noqa: C901 - one branch per element kind
        if tag in _HEADINGS:
            self._break(2)
            self._write("#" * _HEADINGS[tag] + " ")
        elif tag in _BLOCKS:
            self._break(2)
        elif tag in ("ul", "ol", "menu"):
            self._break(1 if self._lists else 2)
            self._lists.append([0 if tag == "ol" else -1])
        elif tag == "li":
            self._item()
        elif tag == "tr":
            self._break(1)
            self._row_cells = 0
        elif tag in ("td", "th"):
            self._write(" | " if self._row_cells else "| ")
            self._row_cells += 1
        elif tag == "blockquote":
            self._break(2)
            self._quote += 1
        elif tag == "pre":
            self._break(2)
            self._out.append("```\n")
            self._pre += 1
        elif tag == "code" and not self._pre:
            self._write("`")
        elif tag in _EMPHASIS:
            self._write(_EMPHASIS[tag])
        elif tag == "br":
            self._out.append("\n")
        elif tag == "hr":
            self._break(2)
            self._write("---")
            self._break(2)
        elif tag == "img":
            self._image(attrs)
        elif tag == "a":
            self._links.append((len(self._out), self._target(attrs.get("href"))))

    def _close(self, tag: str) -> None:
        if tag in _HEADINGS or tag in _BLOCKS:
            self._break(2)
        elif tag in ("ul", "ol", "menu") and self._lists:
            self._lists.pop()
            self._break(1 if self._lists else 2)
        elif tag == "tr":
            if self._row_cells:
                self._write(" |")
            self._break(1)
        elif tag == "blockquote" and self._quote:
            self._break(2)
            self._quote -= 1
        elif tag == "pre" and self._pre:
            self._break(1)
            self._out.append("```")
            self._pre -= 1
            self._break(2)
        elif tag == "code" and not self._pre:
            self._write("`")
        elif tag in _EMPHASIS:
            self._write(_EMPHASIS[tag])
        elif tag == "a" and self._links:
            self._link(*self._links.pop())

    def _item(self) -> None:
        self._break(1)
        depth = max(len(self._lists) - 1, 0)
        counter = self._lists[-1] if self._lists else [-1]
        if counter[0] >= 0:
            counter[0] += 1
            marker = f"{counter[0]}. "
        else:
            marker = "- "
        self._write("  " * depth + marker)

    def _target(self, href: str | None) -> str | None:
        """Where a link or image points, made absolute; ``None`` for none or a ``javascript:`` one."""
        if not href or href.startswith("#") or _scheme(href) == "javascript":
            return None
        return urljoin(self._base, href.strip()) if self._base else href.strip()

    def _link(self, start: int, target: str | None) -> None:
        text = "".join(self._out[start:]).strip()
        if target is None or not text:
            return  # the text alone
        del self._out[start:]
        if self._out and not self._tail().endswith((" ", "\n", "(", "[")):
            self._out.append(" ")
        self._write(f"[{text}]({target})")

    def _image(self, attrs: dict[str, str | None]) -> None:
        alt = _SPACES.sub(" ", attrs.get("alt") or "").strip()
        source = attrs.get("src") or ""
        scheme = _scheme(source)
        if scheme == "javascript":
            return
        if scheme == "data" or not source:
            self._write(alt)
            return
        self._write(f"![{alt}]({self._target(source)})")
