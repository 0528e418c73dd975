"""``make_a2a_client``: a tool with which the model reads the card of, and sends messages to, remote A2A agents.

Strands' ``strands.vended_tools.a2a_client``: a stateless shim over :class:`~ray_harness.serve.A2AAgent`, which
speaks A2A 1.0 through the official a2a-sdk client. Each call makes a fresh ``A2AAgent``, so no task or context
is shared between calls. Only the ``allowed_endpoints`` the developer listed are reachable (exact match); an
entry is a URL, or ``(url, ClientConfig)`` to give that endpoint its own a2a-sdk ``ClientConfig`` (an
``httpx_client`` with its auth, its transports).

- ``operation="discover"`` answers with the agent card as JSON (the camelCase form servers publish).
- ``operation="send_message"`` answers ``{"message": <the remote's reply as an assistant message>}``; a remote
  task that does not complete (it failed, was cancelled, or asks for input) is an :class:`A2AClientError`.
- ``agent.cancel()`` cancels the remote task (``CancelTask``) and ends the call.
- The tool pickles (an agent holding it ships to a Ray host), unless an endpoint's ``ClientConfig`` holds an
  ``httpx_client``: a live client holds sockets.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

import asyncio
import threading
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ray_harness.tools.base import ToolContext, until_set
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.types.exceptions import RayHarnessError

if TYPE_CHECKING:
    from a2a.client import ClientConfig

    from ray_harness.serve.client import A2AAgent

__all__ = ("DEFAULT_A2A_CLIENT_DESCRIPTION", "A2AClientError", "AllowedEndpoint", "make_a2a_client")

AllowedEndpoint: TypeAlias = "str | tuple[str, ClientConfig]"
"""A permitted endpoint: a URL, or ``(url, ClientConfig)``."""
# The model reads Strands' description (and the permitted endpoints).
DEFAULT_A2A_CLIENT_DESCRIPTION = (
    "Interacts with remote A2A (Agent-to-Agent) protocol agents. "
    "Use operation='discover' to fetch an agent card from an endpoint. "
    "Use operation='send_message' to send a message and receive a response. "
    "Only the listed endpoints are permitted."
)
_CANCEL_GRACE_SECONDS = 10.0  # after agent.cancel(): how long the remote may take to confirm CancelTask


class A2AClientError(RayHarnessError, RuntimeError):
    """An endpoint not allowed, a missing ``message``, or a failed A2A operation (the model reads the message)."""


class _Endpoints:
    """The permitted endpoints and their ``ClientConfig``s; refuses to pickle a live ``httpx_client``."""

    def __init__(self, configs: dict[str, "ClientConfig | None"]) -> None:
        self.configs = configs

    def __getstate__(self) -> dict[str, Any]:
        for url, config in self.configs.items():
            if config is not None and config.httpx_client is not None:
                raise TypeError(f"the a2a_client tool does not pickle: the ClientConfig of endpoint {url!r} holds a "
                                "live httpx_client")
        return self.__dict__


def make_a2a_client(*, name: str = "a2a_client", description: str | None = None,
                    allowed_endpoints: list[AllowedEndpoint]) -> DecoratedFunctionTool:
    """An A2A client tool for the ``allowed_endpoints`` only.

    Args:
        name: The tool's name.
        description: What the model reads (default: Strands' description and the permitted endpoints).
        allowed_endpoints: The base URLs the model may reach: each an ``http(s)`` URL, or ``(url, ClientConfig)``
            with an a2a-sdk ``ClientConfig`` for that endpoint. Any other endpoint is refused before a connection.

    Raises:
        ValueError: ``allowed_endpoints`` is empty or holds a URL that is not ``http(s)``, or ``description`` is
            not a string.
        TypeError: An entry of ``allowed_endpoints`` is neither a URL nor a ``(url, ClientConfig)`` pair.
    """
    endpoints = _Endpoints(_checked_endpoints(allowed_endpoints))
    if description is None:
        description = f"{DEFAULT_A2A_CLIENT_DESCRIPTION} Permitted endpoints: {', '.join(sorted(endpoints.configs))}."
    elif not isinstance(description, str) or not description:
        raise ValueError(f"description must be a non-empty string or None, got {description!r}")

    @tool(name=name, description=description, context=True)
    async def a2a_client_tool(operation: Literal["discover", "send_message"], endpoint: str,
                              tool_context: ToolContext, message: str | None = None) -> dict[str, Any]:
        """Talk to a remote A2A agent.

        Args:
            operation: ``discover`` fetches the agent card; ``send_message`` sends ``message`` and returns the
                reply.
            endpoint: The remote agent's base URL (one of the permitted endpoints).
            message: The text to send; required for ``send_message``, ignored otherwise.
            tool_context: Injected by the agent (not an input).
        """
        if endpoint not in endpoints.configs:
            raise A2AClientError(f"Endpoint {endpoint!r} is not in the allowed endpoints list. Permitted endpoints: "
                                 f"{sorted(endpoints.configs)}")
        remote = _remote(endpoint, endpoints.configs[endpoint])
        if operation == "discover":
            return await _discover(remote)
        if not message:
            raise A2AClientError("'message' is required for operation 'send_message'")
        return await _send(remote, message, tool_context.cancel_signal)

    return a2a_client_tool


def _checked_endpoints(entries: Any) -> dict[str, "ClientConfig | None"]:
    if not isinstance(entries, list | tuple) or not entries:
        raise ValueError(f"allowed_endpoints must be a non-empty list of endpoints, got {entries!r}")
    configs: dict[str, ClientConfig | None] = {}
    for index, entry in enumerate(entries):
        url, config = (entry, None) if isinstance(entry, str) else _pair(entry, index)
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"allowed_endpoints[{index}] must be an http(s) URL, got {url!r}")
        configs[url] = config
    return configs


def _pair(entry: Any, index: int) -> tuple[str, "ClientConfig"]:
    from a2a.client import ClientConfig

    if (not isinstance(entry, tuple) or len(entry) != 2 or not isinstance(entry[0], str)
            or not isinstance(entry[1], ClientConfig)):
        raise TypeError(f"allowed_endpoints[{index}] must be a URL string or a (url, a2a.client.ClientConfig) "
                        f"tuple, got {type(entry).__name__}")
    return entry[0], entry[1]


def _remote(endpoint: str, config: "ClientConfig | None") -> "A2AAgent":
    from ray_harness.serve.client import A2AAgent

    return A2AAgent(endpoint, client_config=config)


async def _discover(remote: "A2AAgent") -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    try:
        card = await asyncio.to_thread(lambda: remote.card)  # a sync fetch: kept off the event loop
    except Exception as error:
        raise A2AClientError(f"Failed to discover the agent card at {remote.url!r}: {error}") from error
    found: dict[str, Any] = MessageToDict(card)
    return found


async def _send(remote: "A2AAgent", message: str, cancel_signal: threading.Event) -> dict[str, Any]:
    call = asyncio.ensure_future(remote.invoke_async(message, cancel_signal=cancel_signal))
    watch = asyncio.ensure_future(until_set(cancel_signal))
    try:
        await asyncio.wait((call, watch), return_when=asyncio.FIRST_COMPLETED)
        if not call.done():  # cancelled: the A2AAgent sends CancelTask; a remote that never confirms is let go
            await asyncio.wait((call,), timeout=_CANCEL_GRACE_SECONDS)
    finally:
        watch.cancel()
        if not call.done():
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
    if call.cancelled():
        raise A2AClientError(f"The call to {remote.url!r} was cancelled")
    try:
        result = call.result()
    except Exception as error:
        raise A2AClientError(f"Failed to send message to {remote.url!r}: {error}") from error
    if result.stop_reason != "end_turn":
        state = {"interrupt": "input required", "cancelled": "canceled"}.get(result.stop_reason, result.stop_reason)
        # What it asks for, when it asks: the tool cannot answer (each call is a new task), the model can retell.
        asked = "; ".join(f"{item.name}: {item.reason}" if item.reason else item.name
                          for item in result.interrupts or ())
        raise A2AClientError(f"Remote agent at {remote.url!r} did not complete: its task is {state}. "
                             f"{asked or result.text}".rstrip())
    return {"message": result.message}
