"""A minimal pre-2026 MCP server over stdio, as servers built on mcp 1.x behave.

It knows ``initialize``, ``tools/list`` and ``tools/call`` and answers every other request (``server/discover``
included) with "Method not found", so a client has to fall back to the ``initialize`` handshake.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    method = request["method"]
    if method == "initialize":
        return {"result": {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                           "serverInfo": {"name": "legacy", "version": "1"}}}
    if method == "tools/list":
        schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        return {"result": {"tools": [{"name": "echo", "description": "Echo.", "inputSchema": schema}]}}
    if method == "tools/call":
        text = request["params"]["arguments"]["text"]
        return {"result": {"content": [{"type": "text", "text": f"legacy: {text}"}], "isError": False}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue  # a notification
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **_answer(request)}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
