"""``web_fetch``: fetch an HTTP(S) page and hand the model its readable content, or an analyst's answer about it.

Strands' ``strands.vended_tools.web_fetch``. ``make_web_fetch(mode=...)`` picks what the model gets:

- ``"agentic"`` (the default, and the ``web_fetch`` tool): the page goes to a fresh analyst agent (the factory's
  ``model``, else the calling agent's ``aux_model`` or ``model``) that answers the model's ``prompt``; the page
  itself never enters the calling agent's context.
- ``"markdown"``: the page as markdown (HTML and XML converted, scripts, styles, navigation and forms dropped;
  other content types as they came), cut at ``max_content_chars`` with a visible marker.

A body larger than ``max_bytes`` is refused without reading it all. ``client=`` supplies a configured
``httpx.AsyncClient`` (timeouts, redirects, proxies, auth: all the client's; the tool never closes it); else each
call makes and closes a default one that follows redirects. A status of 400 or more, a timeout, a transport
failure or a URL that is not ``http(s)`` is a :class:`WebFetchError` (an error result). ``agent.cancel()``
aborts a fetch in flight and stops the analyst. The tool pickles with its model (so an agent holding it ships to
a Ray host), except one made with a ``client``: a live client holds sockets.

Unlike Strands, no extra is needed: the HTML is converted with the standard library (``_html``), not markdownify.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

from typing import TYPE_CHECKING, Any, Literal

from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.types.exceptions import RayHarnessError
from ray_harness.vended_tools._cancel import unless_cancelled
from ray_harness.vended_tools._html import html_to_markdown

if TYPE_CHECKING:
    import httpx

    from ray_harness.models.base import Model

__all__ = ("WEB_FETCH_DESCRIPTION_AGENTIC", "WEB_FETCH_DESCRIPTION_MARKDOWN", "WebFetchError", "make_web_fetch",
           "web_fetch")

# The model reads Strands' descriptions.
WEB_FETCH_DESCRIPTION_MARKDOWN = (
    "Fetches an HTTP(S) URL and returns its content as clean markdown. "
    "HTML pages are converted to markdown with scripts, styles, and noise stripped; "
    "other content types are returned as-is."
)
"""What the model reads of the ``"markdown"`` tool."""
WEB_FETCH_DESCRIPTION_AGENTIC = (
    "Fetches an HTTP(S) URL and answers a prompt about its content. "
    "The analyst processes the page directly so the full content never enters "
    "the main agent's context. "
    "The prompt parameter is required."
)
"""What the model reads of the ``"agentic"`` tool (the default)."""

_DEFAULT_MAX_BYTES = 5 * 1024 * 1024
_DEFAULT_MAX_CONTENT_CHARS = 50_000
_HEADERS = {"User-Agent": "ray-harness-web-fetch/1.0", "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"}
_TRUNCATED = "\n\n[content truncated]"
_ANALYST_PROMPT = (
    "You answer a request about one fetched web page, from its content only. If the content does not hold "
    "the answer, say so. Be brief and exact, and keep the details the request needs (names, numbers, quotes, "
    "links)."
)


class WebFetchError(RayHarnessError, ValueError):
    """A fetch or its analyst failed, or the agent's cancel stopped it (the model reads the message).

    A fetch fails on an error status, a timeout, a transport error, a body too large or a URL not ``http(s)``.
    """


def make_web_fetch(*, name: str = "web_fetch", description: str | None = None, max_bytes: int = _DEFAULT_MAX_BYTES,
                   max_content_chars: int = _DEFAULT_MAX_CONTENT_CHARS, client: "httpx.AsyncClient | None" = None,
                   model: "Model | None" = None,
                   mode: Literal["markdown", "agentic"] = "agentic") -> DecoratedFunctionTool:
    """A web fetch tool.

    Args:
        name: The tool's name.
        description: What the model reads (default: the mode's description).
        max_bytes: The largest response body read, in bytes (default 5 MiB); a larger one is an error.
        max_content_chars: The most characters of content the model (or the analyst) gets (default 50,000);
            more is cut, with a ``[content truncated]`` marker.
        client: The client every request goes through (never closed by the tool); ``None``: a default
            ``httpx.AsyncClient`` per request (follows redirects, 5 s timeout).
        model: The analyst's model (``"agentic"`` only); ``None``: the calling agent's ``aux_model``, else its
            ``model``.
        mode: ``"agentic"`` (an analyst answers the model's ``prompt``) or ``"markdown"`` (the page itself).

    Raises:
        ValueError: An argument is invalid (the message names it).
    """
    _check_arguments(max_bytes, max_content_chars, client, model, mode)
    text = description if description is not None else (
        WEB_FETCH_DESCRIPTION_MARKDOWN if mode == "markdown" else WEB_FETCH_DESCRIPTION_AGENTIC)
    if not isinstance(text, str) or not text:
        raise ValueError(f"description must be a non-empty string or None, got {description!r}")
    limits = (max_bytes, max_content_chars)

    if mode == "markdown":
        @tool(name=name, description=text, context=True)
        async def web_fetch_markdown(url: str, tool_context: ToolContext) -> str:
            """Fetches an HTTP(S) URL and returns its content as markdown.

            Args:
                url: The URL to fetch (``http://`` or ``https://``).
                tool_context: Injected by the agent (not an input).
            """
            return await _page(url, client, limits, tool_context)

        return web_fetch_markdown

    @tool(name=name, description=text, context=True)
    async def web_fetch_agentic(url: str, prompt: str, tool_context: ToolContext) -> str:
        """Fetches an HTTP(S) URL and returns an analyst's answer to ``prompt`` about it.

        Args:
            url: The URL to fetch (``http://`` or ``https://``).
            prompt: The question or instruction about the page's content.
            tool_context: Injected by the agent (not an input).
        """
        if not prompt.strip():
            raise WebFetchError("web_fetch: agentic mode needs a non-empty prompt")
        analyst_model = model or _host_model(tool_context.agent)
        if analyst_model is None:
            raise WebFetchError("web_fetch: agentic mode needs a model: pass model= to make_web_fetch, or call "
                                "the tool from an agent")
        content = await _page(url, client, limits, tool_context)
        return await _ask_analyst(analyst_model, url, prompt, content, tool_context)

    return web_fetch_agentic


def _check_arguments(max_bytes: Any, max_content_chars: Any, client: Any, model: Any, mode: Any) -> None:
    for field, value in (("max_bytes", max_bytes), ("max_content_chars", max_content_chars)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{field} must be a positive integer, got {value!r}")
    if mode not in ("markdown", "agentic"):
        raise ValueError(f"mode must be 'markdown' or 'agentic', got {mode!r}")
    if client is not None:
        import httpx

        if not isinstance(client, httpx.AsyncClient):
            raise ValueError(f"client must be an httpx.AsyncClient or None, got {type(client).__name__}")
    if model is not None:
        from ray_harness.models.base import Model

        if not isinstance(model, Model):
            raise ValueError(f"model must be a ray_harness Model or None, got {type(model).__name__}")


def _host_model(agent: Any) -> "Model | None":
    found: Model | None = getattr(agent, "aux_model", None) or getattr(agent, "model", None)
    return found


async def _page(url: str, client: "httpx.AsyncClient | None", limits: tuple[int, int], context: ToolContext) -> str:
    """The page at ``url`` as the model (or the analyst) reads it: markdown for markup, cut at the limit."""
    max_bytes, max_chars = limits
    fetched = _fetch(url, client, max_bytes)
    content_type, body, final_url = await unless_cancelled(fetched, context.cancel_signal,
                                                           WebFetchError("web_fetch cancelled"))
    kind = content_type.lower()
    content = html_to_markdown(body, final_url) if "html" in kind or "xml" in kind else body
    return content[:max_chars] + _TRUNCATED if len(content) > max_chars else content


async def _fetch(url: str, client: "httpx.AsyncClient | None", max_bytes: int) -> tuple[str, str, str]:
    """One GET: ``(content type, body text, final URL)``, reading at most ``max_bytes`` of body."""
    import httpx  # only a call needs it: importing ray_harness.vended_tools stays cheap

    if not url.lower().startswith(("http://", "https://")):
        raise WebFetchError(f"Fetch failed: {url!r} is not an http:// or https:// URL")
    active = client if client is not None else httpx.AsyncClient(follow_redirects=True)
    try:
        try:
            response = await active.send(active.build_request("GET", url, headers=_HEADERS), stream=True)
        except httpx.TimeoutException as error:
            raise WebFetchError(f"Fetch timed out: {url!r}") from error
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as error:
            raise WebFetchError(f"Fetch failed: {url}: {error}") from error
        try:
            if response.status_code >= 400:
                raise WebFetchError(f"HTTP {response.status_code} {response.reason_phrase}: {url}")
            body = await _capped_body(response, max_bytes)
        finally:
            await response.aclose()
    finally:
        if client is None:
            await active.aclose()
    return response.headers.get("content-type", ""), _decoded(body, response.charset_encoding), str(response.url)


async def _capped_body(response: "httpx.Response", max_bytes: int) -> bytes:
    import httpx

    chunks: list[bytes] = []
    total = 0
    try:
        async for chunk in response.aiter_bytes():
            total += len(chunk)
            if total > max_bytes:
                raise WebFetchError(f"Response body exceeded {max_bytes} bytes; refusing to read more")
            chunks.append(chunk)
    except httpx.HTTPError as error:
        raise WebFetchError(f"Fetch failed while reading the body: {error}") from error
    return b"".join(chunks)


def _decoded(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", errors="replace")


async def _ask_analyst(model: "Model", url: str, prompt: str, content: str, context: ToolContext) -> str:
    """A fresh agent (no history, no tools) answers ``prompt`` from ``content``; the cancel stops it too."""
    from ray_harness.agent.agent import Agent  # here: the agent package imports the tools package

    analyst = Agent(model=model, system_prompt=_ANALYST_PROMPT, name="web_fetch_analyst")
    request = f"URL: {url}\n\nRequest: {prompt}\n\n--- Content ---\n{content}"
    try:
        result = await analyst.invoke_async(request, cancel_signal=context.cancel_signal)
    except Exception as error:
        raise WebFetchError(f"Web fetch analyst failed for {url}: {error}") from error
    if result.stop_reason == "cancelled":
        raise WebFetchError("web_fetch cancelled")
    return result.text


web_fetch = make_web_fetch()
"""The default web fetch tool (``"agentic"``: the calling agent's model answers the prompt)."""
