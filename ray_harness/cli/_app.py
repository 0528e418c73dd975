"""The ``ray-harness`` parser (one module per command adds its own) and ``main``: exit codes, user errors."""

from __future__ import annotations

import argparse
import os
import sys

from ray_harness._version import __version__
from ray_harness.cli._cancel import add_cancel
from ray_harness.cli._dashboard import add_dashboard
from ray_harness.cli._evaluate import add_demo, add_eval
from ray_harness.cli._jobs import add_jobs, add_submit
from ray_harness.cli._options import Parser
from ray_harness.cli._run import add_run
from ray_harness.cli._serve import add_serve
from ray_harness.cli._status import add_status

__all__ = ("build_parser", "main")

_USER_ERRORS = (ValueError, TypeError, FileNotFoundError, ImportError, KeyError, ConnectionError)


def main(argv: list[str] | None = None) -> int:
    """Run the ``ray-harness`` command line on ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    _importable_from_here()
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except _USER_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _importable_from_here() -> None:
    """Targets and scorers (``my_pkg.targets:build``) import from the current directory, as with ``python -m``.

    A console script's ``sys.path`` starts at its own bin directory, not the working directory. ``PYTHONPATH``
    gets it too, so the worker processes of an embedded Ray started from here import the same modules.
    """
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    paths = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
    if here not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([here, *paths])


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; ``submit`` also checks the command it is given with it."""
    parser = Parser(prog="ray-harness", description="Agent harness on Ray.",
                    epilog="'ray-harness COMMAND --help' describes a command and its options.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for add in (add_demo, add_run, add_eval, add_submit, add_jobs, add_dashboard, add_status, add_cancel, add_serve):
        add(commands)
    return parser
