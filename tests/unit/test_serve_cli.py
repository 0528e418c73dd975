"""``ray-harness serve``'s flags: what reaches ``serve.app()``, and errors that name the flag typed (no Ray)."""

from __future__ import annotations

import argparse
import re
from types import SimpleNamespace
from typing import Any

import pytest

import ray_harness.serve as rh_serve
from ray_harness.cli import main
from ray_harness.cli._app import build_parser
from ray_harness.serve._contexts import DEFAULT_MAX_CONTEXTS


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``serve.app`` / ``run`` / ``serve_until_stopped`` replaced: the app's arguments are recorded, nothing runs."""
    seen: dict[str, Any] = {}

    def app(target: Any, **options: Any) -> str:
        seen["app"] = {"target": target, **options}
        return "application"

    def run(application: Any, **options: Any) -> Any:
        seen["run"] = options
        return SimpleNamespace(url="http://127.0.0.1:8000/", card_url="http://127.0.0.1:8000/.well-known/agent-card.json")

    monkeypatch.setattr(rh_serve, "app", app)
    monkeypatch.setattr(rh_serve, "run", run)
    monkeypatch.setattr(rh_serve, "serve_until_stopped", lambda handle: seen.setdefault("stopped", handle))
    return seen


def _serve_parser() -> argparse.ArgumentParser:
    (commands,) = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    parser: argparse.ArgumentParser = commands.choices["serve"]
    return parser


def test_max_contexts_reaches_the_app(served: dict[str, Any]) -> None:
    assert main(["serve", "my_pkg:build_support", "--max-contexts", "50"]) == 0
    assert served["app"]["max_contexts"] == 50
    assert served["app"]["name"] == "support" and "stopped" in served


def test_without_max_contexts_the_apps_default_applies(served: dict[str, Any]) -> None:
    assert main(["serve", "my_pkg:build_support", "--replicas", "2", "--port", "8100"]) == 0
    assert "max_contexts" not in served["app"] and served["app"]["num_replicas"] == 2
    assert served["run"] == {"host": "127.0.0.1", "port": 8100}


def test_the_help_states_the_apps_default_max_contexts() -> None:
    serve = _serve_parser()
    (option,) = [action for action in serve._actions if "--max-contexts" in action.option_strings]
    assert f"(default {DEFAULT_MAX_CONTEXTS})" in (option.help or "")


@pytest.mark.parametrize(("argv", "said"), [
    (["--replicas", "0"], "argument --replicas: must be a positive int, got 0"),
    (["--replicas", "two"], "argument --replicas: invalid int value: 'two'"),
    (["--max-contexts", "0"], "argument --max-contexts: must be a positive int, got 0"),
    (["--max-contexts", "-5"], "argument --max-contexts: must be a positive int, got -5"),
    (["--port", "70000"], "argument --port: must be a port from 1 to 65535, got 70000"),
    (["--port", "0"], "argument --port: must be a port from 1 to 65535, got 0"),
])
def test_bad_numbers_are_usage_errors_naming_the_flag(argv: list[str], said: str, served: dict[str, Any],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "my_pkg:build_support", *argv])
    assert exited.value.code == 2
    assert said in capsys.readouterr().err
    assert "app" not in served  # refused before anything was built


@pytest.mark.parametrize(("argv", "raised", "said"), [
    (["--name", "a b"], "name 'a b' must match x", "error: --name 'a b' must match x"),
    (["--task-store", "/tmp/t"], "task_store '/tmp/t' must start with file:// or s3://",
     "error: --task-store '/tmp/t' must start with file:// or s3://"),
    ([], "name 'x' must match y",
     "error: the app name made from the target's function name is not valid (name 'x' must match y): give one "
     "with --name"),
    ([], "pass num_replicas or autoscaling_config, not both", "error: pass num_replicas or autoscaling_config"),
])
def test_the_apps_errors_name_the_flag(argv: list[str], raised: str, said: str, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    def app(*_: Any, **__: Any) -> None:
        raise ValueError(raised)

    monkeypatch.setattr(rh_serve, "app", app)
    assert main(["serve", "my_pkg:build_support", *argv]) == 2
    assert capsys.readouterr().err.startswith(said)


def test_every_flag_of_serve_has_help() -> None:
    serve = _serve_parser()
    undocumented = [action.option_strings or action.dest for action in serve._actions if not action.help]
    assert undocumented == []
    assert re.search(r"Example: ray-harness serve", serve.format_help())
