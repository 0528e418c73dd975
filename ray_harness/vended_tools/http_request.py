"""``http_request``: the model makes a raw HTTP call and reads the status, headers and body.

Strands' ``strands.vended_tools.http_request``, a thin layer over ``httpx.AsyncClient``: ``make_http_request
(client=...)`` supplies a configured client (timeouts, redirects, auth headers, proxies: all the client's; the
tool never closes it), else each call makes and closes a default one. A status of 400 or more, a timeout or a
transport failure is an error result. ``agent.cancel()`` aborts a request in flight (an error result). A tool made
with a ``client`` does not pickle (a live client holds sockets), so it cannot ship to a Ray host; the default
tool does.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

from typing import TYPE_CHECKING, Annotated, Literal, TypedDict

from pydantic import Field

from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.types.exceptions import RayHarnessError
from ray_harness.vended_tools._cancel import unless_cancelled

if TYPE_CHECKING:
    import httpx


__all__ = ("DEFAULT_HTTP_REQUEST_DESCRIPTION", "HttpMethod", "HttpRequestError", "HttpRequestOutput", "http_request",
           "make_http_request")

HttpMethod = Literal["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
"""The methods the tool accepts."""
PositiveSeconds = Annotated[float, Field(gt=0)]
DEFAULT_HTTP_REQUEST_DESCRIPTION = (
    "Makes HTTP requests to external APIs. Supports GET, POST, PUT, DELETE, PATCH, HEAD, and OPTIONS methods. "
    "Returns response with status, headers, and body."
)


class HttpRequestOutput(TypedDict):
    """The response: ``status``, ``status_text``, ``headers`` (lower-case names; repeats joined by newlines), ``body``."""

    status: int
    status_text: str
    headers: dict[str, str]
    body: str


class HttpRequestError(RayHarnessError, RuntimeError):
    """The request failed: an error status, a timeout, a transport error, or the agent's cancel."""


def make_http_request(*, name: str = "http_request", description: str = DEFAULT_HTTP_REQUEST_DESCRIPTION,
                      client: "httpx.AsyncClient | None" = None) -> DecoratedFunctionTool:
    """An HTTP request tool.

    Args:
        name: The tool's name.
        description: What the model reads.
        client: The client every request goes through (never closed by the tool); ``None``: a default
            ``httpx.AsyncClient`` per request.
    """

    @tool(name=name, description=description, context=True)
    async def http_request_tool(method: HttpMethod, url: str, tool_context: ToolContext,
                                headers: dict[str, str] | None = None, body: str | None = None,
                                timeout: PositiveSeconds | None = None) -> HttpRequestOutput:
        """Make an HTTP request to a URL and return the response.

        Args:
            method: HTTP method (GET, POST, PUT, DELETE, PATCH, HEAD, OPTIONS).
            url: Absolute URL to request.
            headers: Optional request headers.
            body: Optional request body as a string.
            timeout: Optional timeout in seconds; with a configured client, at most the client's own.
            tool_context: Injected by the agent (not an input).
        """
        request = _send(client, method, url, headers, body, timeout)
        return await unless_cancelled(request, tool_context.cancel_signal, HttpRequestError("Request cancelled"))

    return http_request_tool


def _capped_timeout(requested: float | None, client: "httpx.AsyncClient | None") -> float | None:
    """The request's timeout: the model's, never above a given client's (its read, else connect, else write)."""
    cap = None
    if client is not None:
        phases = (client.timeout.read, client.timeout.connect, client.timeout.write)
        cap = next((phase for phase in phases if phase is not None), None)
    if requested is None or cap is None:
        return requested if requested is not None else cap
    return min(requested, cap)


async def _send(client: "httpx.AsyncClient | None", method: str, url: str, headers: dict[str, str] | None,
                body: str | None, timeout: float | None) -> HttpRequestOutput:
    import httpx  # only a call needs it: importing ray_harness.vended_tools stays cheap

    active = client if client is not None else httpx.AsyncClient()
    seconds = _capped_timeout(timeout, client)
    try:
        request = active.build_request(method, url, headers=headers, content=body,
                                       timeout=httpx.USE_CLIENT_DEFAULT if seconds is None else seconds)
        try:
            response = await active.send(request)
        except httpx.TimeoutException as error:
            raise HttpRequestError(f"Request timed out: {error}") from error
        except httpx.TooManyRedirects as error:
            raise HttpRequestError(f"Too many redirects: {error}") from error
        except httpx.RequestError as error:
            raise HttpRequestError(f"Request failed: {error}") from error
    except httpx.InvalidURL as error:
        raise HttpRequestError(f"Invalid URL {url!r}: {error}") from error
    finally:
        if client is None:
            await active.aclose()
    if response.status_code >= 400:
        raise HttpRequestError(f"HTTP {response.status_code} {response.reason_phrase}: {method} {url}")
    return {"status": response.status_code, "status_text": response.reason_phrase or "",
            "headers": _joined_headers(response), "body": _text(response)}


def _joined_headers(response: "httpx.Response") -> dict[str, str]:
    """Lower-case names; a repeated header (two ``Set-Cookie``) keeps every value, one per line."""
    joined: dict[str, str] = {}
    for key, value in response.headers.multi_items():
        name = key.lower()
        joined[name] = value if name not in joined else f"{joined[name]}\n{value}"
    return joined


def _text(response: "httpx.Response") -> str:
    try:
        return response.content.decode(response.encoding or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return response.content.decode("utf-8", errors="replace")


http_request = make_http_request()
"""The default HTTP request tool (a default client per request)."""
