"""``ray-harness cancel``: which run an id names, what is sent, and what the user is told (no Ray: a fake cluster)."""

from __future__ import annotations

import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from ray_harness.cli import main
from ray_harness.cli._cancel import cancel_runs


def _run(run: str, status: str = "running", kind: str = "graph", name: str = "big", **extra: Any) -> dict[str, Any]:
    return {"run": run, "kind": kind, "name": name, "status": status, "cancellable": True, "nodes_done": {},
            "rows_completed": 0, "rows_failed": 0, "ended_at": None, **extra}


class FakeCluster:
    """Runs as ``status`` lists them; a request taken (if ``takes``) ends its run as ``ends_as``."""

    def __init__(self, *runs: dict[str, Any], takes: bool = True, ends_as: dict[str, Any] | None = None) -> None:
        self.runs = {run["run"]: run for run in runs}
        self.takes = takes
        self.ends_as = ends_as or {}
        self.calls: list[tuple[str, str]] = []
        self.requests: set[str] = set()

    def snapshot(self) -> list[dict[str, Any]]:
        self.calls.append(("snapshot", ""))
        for run in list(self.requests):
            if self.takes and run in self.ends_as:
                self.runs[run] = {**self.runs[run], **self.ends_as[run]}
        return list(self.runs.values())

    def request(self, run: str) -> None:
        self.calls.append(("request", run))
        self.requests.add(run)

    def pending(self, run: str) -> bool:
        return not self.takes and run in self.requests

    def withdraw(self, run: str) -> bool:
        self.calls.append(("withdraw", run))
        found = run in self.requests
        self.requests.discard(run)
        return found


def test_a_running_graph_is_cancelled_and_its_nodes_say_how_they_ended(capsys: pytest.CaptureFixture[str]) -> None:
    ended = {"status": "cancelled", "nodes_done": {"entry": "completed", "a": "cancelled", "b": "cancelled"}}
    cluster = FakeCluster(_run("3f2a9c0d1e4b5a6c"), ends_as={"3f2a9c0d1e4b5a6c": ended})
    assert cancel_runs(cluster, ["3f2a9c0d1e4b5a6c"], every=False, wait_s=30, poll_s=0) == 0
    out = capsys.readouterr().out
    assert "cancelled run 3f2a9c0d1e4b5a6c (graph 'big'): nodes completed entry; cancelled a, b" in out
    assert cluster.calls.count(("request", "3f2a9c0d1e4b5a6c")) == 1


def test_a_unique_prefix_names_a_run() -> None:
    cluster = FakeCluster(_run("3f2a9c0d1e4b5a6c"), _run("77aa000000000000"),
                          ends_as={"3f2a9c0d1e4b5a6c": {"status": "cancelled"}})
    assert cancel_runs(cluster, ["3f2a"], every=False, wait_s=30, poll_s=0) == 0
    assert cluster.requests == {"3f2a9c0d1e4b5a6c"}


def test_an_ambiguous_prefix_sends_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(_run("3f2a000000000001"), _run("3f2a000000000002"))
    assert cancel_runs(cluster, ["3f2a"], every=False, wait_s=30, poll_s=0) == 1
    assert "run id '3f2a' is ambiguous: it begins 3f2a000000000001 (graph 'big'), 3f2a000000000002" \
        in capsys.readouterr().err
    assert cluster.requests == set()


def test_no_such_run_lists_the_runs_there_are(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(_run("aaaa000000000000", name="review"), _run("bbbb000000000000", "completed", "eval", "ev"))
    assert cancel_runs(cluster, ["nope"], every=False, wait_s=30, poll_s=0) == 1
    err = capsys.readouterr().err
    assert "no run 'nope' on this cluster; the runs it knows:" in err
    assert "aaaa000000000000  graph review" in err and "bbbb000000000000  eval  ev" in err
    assert cluster.requests == set()


def test_no_such_run_on_a_cluster_without_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert cancel_runs(FakeCluster(), ["nope"], every=False, wait_s=30, poll_s=0) == 1
    assert "no run 'nope' on this cluster: no run in progress or ended in the last 10 minutes" \
        in capsys.readouterr().err


def test_a_run_that_ended_is_not_cancelled_again(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(_run("aaaa000000000000", "completed", ended_at=1.0))
    assert cancel_runs(cluster, ["aaaa000000000000"], every=False, wait_s=30, poll_s=0) == 1
    assert "run aaaa000000000000 (graph 'big') already ended: completed" in capsys.readouterr().err
    assert cluster.requests == set()


def test_a_run_whose_process_takes_no_requests_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(_run("aaaa000000000000", cancellable=False))
    assert cancel_runs(cluster, ["aaaa000000000000"], every=False, wait_s=30, poll_s=0) == 1
    assert "cannot be cancelled from here" in capsys.readouterr().err
    assert cluster.requests == set()


def test_all_sends_every_request_before_waiting(capsys: pytest.CaptureFixture[str]) -> None:
    ids = ["aaaa000000000000", "bbbb000000000000"]
    cluster = FakeCluster(*(_run(run) for run in ids), _run("cccc000000000000", "failed"),
                          ends_as={run: {"status": "cancelled"} for run in ids})
    assert cancel_runs(cluster, [], every=True, wait_s=30, poll_s=0) == 0
    # One listing, then both requests (they stop together), then the wait.
    assert cluster.calls[:3] == [("snapshot", ""), ("request", ids[0]), ("request", ids[1])]
    out = capsys.readouterr().out
    assert all(f"cancelled run {run}" in out for run in ids) and "cccc" not in out


def test_all_without_runs_in_progress_has_nothing_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert cancel_runs(FakeCluster(_run("aaaa000000000000", "completed")), [], every=True, wait_s=30,
                        poll_s=0) == 0
    assert "no run in progress: nothing to cancel" in capsys.readouterr().out


def test_a_run_that_ends_otherwise_was_not_cancelled(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(_run("aaaa000000000000"), ends_as={"aaaa000000000000": {"status": "completed"}})
    assert cancel_runs(cluster, ["aaaa000000000000"], every=False, wait_s=30, poll_s=0) == 1
    assert "run aaaa000000000000 (graph 'big') ended completed before the cancel reached it" \
        in capsys.readouterr().err


def test_a_request_nobody_takes_is_withdrawn(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(_run("aaaa000000000000"), takes=False)
    assert cancel_runs(cluster, ["aaaa000000000000"], every=False, wait_s=0.01, poll_s=0) == 1
    assert "nothing took the request within 0.01s" in capsys.readouterr().err
    assert ("withdraw", "aaaa000000000000") in cluster.calls and cluster.requests == set()


def test_a_request_taken_by_a_run_that_does_not_end_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(_run("aaaa000000000000"))  # taken, never ends
    assert cancel_runs(cluster, ["aaaa000000000000"], every=False, wait_s=0.01, poll_s=0) == 1
    assert "the cancel reached run aaaa000000000000 (graph 'big'), but it had not ended within 0.01s" \
        in capsys.readouterr().err
    assert ("withdraw", "aaaa000000000000") not in cluster.calls


def test_a_cancelled_evaluation_says_its_finished_rows_stay(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(_run("eeee000000000000", kind="eval", name="my_pkg:build"),
                          ends_as={"eeee000000000000": {"status": "cancelled", "rows_completed": 7, "rows_failed": 1}})
    assert cancel_runs(cluster, ["eeee000000000000"], every=False, wait_s=30, poll_s=0) == 0
    assert "cancelled run eeee000000000000 (eval 'my_pkg:build'): 7 row(s) done, 1 failed (their records stay in " \
           "its output; running the evaluation again resumes)" in capsys.readouterr().out


def test_no_wait_sends_and_returns(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(_run("aaaa000000000000"))
    assert cancel_runs(cluster, ["aaaa000000000000"], every=False, wait_s=0, poll_s=0) == 0
    assert "cancel sent to run aaaa000000000000 (graph 'big')" in capsys.readouterr().out
    assert cluster.calls == [("snapshot", ""), ("request", "aaaa000000000000")]


def test_one_unknown_id_among_others_still_cancels_the_others(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster(_run("aaaa000000000000"), ends_as={"aaaa000000000000": {"status": "cancelled"}})
    assert cancel_runs(cluster, ["nope", "aaaa000000000000"], every=False, wait_s=30, poll_s=0) == 1
    captured = capsys.readouterr()
    assert "cancelled run aaaa000000000000" in captured.out and "no run 'nope'" in captured.err


def test_no_cluster_is_an_error_line_and_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(address: str) -> None:
        raise ConnectionError(f"could not find any running Ray instance at {address}")

    monkeypatch.setitem(sys.modules, "ray_harness.runtime._cancel_runs", types.SimpleNamespace(ClusterRuns=refuse))
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.9:6379")
    assert main(["cancel", "aaaa"]) == 2
    assert "error: could not find any running Ray instance at 10.0.0.9:6379" in capsys.readouterr().err
    assert main(["cancel", "aaaa", "--address", "auto"]) == 2  # --address wins over RAY_ADDRESS, as for status
    assert "instance at auto" in capsys.readouterr().err


def test_cancel_arguments_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cancel", "aaaa", "--timeout", "0"]) == 2
    assert "--timeout must be a positive number of seconds, got 0.0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["cancel"])  # a run or --all
    with pytest.raises(SystemExit):
        main(["cancel", "aaaa", "--all"])


def test_eval_stopped_by_cancel_exits_1_and_says_how_to_resume(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # Its summary printed like a finished one's and the command exited 0: a cancelled job ended SUCCEEDED.
    from ray_harness.telemetry import runs

    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "quick 0"}\n{"prompt": "quick 1"}\n{"prompt": "hold"}\n')
    output = tmp_path / "r.jsonl"
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(main(
        ["eval", "tests.cancel_targets:held_on_hold", str(data), "--local", "--output", str(output)])))
    worker.start()
    while not (runs.cancellable_runs() and output.exists() and len(output.read_text().splitlines()) == 2):
        time.sleep(0.01)
    (run,) = runs.cancellable_runs()
    assert runs.cancel_run(run)
    worker.join()
    assert codes == [1]
    assert f"cancelled: the finished rows are in {output.resolve()}; the same command (without --no-resume) runs " \
           "the rest" in capsys.readouterr().err
