"""What several commands share: the subcommand registry's type, argparse value types, joining Ray."""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import Any, TypeAlias

__all__ = ("CLUSTER_ADDRESS_HELP", "Commands", "Parser", "init_ray", "positive_int")

CLUSTER_ADDRESS_HELP = ("the cluster's GCS address host:port, as `ray start --head` prints it, or its Ray Client "
                        "address ray://host:10001 (default RAY_ADDRESS, else auto: the cluster on this machine)")

_SPACES = re.compile(r"\s+")


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's, but lines never break inside a word with a hyphen (``--task-store``, ``/.well-known/``)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(_SPACES.sub(" ", text).strip(), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(_SPACES.sub(" ", text).strip(), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)


class Parser(argparse.ArgumentParser):
    """The parser of ``ray-harness`` and of each of its commands (``add_subparsers`` makes them of this class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


Commands: TypeAlias = "argparse._SubParsersAction[Parser]"
"""What ``add_subparsers()`` returns: each command module adds its parser to it."""


def positive_int(text: str) -> int:
    """An argparse type: a bad count is a usage error before anything starts (not a Ray start, then an error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {value}")
    return value


def init_ray(address: str | None, *, dashboard: bool = False) -> None:
    from ray_harness import runtime

    kwargs: dict[str, Any] = {"include_dashboard": True, "dashboard_host": "127.0.0.1"} \
        if dashboard and not address else {}
    runtime.init(address=address, **kwargs)
