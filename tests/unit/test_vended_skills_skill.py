"""``ray_harness.vended_plugins.skills.Skill``: parsing ``SKILL.md``, the loaders and the name rules."""

from __future__ import annotations

import http.server
import logging
import re
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ray_harness.vended_plugins.skills import AgentSkills, Skill

FULL = """---
name: pdf-processing
description: Use this skill when: the user asks about PDFs
allowed-tools: [Read, Bash]
license: Apache-2.0
compatibility: python>=3.11
metadata:
  author: me
  version: 2
---

# Steps
1. Read.
"""


def _write_skill(directory: Path, content: str, file_name: str = "SKILL.md") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / file_name).write_text(content)
    return directory


def test_from_content_reads_every_field_and_quotes_colon_values(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        skill = Skill.from_content(FULL)
    assert skill == Skill(name="pdf-processing", description="Use this skill when: the user asks about PDFs",
                          instructions="# Steps\n1. Read.", allowed_tools=["Read", "Bash"],
                          metadata={"author": "me", "version": 2}, license="Apache-2.0",
                          compatibility="python>=3.11")
    assert "retrying with colon-quoting fallback" in caplog.text


@pytest.mark.parametrize(("content", "message"), [
    ("name: a\n", "must start with --- frontmatter delimiter"),
    ("---\nname: a\n", "missing closing --- delimiter"),
    ("---\ndescription: d\n---\n", "must have a 'name' field"),
    ("---\nname: a\n---\n", "must have a 'description' field"),
    ("---\nname: [a\n---\n", "malformed YAML frontmatter"),
])
def test_from_content_errors_name_the_problem(content: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Skill.from_content(content)


@pytest.mark.parametrize(("name", "message"), [
    ("Bad_Name", "should be 1-64 lowercase alphanumeric"),
    ("-lead", "should not start/end with hyphen"),
    ("a--b", "consecutive hyphens"),
    ("a" * 65, "exceeds 64 character limit"),
])
def test_name_rules_warn_when_lenient_and_raise_when_strict(
        name: str, message: str, caplog: pytest.LogCaptureFixture) -> None:
    content = f"---\nname: {name}\ndescription: d\n---\n"
    with caplog.at_level(logging.WARNING):
        assert Skill.from_content(content).name == name
    assert message in caplog.text
    with pytest.raises(ValueError, match=f"name=<{name}> .*{message}"):
        Skill.from_content(content, strict=True)


def test_from_file_takes_a_directory_or_its_skill_md_and_sets_the_path(tmp_path: Path) -> None:
    directory = _write_skill(tmp_path / "pdf-processing", FULL)
    assert Skill.from_file(directory).path == directory.resolve()
    assert Skill.from_file(directory / "SKILL.md").path == directory.resolve()
    lower = _write_skill(tmp_path / "low", "---\nname: low\ndescription: d\n---\nbody", "skill.md")
    assert Skill.from_file(lower).instructions == "body"


def test_from_file_strict_errors_name_the_file_and_the_field(tmp_path: Path) -> None:
    mismatched = _write_skill(tmp_path / "dir", "---\nname: other\ndescription: d\n---\n")
    with pytest.raises(ValueError, match=re.escape(f"path=<{mismatched / 'SKILL.md'}> | name=<other>, directory=<dir>")):
        Skill.from_file(mismatched, strict=True)
    assert Skill.from_file(mismatched).name == "other"  # lenient: loaded, a warning logged
    missing_field = _write_skill(tmp_path / "nodesc", "---\nname: nodesc\n---\n")
    with pytest.raises(ValueError, match=re.escape(f"path=<{missing_field / 'SKILL.md'}> | ") + ".*'description' field"):
        Skill.from_file(missing_field)
    with pytest.raises(FileNotFoundError, match=r"no SKILL\.md found"):
        Skill.from_file(_write_skill(tmp_path / "other", "x", "README.md"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Skill.from_file(tmp_path / "absent")


def test_from_directory_loads_skills_in_name_order_and_skips_the_rest(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write_skill(tmp_path / "zeta", "---\nname: zeta\ndescription: z\n---\n")
    _write_skill(tmp_path / "alpha", "---\nname: alpha\ndescription: a\n---\n")
    _write_skill(tmp_path / "broken", "---\nname: broken\n---\n")
    (tmp_path / "plain").mkdir()
    (tmp_path / "file.txt").write_text("")
    with caplog.at_level(logging.WARNING):
        skills = Skill.from_directory(tmp_path, strict=True)
    assert [skill.name for skill in skills] == ["alpha", "zeta"]
    assert "broken" in caplog.text and "skipping skill due to error" in caplog.text
    with pytest.raises(FileNotFoundError, match="skills directory does not exist"):
        Skill.from_directory(tmp_path / "absent")


def test_from_url_requires_https() -> None:
    with pytest.raises(ValueError, match=r"url=<http://example.com/SKILL.md> \| not a valid HTTPS URL"):
        Skill.from_url("http://example.com/SKILL.md")


@pytest.fixture
def https_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An HTTPS server on 127.0.0.1 serving ``tmp_path/site``, with a self-signed certificate the test trusts."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    site = tmp_path / "site"
    site.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(site), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    monkeypatch.setattr(ssl, "_create_default_https_context", lambda: ssl.create_default_context(cafile=str(cert)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_from_url_and_url_sources_load_at_construction(https_server: str, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "site" / "SKILL.md").write_text(FULL)
    skill = Skill.from_url(f"{https_server}/SKILL.md")
    assert skill.name == "pdf-processing" and skill.path is None and skill.instructions == "# Steps\n1. Read."
    with pytest.raises(RuntimeError, match=r"url=<.*/absent.md> \| HTTP 404"):
        Skill.from_url(f"{https_server}/absent.md")
    with caplog.at_level(logging.WARNING):
        plugin = AgentSkills(skills=[f"{https_server}/SKILL.md", f"{https_server}/absent.md"])
    assert [each.name for each in plugin.get_available_skills()] == ["pdf-processing"]  # no agent needed
    assert "failed to load skill from URL" in caplog.text
