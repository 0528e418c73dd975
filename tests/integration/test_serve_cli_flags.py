"""``ray-harness serve`` with the real ``serve.app()`` checks: an error names the flag typed (Ray imported, not started)."""

from __future__ import annotations

import pytest

from ray_harness.cli import main


@pytest.mark.parametrize(("argv", "said"), [
    (["tests.serve.targets:build_plain_agent", "--name", "a b"], "error: --name 'a b' must match "),
    (["tests.serve.targets:build_plain_agent", "--task-store", "/tmp/tasks"],
     "error: --task-store '/tmp/tasks' must start with file:// or s3://"),
    (["tests.serve.targets:build_plain_agent", "--task-store", "file://relative/dir"],
     "error: --task-store 'file://relative/dir': a file store must be an absolute path"),
    (["tests.serve.targets:" + "x" * 70], "error: the app name made from the target's function name is not valid "
                                          f"(name '{'x' * 70}' must match "),
])
def test_the_apps_own_checks_name_the_flag(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(said), err
    assert "task_store" not in err and "num_replicas" not in err
