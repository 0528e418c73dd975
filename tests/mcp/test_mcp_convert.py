"""MCP results and tool listings → Converse tool specs and results (no server needed)."""

from __future__ import annotations

import base64
import re

import mcp_types

from ray_harness.tools._mcp_convert import published_names, to_tool_result, to_tool_spec

PNG_BYTES = b"\x89PNG\r\n\x1a\nfake"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_published_names_keep_valid_names_and_make_others_acceptable_to_providers() -> None:
    long_a, long_b = "a" * 80, "a" * 79 + "b"
    names = published_names(["get.time", "get_time", "my tool", "ok-name", long_a, long_b], "srv")
    assert names[2:4] == ["srv_my_tool", "srv_ok-name"]
    assert names[1] == "srv_get_time"  # a valid name keeps its name; the dotted one that collides gets a digest
    assert names[0].startswith("srv_get_time_") and names[0] != names[1]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) for name in names)
    assert published_names([long_a], None) == published_names([long_a], None)  # stable across connections
    assert published_names(["echo"], None) == ["echo"]


def test_tool_spec_uses_the_published_name_description_and_input_schema() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = mcp_types.Tool(name="search", description="Search things.", input_schema=schema)
    assert to_tool_spec(tool, "web_search") == {
        "name": "web_search", "description": "Search things.", "inputSchema": {"json": schema},
    }


def test_tool_spec_falls_back_to_title_then_name_for_the_description() -> None:
    schema = {"type": "object"}
    assert to_tool_spec(mcp_types.Tool(name="t", title="Title", input_schema=schema), "t")["description"] == "Title"
    assert to_tool_spec(mcp_types.Tool(name="t", input_schema=schema), "t")["description"] == "t"


def test_text_and_image_content_and_structured_content() -> None:
    result = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="hi"),
                 mcp_types.ImageContent(type="image", data=_b64(PNG_BYTES), mime_type="image/png"),
                 mcp_types.ImageContent(type="image", data=_b64(b"jpg"), mime_type="image/jpg")],
        structured_content={"n": 1},
    )
    assert to_tool_result("id-1", result) == {
        "toolUseId": "id-1",
        "status": "success",
        "content": [
            {"text": "hi"},
            {"image": {"format": "png", "source": {"bytes": PNG_BYTES}}},
            {"image": {"format": "jpeg", "source": {"bytes": b"jpg"}}},
            {"json": {"n": 1}},
        ],
    }


def test_is_error_gives_status_error() -> None:
    result = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="bad")], is_error=True)
    assert to_tool_result("x", result) == {"toolUseId": "x", "status": "error", "content": [{"text": "bad"}]}


def test_embedded_resources_become_text_image_or_document_blocks() -> None:
    def embedded(contents: mcp_types.TextResourceContents | mcp_types.BlobResourceContents) -> mcp_types.EmbeddedResource:
        return mcp_types.EmbeddedResource(type="resource", resource=contents)

    result = mcp_types.CallToolResult(content=[
        embedded(mcp_types.TextResourceContents(uri="file:///a.txt", text="file text")),
        embedded(mcp_types.BlobResourceContents(uri="file:///p.png", blob=_b64(PNG_BYTES), mime_type="image/png")),
        embedded(mcp_types.BlobResourceContents(uri="file:///docs/report.pdf", blob=_b64(b"%PDF"),
                                                mime_type="application/pdf")),
        embedded(mcp_types.BlobResourceContents(uri="file:///x.bin", blob=_b64(b"\x00\x01"),
                                                mime_type="application/octet-stream")),
    ])
    content = to_tool_result("r", result)["content"]
    assert content[0] == {"text": "file text"}
    assert content[1] == {"image": {"format": "png", "source": {"bytes": PNG_BYTES}}}
    assert content[2] == {"document": {"format": "pdf", "name": "report-pdf", "source": {"bytes": b"%PDF"}}}
    assert content[3] == {"text": "[application/octet-stream content (2 bytes) not shown: unsupported type]"}


def test_content_converse_cannot_carry_becomes_a_text_note() -> None:
    result = mcp_types.CallToolResult(content=[
        mcp_types.AudioContent(type="audio", data=_b64(b"RIFF"), mime_type="audio/wav"),
        mcp_types.ResourceLink(type="resource_link", name="readme", uri="file:///README.md"),
        mcp_types.ImageContent(type="image", data="!!not base64!!", mime_type="image/png"),
    ])
    content = to_tool_result("n", result)["content"]
    assert content == [
        {"text": "[audio content (audio/wav) not shown: tool results cannot carry audio]"},
        {"text": "[resource link: readme <file:///README.md>]"},
        {"text": "[image/png content not shown: its base64 data is invalid]"},
    ]
