r"""Checks that keep caller-supplied names out of shell syntax.

Patterns are applied with ``fullmatch``: ``re.match(r"^[a-z]+$", "python3\n")``
succeeds because ``$`` also matches before a trailing newline, which would let
a second command ride along after the interpreter name.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping

__all__ = (
    "ENV_KEY_PATTERN", "LANGUAGE_PATTERN", "check_code", "check_command", "check_cwd", "check_env", "check_language",
    "export_lines", "safe_path",
)

LANGUAGE_PATTERN = re.compile(r"[a-zA-Z0-9._-]+")
ENV_KEY_PATTERN = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def check_language(language: str) -> str:
    """Return ``language`` if it is a bare interpreter name, else raise ``ValueError``."""
    if not isinstance(language, str) or not LANGUAGE_PATTERN.fullmatch(language):
        raise ValueError(f"language {language!r} must be an interpreter name matching {LANGUAGE_PATTERN.pattern}")
    if language.startswith("-"):
        raise ValueError(f"language {language!r} must not start with '-'")
    return language


def check_command(command: str) -> str:
    """Return ``command`` if a shell can be given it: a string without NUL bytes.

    No argv entry or SSH exec request can carry a NUL; refusing it here gives every backend the same error.
    """
    if not isinstance(command, str):
        raise TypeError(f"command must be a string, got {type(command).__name__}")
    if "\0" in command:
        raise ValueError("command must not contain NUL bytes")
    return command


def check_code(code: str) -> str:
    """Return ``code`` if it is a string (it is sent as text, encoded as UTF-8)."""
    if not isinstance(code, str):
        raise TypeError(f"code must be a string, got {type(code).__name__}")
    return code


def check_cwd(cwd: str | os.PathLike[str] | None) -> str | None:
    """Return ``cwd`` as a string (``None``: where the sandbox's commands start), else raise naming ``cwd``."""
    if cwd is None:
        return None
    resolved = os.fspath(cwd) if isinstance(cwd, os.PathLike) else cwd
    if not isinstance(resolved, str):
        raise TypeError(f"cwd must be a path string or None, got {type(resolved).__name__}")
    if not resolved or "\0" in resolved:
        raise ValueError(f"cwd must be a non-empty path without NUL bytes, got {resolved!r}")
    return resolved


def check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """Validate environment variables: POSIX names, string values without NUL bytes."""
    checked: dict[str, str] = {}
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not ENV_KEY_PATTERN.fullmatch(key):
            raise ValueError(f"env key {key!r} must match {ENV_KEY_PATTERN.pattern}")
        if not isinstance(value, str):
            raise ValueError(f"env[{key!r}] must be a string, got {type(value).__name__}")
        if "\0" in value:
            raise ValueError(f"env[{key!r}] must not contain NUL bytes")
        checked[key] = value
    return checked


def export_lines(env: Mapping[str, str]) -> str:
    """Shell lines setting ``env`` in the shell itself.

    ``export`` (not ``env K=V cmd``) so that every command of a pipeline such
    as ``base64 -d | python3`` sees the variables, not just the first one.
    """
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in check_env(env).items())


def safe_path(path: str) -> str:
    """Quote ``path`` for the shell; a leading ``-`` gets ``./`` so no command reads it as an option."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"path must be a non-empty string, got {path!r}")
    if "\0" in path:
        raise ValueError("path must not contain NUL bytes")
    if path.startswith("-"):
        path = "./" + path
    return shlex.quote(path)
