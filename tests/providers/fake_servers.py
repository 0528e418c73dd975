"""Local servers that speak the real provider wire protocols, for driving the official clients.

Each server answers from a script of provider-neutral replies (:class:`Answer`, :class:`Failure`) and
records every request it received (path, headers, JSON body). Anthropic: SSE with ``event:`` lines on
``POST /v1/messages``. OpenAI: ``data:`` chunks ending in ``data: [DONE]`` on ``POST /v1/chat/completions``,
with the usage chunk only when the request asked for it (one ``chat.completion`` JSON when it did not ask to stream). Bedrock: AWS binary event-stream frames (with CRCs)
on ``POST /model/{id}/converse-stream``, one JSON response on ``POST /model/{id}/converse``. Token counting
(Anthropic ``POST /v1/messages/count_tokens``, Bedrock ``POST /model/{id}/count-tokens``) answers a scripted
:class:`TokenCount`.
"""

from __future__ import annotations

import asyncio
import binascii
import json
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Answer:
    """A scripted model answer: blocks are ("text", s) | ("tool", id, name, input) | ("thinking", text, signature).

    Anthropic also takes ("web_search", id, query): a server tool call and its result, as two blocks.
    Anthropic and Bedrock take ("cited", text, cited_text, title, start, end): a text citing characters
    ``start``-``end`` of the first document.
    """

    blocks: list[tuple[Any, ...]]
    stop: str | None = None
    input_tokens: int = 11
    output_tokens: int = 7
    cache_read: int = 0
    cache_write: int = 0  # OpenAI: prompt_tokens_details.cache_write_tokens
    trace: dict[str, Any] | None = None  # Bedrock: the metadata's (or the converse response's) ``trace``

    @property
    def stop_reason(self) -> str:
        if self.stop:
            return self.stop
        return "tool_use" if any(block[0] == "tool" for block in self.blocks) else "end_turn"


@dataclass
class Failure:
    """A scripted failure: throttle | overloaded | midstream_overloaded | overflow | auth | thinking_binding (a
    replayed thinking block refused as stale) | denied (Bedrock) | tool_result_turn (Bedrock: a turn mixing tool
    results and other blocks refused)."""

    kind: str
    retry_after: float | None = None


@dataclass
class TokenCount:
    """A scripted answer to a token-counting request."""

    input_tokens: int


Reply = Answer | Failure | TokenCount

THINKING_BINDING_MESSAGE = ("messages.1.content.0: the thinking block is bound to a different conversation prefix; "
                            "set thinking.block_binding to drop stale blocks")


def text(content: str, **kwargs: Any) -> Answer:
    return Answer([("text", content)], **kwargs)


def tool_use(name: str, input: dict[str, Any], use_id: str = "call_1", *, before: str | None = None) -> Answer:
    blocks: list[tuple[Any, ...]] = [("text", before)] if before else []
    blocks.append(("tool", use_id, name, input))
    return Answer(blocks)


def halves(content: str) -> list[str]:
    middle = max(1, len(content) // 2)
    return [piece for piece in (content[:middle], content[middle:]) if piece]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeServer:
    """An aiohttp server on 127.0.0.1 (random port) in its own thread and event loop."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Received] = field(default_factory=list)
    port: int = 0

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def reset(self) -> None:
        self.replies.clear()
        self.requests.clear()

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [request.body for request in self.requests]

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def serve() -> None:
            app = web.Application()
            app.router.add_post("/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name=f"{type(self).__name__}", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake server did not start")

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw) if raw else {}
        self.requests.append(Received(request.path, {k.lower(): v for k, v in request.headers.items()}, body))
        if not self.replies:
            return web.json_response({"error": {"message": "unscripted request"}}, status=500)
        reply = self.replies.popleft()
        counting = request.path.endswith(("/count_tokens", "/count-tokens"))
        if isinstance(reply, Failure):
            return await self.fail(request, reply)
        if counting != isinstance(reply, TokenCount):
            return web.json_response({"error": {"message": f"{request.path} got the scripted {reply!r}"}}, status=500)
        if isinstance(reply, TokenCount):
            return web.json_response(self.count(reply))
        return await self.answer(request, body, reply)

    def count(self, reply: TokenCount) -> dict[str, Any]:
        raise NotImplementedError

    async def answer(self, request: web.Request, body: dict[str, Any], reply: Answer) -> web.StreamResponse:
        raise NotImplementedError

    async def fail(self, request: web.Request, failure: Failure) -> web.StreamResponse:
        raise NotImplementedError

    async def sse(self, request: web.Request, events: list[tuple[str | None, Any]]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        for name, data in events:
            payload = data if isinstance(data, str) else json.dumps(data)
            prefix = f"event: {name}\n" if name else ""
            await response.write(f"{prefix}data: {payload}\n\n".encode())
        await response.write_eof()
        return response


# -- Anthropic ----------------------------------------------------------------------------------------------

class AnthropicServer(FakeServer):
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"  # the SDK appends /v1/messages

    def count(self, reply: TokenCount) -> dict[str, Any]:
        return {"input_tokens": reply.input_tokens}

    async def answer(self, request: web.Request, body: dict[str, Any], reply: Answer) -> web.StreamResponse:
        usage = {"input_tokens": reply.input_tokens, "output_tokens": 1}
        if reply.cache_read:
            usage["cache_read_input_tokens"] = reply.cache_read
        events: list[tuple[str | None, Any]] = [
            ("message_start", {"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model"), "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": usage}}),
            ("ping", {"type": "ping"}),
        ]
        index = 0
        for block in reply.blocks:
            events.extend(self._block(index, block))
            index += 2 if block[0] == "web_search" else 1  # a server tool call and its result are two blocks
        events.append(("message_delta", {"type": "message_delta",
                                         "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                                         "usage": {"output_tokens": reply.output_tokens}}))
        events.append(("message_stop", {"type": "message_stop"}))
        return await self.sse(request, events)

    @staticmethod
    def _block(index: int, block: tuple[Any, ...]) -> list[tuple[str | None, Any]]:
        def delta(payload: dict[str, Any]) -> tuple[str, Any]:
            return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": payload})

        events: list[tuple[str | None, Any]] = []
        if block[0] in ("text", "cited"):
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
            events.extend(delta({"type": "text_delta", "text": piece}) for piece in halves(block[1]))
            if block[0] == "cited":
                _, _, cited, title, start, end = block
                events.append(delta({"type": "citations_delta", "citation": {
                    "type": "char_location", "cited_text": cited, "document_index": 0, "document_title": title,
                    "start_char_index": start, "end_char_index": end}}))
        elif block[0] == "tool":
            _, use_id, name, args = block
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": use_id, "name": name, "input": {}}}))
            events.append(delta({"type": "input_json_delta", "partial_json": ""}))
            events.extend(delta({"type": "input_json_delta", "partial_json": piece})
                          for piece in halves(json.dumps(args)))
        elif block[0] == "thinking":
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "thinking", "thinking": "",
                                                                     "signature": ""}}))
            events.extend(delta({"type": "thinking_delta", "thinking": piece}) for piece in halves(block[1]))
            events.append(delta({"type": "signature_delta", "signature": block[2]}))
        elif block[0] == "web_search":  # ("web_search", use_id, query): a server tool call, then its result block
            _, use_id, query = block
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "server_tool_use", "id": use_id, "name": "web_search", "input": {}}}))
            events.append(delta({"type": "input_json_delta", "partial_json": json.dumps({"query": query})}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "web_search_tool_result", "tool_use_id": use_id, "content": [{
                    "type": "web_search_result", "url": "https://example.com/", "title": "Example",
                    "encrypted_content": "opaque", "page_age": None}]}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        return events

    async def fail(self, request: web.Request, failure: Failure) -> web.StreamResponse:
        def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
            return web.json_response({"type": "error", "error": {"type": kind, "message": message}}, status=status,
                                     headers=headers)

        retry = {"retry-after": str(failure.retry_after)} if failure.retry_after is not None else None
        if failure.kind == "throttle":
            return error(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit", retry)
        if failure.kind == "overloaded":
            return error(529, "overloaded_error", "Overloaded", retry)
        if failure.kind == "midstream_overloaded":
            return await self.sse(request, [
                ("message_start", {"type": "message_start", "message": {
                    "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
                    "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
                ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ])
        if failure.kind == "overflow":
            return error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
        if failure.kind == "auth":
            return error(401, "authentication_error", "invalid x-api-key")
        if failure.kind == "thinking_binding":
            return error(400, "invalid_request_error", THINKING_BINDING_MESSAGE)
        raise ValueError(failure.kind)


# -- OpenAI ---------------------------------------------------------------------------------------------------

class OpenAIServer(FakeServer):
    honour_include_usage = True  # False: behave like a compatible server that never reports usage

    def reset(self) -> None:
        super().reset()
        self.honour_include_usage = True

    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"  # the SDK appends /chat/completions

    async def answer(self, request: web.Request, body: dict[str, Any], reply: Answer) -> web.StreamResponse:
        if not body.get("stream"):
            return web.json_response(self._completion(body, reply))

        def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, Any]:
            return (None, {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                           "model": body.get("model"), "choices": [{"index": 0, "delta": delta,
                                                                    "finish_reason": finish}]})

        events: list[tuple[str | None, Any]] = [chunk({"role": "assistant", "content": ""})]
        tool_index = 0
        for block in reply.blocks:
            if block[0] == "text":
                events.extend(chunk({"content": piece}) for piece in halves(block[1]))
            elif block[0] == "thinking":
                events.extend(chunk({"reasoning_content": piece}) for piece in halves(block[1]))
            elif block[0] == "tool":
                _, use_id, name, args = block
                events.append(chunk({"tool_calls": [{"index": tool_index, "id": use_id, "type": "function",
                                                     "function": {"name": name, "arguments": ""}}]}))
                events.extend(chunk({"tool_calls": [{"index": tool_index, "function": {"arguments": piece}}]})
                              for piece in halves(json.dumps(args)))
                tool_index += 1
        finish = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}[reply.stop_reason]
        events.append(chunk({}, finish))
        if self.honour_include_usage and (body.get("stream_options") or {}).get("include_usage"):
            usage: dict[str, Any] = {"prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens,
                                     "total_tokens": reply.input_tokens + reply.output_tokens}
            usage.update(_openai_prompt_details(reply))
            events.append((None, {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                                  "model": body.get("model"), "choices": [], "usage": usage}))
        events.append((None, "[DONE]"))
        return await self.sse(request, events)

    @staticmethod
    def _completion(body: dict[str, Any], reply: Answer) -> dict[str, Any]:
        """The non-streamed ``chat.completion``: the whole message, its finish reason and (always) usage."""
        texts = [block[1] for block in reply.blocks if block[0] == "text"]
        reasoning = [block[1] for block in reply.blocks if block[0] == "thinking"]
        calls = [{"id": block[1], "type": "function", "function": {"name": block[2], "arguments": json.dumps(block[3])}}
                 for block in reply.blocks if block[0] == "tool"]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
        if reasoning:
            message["reasoning_content"] = "".join(reasoning)
        if calls:
            message["tool_calls"] = calls
        usage: dict[str, Any] = {"prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens,
                                 "total_tokens": reply.input_tokens + reply.output_tokens}
        usage.update(_openai_prompt_details(reply))
        finish = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}[reply.stop_reason]
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": body.get("model"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}

    async def fail(self, request: web.Request, failure: Failure) -> web.StreamResponse:
        def error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
            return web.json_response({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                                "code": code}}, status=status, headers=headers)

        retry = {"retry-after": str(failure.retry_after)} if failure.retry_after is not None else None
        if failure.kind in ("throttle", "overloaded"):
            return error(429, "rate_limit_exceeded", "Rate limit reached for requests", retry)
        if failure.kind == "midstream_overloaded":
            return await self.sse(request, [(None, {"error": {"message": "Rate limit reached mid-stream",
                                                              "code": "rate_limit_exceeded"}})])
        if failure.kind == "overflow":
            return error(400, "context_length_exceeded", "This model's maximum context length is 128000 tokens. "
                                                         "However, your messages resulted in 130000 tokens.")
        if failure.kind == "auth":
            return error(401, "invalid_api_key", "Incorrect API key provided: sk-bad.")
        raise ValueError(failure.kind)


def _openai_prompt_details(reply: Answer) -> dict[str, Any]:
    details = {key: value for key, value in (("cached_tokens", reply.cache_read),
                                             ("cache_write_tokens", reply.cache_write)) if value}
    return {"prompt_tokens_details": details} if details else {}


# -- Bedrock -------------------------------------------------------------------------------------------------

def _bedrock_citation(block: tuple[Any, ...]) -> dict[str, Any]:
    _, _, cited, title, start, end = block
    return {"title": title, "sourceContent": [{"text": cited}],
            "location": {"documentChar": {"documentIndex": 0, "start": start, "end": end}}}


def _header(name: str, value: str) -> bytes:
    encoded_name, encoded_value = name.encode(), value.encode()
    return (struct.pack("B", len(encoded_name)) + encoded_name + b"\x07" + struct.pack(">H", len(encoded_value))
            + encoded_value)


def encode_frame(event_type: str, payload: dict[str, Any], message_type: str = "event") -> bytes:
    """One AWS event-stream message: prelude (with CRC), headers, JSON payload, message CRC."""
    kind = ":event-type" if message_type == "event" else ":exception-type"
    headers = (_header(kind, event_type) + _header(":content-type", "application/json")
               + _header(":message-type", message_type))
    body = json.dumps(payload).encode()
    prelude = struct.pack(">II", 12 + len(headers) + len(body) + 4, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)


class BedrockServer(FakeServer):
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def count(self, reply: TokenCount) -> dict[str, Any]:
        return {"inputTokens": reply.input_tokens}

    def hold_stream(self) -> tuple[threading.Event, threading.Event]:
        """Pause the next stream after its first bytes until the caller sets ``release`` (at most 30 s).

        Returns ``(holding, release)``: ``holding`` is set once the stream pauses. :attr:`released_in_time` tells
        afterwards whether ``release`` came before the 30 s were up.
        """
        self._hold = (threading.Event(), threading.Event())
        self.released_in_time: bool | None = None
        return self._hold

    async def answer(self, request: web.Request, body: dict[str, Any], reply: Answer) -> web.StreamResponse:
        if request.path.endswith("/converse"):
            return web.json_response(self._response(reply))
        frames = [encode_frame("messageStart", {"role": "assistant"})]
        for index, block in enumerate(reply.blocks):
            if block[0] in ("text", "cited"):
                frames.extend(encode_frame("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}})
                              for piece in halves(block[1]))
            if block[0] == "cited":
                frames.append(encode_frame("contentBlockDelta", {"contentBlockIndex": index,
                                                                 "delta": {"citation": _bedrock_citation(block)}}))
            elif block[0] == "thinking":
                frames.extend(encode_frame("contentBlockDelta", {
                    "contentBlockIndex": index, "delta": {"reasoningContent": {"text": piece}}})
                    for piece in halves(block[1]))
                frames.append(encode_frame("contentBlockDelta", {
                    "contentBlockIndex": index, "delta": {"reasoningContent": {"signature": block[2]}}}))
            elif block[0] == "tool":
                _, use_id, name, args = block
                frames.append(encode_frame("contentBlockStart", {
                    "contentBlockIndex": index, "start": {"toolUse": {"toolUseId": use_id, "name": name}}}))
                frames.extend(encode_frame("contentBlockDelta", {
                    "contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}})
                    for piece in halves(json.dumps(args)))
            frames.append(encode_frame("contentBlockStop", {"contentBlockIndex": index}))
        frames.append(encode_frame("messageStop", {"stopReason": reply.stop_reason}))
        usage: dict[str, Any] = {"inputTokens": reply.input_tokens, "outputTokens": reply.output_tokens,
                                 "totalTokens": reply.input_tokens + reply.output_tokens + reply.cache_read}
        if reply.cache_read:
            usage["cacheReadInputTokens"] = reply.cache_read
        metadata: dict[str, Any] = {"usage": usage, "metrics": {"latencyMs": 12}}
        if reply.trace is not None:
            metadata["trace"] = reply.trace
        frames.append(encode_frame("metadata", metadata))
        return await self._frames(request, frames)

    @staticmethod
    def _response(reply: Answer) -> dict[str, Any]:
        """The ``converse`` (non-streaming) response: the whole message, stop reason, usage and metrics."""
        content: list[dict[str, Any]] = []
        for block in reply.blocks:
            if block[0] == "text":
                content.append({"text": block[1]})
            elif block[0] == "cited":
                content.append({"citationsContent": {"content": [{"text": block[1]}],
                                                     "citations": [_bedrock_citation(block)]}})
            elif block[0] == "thinking":
                content.append({"reasoningContent": {"reasoningText": {"text": block[1], "signature": block[2]}}})
            elif block[0] == "tool":
                content.append({"toolUse": {"toolUseId": block[1], "name": block[2], "input": block[3]}})
        usage = {"inputTokens": reply.input_tokens, "outputTokens": reply.output_tokens,
                 "totalTokens": reply.input_tokens + reply.output_tokens}
        response = {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": reply.stop_reason,
                    "usage": usage, "metrics": {"latencyMs": 12}}
        if reply.trace is not None:
            response["trace"] = reply.trace
        return response

    async def _frames(self, request: web.Request, frames: list[bytes]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/vnd.amazon.eventstream"})
        await response.prepare(request)
        data = b"".join(frames)
        hold, self._hold = getattr(self, "_hold", None), None
        for start in range(0, len(data), 37):  # frames split at arbitrary places, as on a real network
            await response.write(data[start:start + 37])
            if hold is not None:
                holding, release = hold
                hold = None
                holding.set()
                self.released_in_time = await asyncio.to_thread(release.wait, 30)
        await response.write_eof()
        return response

    async def fail(self, request: web.Request, failure: Failure) -> web.StreamResponse:
        def error(status: int, code: str, message: str) -> web.Response:
            return web.json_response({"message": message}, status=status, headers={"x-amzn-ErrorType": code})

        if failure.kind in ("throttle", "overloaded"):
            return error(429, "ThrottlingException", "Too many requests, please wait before trying again.")
        if failure.kind == "midstream_overloaded":
            return await self._frames(request, [
                encode_frame("messageStart", {"role": "assistant"}),
                encode_frame("throttlingException", {"message": "Too many tokens, please wait."}, "exception"),
            ])
        if failure.kind == "overflow":
            return error(400, "ValidationException", "Input is too long for requested model.")
        if failure.kind == "auth":
            return error(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
        if failure.kind == "thinking_binding":
            return error(400, "ValidationException", THINKING_BINDING_MESSAGE)
        if failure.kind == "tool_result_turn":
            return error(400, "ValidationException",
                         "Conversation blocks and tool result blocks cannot be provided in the same turn.")
        if failure.kind == "denied":
            return error(403, "AccessDeniedException", "User is not authorized to perform: bedrock:CountTokens")
        raise ValueError(failure.kind)
