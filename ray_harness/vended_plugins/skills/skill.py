"""``Skill``: one Agent Skill (a ``SKILL.md``: YAML frontmatter, then Markdown instructions) and its loaders.

Strands' ``strands.vended_plugins.skills.skill``: the same fields, the same ``from_file`` / ``from_content`` /
``from_url`` / ``from_directory`` class methods and the same AgentSkills.io name rules. Lenient (the default)
logs a warning for a cosmetic problem (name format, a name unlike its directory) and loads anyway; ``strict=True``
raises ``ValueError`` for it. A missing ``name`` or ``description`` is an error either way. Errors of a file name
that file.
"""

from __future__ import annotations

import logging
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ("Skill", "check_directory_name", "find_skill_md_name")

logger = logging.getLogger(__name__)

_NAME_PATTERN = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_MAX_NAME_LENGTH = 64
_SKILL_MD_NAMES = ("SKILL.md", "skill.md")  # the upper-case name wins when a directory has both
_CLOSING_DELIMITER = re.compile(r"\n^---\s*$", re.MULTILINE)
_KEY_VALUE_LINE = re.compile(r"^(\s*\w[\w-]*):\s+(.+)$")
_URL_TIMEOUT_SECONDS = 30


def find_skill_md_name(names: list[str]) -> str | None:
    """The ``SKILL.md`` file name among a directory's file names (``SKILL.md`` before ``skill.md``), or None."""
    return next((name for name in _SKILL_MD_NAMES if name in names), None)


def _problem(strict: bool, message: str) -> None:
    """A cosmetic problem: raised when strict, logged when lenient."""
    if strict:
        raise ValueError(message)
    logger.warning(message)


def _check_name(name: str, *, strict: bool) -> None:
    """The AgentSkills.io rules: 1-64 characters, lowercase letters, digits and single hyphens inside."""
    if len(name) > _MAX_NAME_LENGTH:
        _problem(strict, f"name=<{name}> | skill name exceeds {_MAX_NAME_LENGTH} character limit")
    if not _NAME_PATTERN.match(name):
        _problem(strict, f"name=<{name}> | skill name should be 1-64 lowercase alphanumeric characters or "
                         "hyphens, should not start/end with hyphen")
    if "--" in name:
        _problem(strict, f"name=<{name}> | skill name contains consecutive hyphens")


def check_directory_name(skill: Skill, directory_name: str, *, strict: bool) -> None:
    """A skill loaded from a directory should be named as that directory."""
    if directory_name != skill.name:
        _problem(strict, f"name=<{skill.name}>, directory=<{directory_name}> | skill name does not match "
                         "parent directory name")


def _quote_colon_values(frontmatter: str) -> str:
    # Agents write `description: Use when: ...`; YAML rejects the second colon. The AgentSkills.io client guide
    # (and Strands) retry with such values quoted.
    fixed = []
    for line in frontmatter.splitlines():
        match = _KEY_VALUE_LINE.match(line)
        if match and ":" in match.group(2) and not match.group(2).startswith(("'", '"')):
            line = f'{match.group(1)}: "{match.group(2)}"'
        fixed.append(line)
    return "\n".join(fixed)


def _split_frontmatter(content: str) -> tuple[dict[str, Any], str]:
    """The frontmatter mapping (empty unless a mapping) and the Markdown body of a ``SKILL.md``."""
    text = content.strip()
    if not text.startswith("---"):
        raise ValueError("SKILL.md must start with --- frontmatter delimiter")
    closing = _CLOSING_DELIMITER.search(text)
    if closing is None:
        raise ValueError("SKILL.md frontmatter missing closing --- delimiter")
    raw, body = text[3:closing.start()].strip(), text[closing.end():].strip()
    try:
        parsed = yaml.safe_load(raw)
    except yaml.YAMLError:
        logger.warning("YAML parse failed, retrying with colon-quoting fallback")
        try:
            parsed = yaml.safe_load(_quote_colon_values(raw))
        except yaml.YAMLError as error:
            raise ValueError(f"malformed YAML frontmatter: {error}") from error
    return (parsed if isinstance(parsed, dict) else {}), body


def _allowed_tools(raw: Any) -> list[str] | None:
    """``allowed-tools``: a space-separated string or a YAML list."""
    if isinstance(raw, str) and raw.strip():
        return raw.split()
    if isinstance(raw, list):
        return [str(item) for item in raw if item]
    return None


@dataclass
class Skill:
    r"""An agent skill: a name and description shown up front, instructions loaded when the agent asks.

    Build one directly or from a ``SKILL.md``::

        skill = Skill(name="my-skill", description="Does the thing", instructions="Step 1 ...")
        skill = Skill.from_file("./skills/my-skill")           # the directory or its SKILL.md
        skill = Skill.from_content("---\nname: my-skill\n...")
        skills = Skill.from_directory("./skills/")              # every sub-directory with a SKILL.md
        skill = Skill.from_url("https://example.com/SKILL.md")  # raw content over HTTPS

    Attributes:
        name: The skill's id (1-64 lowercase letters, digits, hyphens).
        description: What the skill does and when to use it; the agent chooses skills by it.
        instructions: The ``SKILL.md`` body.
        path: The skill's directory when it was loaded from one (its resources are listed from there).
        allowed_tools: Tools the skill means to use (informational, not enforced — as in Strands).
        metadata: The frontmatter's ``metadata`` mapping.
        license: The frontmatter's ``license``.
        compatibility: The frontmatter's ``compatibility``.
    """

    name: str
    description: str
    instructions: str = ""
    path: Path | None = None
    allowed_tools: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    license: str | None = None
    compatibility: str | None = None

    @classmethod
    def from_content(cls, content: str, *, strict: bool = False) -> Skill:
        """Parse ``SKILL.md`` text (frontmatter with ``name`` and ``description``, then the instructions).

        Raises:
            ValueError: The frontmatter is missing, malformed, or lacks ``name`` / ``description``; with
                ``strict``, also a name that breaks the naming rules.
        """
        frontmatter, body = _split_frontmatter(content)
        name, description = frontmatter.get("name"), frontmatter.get("description")
        if not isinstance(name, str) or not name:
            raise ValueError("SKILL.md content must have a 'name' field in frontmatter")
        if not isinstance(description, str) or not description:
            raise ValueError("SKILL.md content must have a 'description' field in frontmatter")
        _check_name(name, strict=strict)
        metadata = frontmatter.get("metadata")
        license_, compatibility = frontmatter.get("license"), frontmatter.get("compatibility")
        return cls(
            name=name,
            description=description,
            instructions=body,
            allowed_tools=_allowed_tools(frontmatter.get("allowed-tools") or frontmatter.get("allowed_tools")),
            metadata={str(key): value for key, value in metadata.items()} if isinstance(metadata, dict) else {},
            license=str(license_) if license_ else None,
            compatibility=str(compatibility) if compatibility else None,
        )

    @classmethod
    def from_file(cls, skill_path: str | Path, *, strict: bool = False) -> Skill:
        """Load the skill of a directory holding a ``SKILL.md`` (or of that file itself); ``path`` is the directory.

        Raises:
            FileNotFoundError: The path is neither such a directory nor a ``SKILL.md`` file.
            ValueError: The content is invalid (the message starts with the file's path).
        """
        resolved = Path(skill_path).resolve()
        if resolved.is_file() and resolved.name.lower() == "skill.md":
            directory, skill_md = resolved.parent, resolved
        elif resolved.is_dir():
            md_name = find_skill_md_name([name for name in _SKILL_MD_NAMES if (resolved / name).is_file()])
            if md_name is None:
                raise FileNotFoundError(f"path=<{resolved}> | no SKILL.md found in skill directory")
            directory, skill_md = resolved, resolved / md_name
        else:
            raise FileNotFoundError(f"path=<{resolved}> | skill path does not exist or is not a valid skill directory")
        try:
            skill = cls.from_content(skill_md.read_text(encoding="utf-8"), strict=strict)
            skill.path = directory
            check_directory_name(skill, directory.name, strict=strict)
        except ValueError as error:
            raise ValueError(f"path=<{skill_md}> | {error}") from error
        return skill

    @classmethod
    def from_url(cls, url: str, *, strict: bool = False) -> Skill:
        """Fetch raw ``SKILL.md`` content from an ``https://`` URL and parse it (``path`` stays None).

        Raises:
            ValueError: ``url`` is not ``https://``, or the content is invalid.
            RuntimeError: The content could not be fetched.
        """
        if not url.startswith("https://"):
            raise ValueError(f"url=<{url}> | not a valid HTTPS URL")
        return cls.from_content(_fetch(url), strict=strict)

    @classmethod
    def from_directory(cls, skills_dir: str | Path, *, strict: bool = False) -> list[Skill]:
        """Load every sub-directory of ``skills_dir`` that holds a ``SKILL.md``, in name order.

        Sub-directories without one are skipped; an invalid skill is skipped with a warning (even when strict:
        one bad skill does not hide its siblings, as in Strands).

        Raises:
            FileNotFoundError: ``skills_dir`` is not a directory.
        """
        parent = Path(skills_dir).resolve()
        if not parent.is_dir():
            raise FileNotFoundError(f"path=<{parent}> | skills directory does not exist")
        skills = []
        for child in sorted(parent.iterdir()):
            if not child.is_dir() or not any((child / name).is_file() for name in _SKILL_MD_NAMES):
                continue
            try:
                skills.append(cls.from_file(child, strict=strict))
            except (ValueError, FileNotFoundError) as error:
                logger.warning("path=<%s> | skipping skill due to error: %s", child, error)
        return skills


def _fetch(url: str) -> str:
    """GET ``url`` as UTF-8 text; any failure is a ``RuntimeError`` naming the URL."""
    request = urllib.request.Request(url, headers={"User-Agent": "ray-harness"})
    try:
        with urllib.request.urlopen(request, timeout=_URL_TIMEOUT_SECONDS) as response:
            return bytes(response.read()).decode("utf-8")
    except urllib.error.HTTPError as error:
        raise RuntimeError(f"url=<{url}> | HTTP {error.code}: {error.reason}") from error
    except urllib.error.URLError as error:
        raise RuntimeError(f"url=<{url}> | failed to fetch skill: {error.reason}") from error
