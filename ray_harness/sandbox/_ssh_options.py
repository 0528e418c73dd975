r"""OpenSSH-style ``ssh_options`` for ``SshSandbox``, checked before paramiko ever parses them.

Options that make the *local* machine run a command (``ProxyCommand``,
``LocalCommand``, ``PermitLocalCommand``, ``KnownHostsCommand``,
``Match exec``) are refused unless ``allow_unsafe_ssh_options=True``: an
options dict is often assembled from configuration a model or a tenant can
influence. Each key is one option name and each value one line, so a value
cannot smuggle in a second option (``"22\nProxyCommand evil"``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

__all__ = ("SUPPORTED_OPTIONS", "UNSAFE_OPTIONS", "check_ssh_options", "config_text")

UNSAFE_OPTIONS: Final = frozenset({"proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand"})
SUPPORTED_OPTIONS: Final = frozenset({
    "hostname", "port", "user", "identityfile", "userknownhostsfile", "connecttimeout",
    "serveraliveinterval", "compression",
})
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def check_ssh_options(options: Mapping[str, str] | None, *, allow_unsafe: bool) -> dict[str, str]:
    """Validate ``options``; raise ``ValueError`` naming the first bad one."""
    checked: dict[str, str] = {}
    for key, value in (options or {}).items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(f"ssh_options key {key!r} is not an OpenSSH option name")
        if not isinstance(value, str):
            raise ValueError(f"ssh_options[{key!r}] must be a string, got {type(value).__name__}")
        if any(char in value for char in "\r\n\0"):
            raise ValueError(f"ssh_options[{key!r}] must be a single line")
        lowered = key.lower()
        runs_local_command = lowered in UNSAFE_OPTIONS or (
            lowered == "match" and "exec" in value.lower().replace('"', " ").split()
        )
        if runs_local_command and not allow_unsafe:
            raise ValueError(
                f"ssh_options[{key!r}] runs a command on the local machine; "
                "pass allow_unsafe_ssh_options=True if that is intended"
            )
        if not runs_local_command and lowered not in SUPPORTED_OPTIONS:
            raise ValueError(
                f"ssh_options[{key!r}] is not supported by SshSandbox (supported: {', '.join(sorted(SUPPORTED_OPTIONS))})"
            )
        checked[key] = value
    return checked


def config_text(options: Mapping[str, str]) -> str:
    """An ssh_config document applying ``options`` to every host (``Match`` goes last: it opens a block)."""
    lines = ["Host *"]
    lines += [f"    {key} {value}" for key, value in options.items() if key.lower() != "match"]
    lines += [f"Match {value}" for key, value in options.items() if key.lower() == "match"]
    return "\n".join(lines) + "\n"
