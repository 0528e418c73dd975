"""``ray-harness ... --help`` as a newcomer reads it: every argument explained, defaults stated, flags whole."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

import ray_harness
from ray_harness.cli import main
from ray_harness.cli._app import build_parser


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...],
                                                                                          argparse.ArgumentParser]]:
    """Every (sub)command's parser, by its words (``("jobs", "logs")``)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(((*path, name), sub))
                found.extend(_commands(sub, (*path, name)))
    return found


COMMANDS = _commands(build_parser())


def test_every_command_is_found() -> None:
    words = {" ".join(path) for path, _ in COMMANDS}
    assert words >= {"demo", "run", "eval", "submit", "jobs", "jobs download", "jobs logs", "dashboard",
                     "dashboard install", "status", "cancel", "serve"}


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[" ".join(path) for path, _ in COMMANDS])
def test_every_argument_says_what_it_is(path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    """``run``'s prompt, ``serve``'s --host, --port and --replicas were listed with no word about them."""
    silent = [action.option_strings or action.dest for action in parser._actions
              if not action.help and not isinstance(action, argparse._SubParsersAction)]
    assert silent == []


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[" ".join(path) for path, _ in COMMANDS])
def test_every_command_says_what_it_does(path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    """``jobs --help`` and ``dashboard --help`` said nothing, ``submit --help`` and ``jobs logs --help`` only
    "Example: ...": the one line the command list shows is not in a command's own help."""
    description = parser.description or ""
    assert description and not description.startswith("Example"), path


def test_version() -> None:
    shown = subprocess.run([sys.executable, "-m", "ray_harness.cli", "--version"], capture_output=True, text=True,
                           check=False)
    assert (shown.returncode, shown.stdout.strip()) == (0, f"ray-harness {ray_harness.__version__}")


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[" ".join(path) for path, _ in COMMANDS])
def test_every_address_says_its_default(path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    """``eval --address`` said only "Ray address to join": where it goes without one was left to guess."""
    for action in parser._actions:
        if "--address" in action.option_strings:
            assert "(default RAY_ADDRESS, else " in (action.help or ""), path


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[" ".join(path) for path, _ in COMMANDS])
def test_help_never_breaks_a_flag_or_path_at_its_hyphen(path: tuple[str, ...], parser: argparse.ArgumentParser,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert not re.search(r"\w-\n", parser.format_help()), parser.format_help()


def test_every_command_has_help_through_python_m() -> None:
    for path, _ in COMMANDS:
        shown = subprocess.run([sys.executable, "-m", "ray_harness.cli", *path, "--help"], capture_output=True,
                               text=True, check=False)
        assert shown.returncode == 0 and f"usage: ray-harness {' '.join(path)}" in shown.stdout, path


@pytest.mark.parametrize(("argv", "said"), [
    (["status", "--interval", "0"], "error: --interval must be a positive number of seconds, got 0.0"),
    (["status", "--watch", "--interval", "-1"], "error: --interval must be a positive number of seconds, got -1.0"),
    (["cancel", "aaaa", "--timeout", "nan"], "error: --timeout must be a positive number of seconds, got nan"),
])
def test_bad_seconds_are_refused_naming_the_flag(argv: list[str], said: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``--timeout nan`` passed the check and then waited forever; ``--interval 0`` ran as 0.2 without a word."""
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(said)
