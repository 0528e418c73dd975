from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ray_harness.evaluation import evaluate
from tests.signals import ctrl_c_once_recorded


def _rows(n: int, prefix: str = "q") -> list[dict]:
    return [{"prompt": f"{prefix}{i}", "expected": f"echo: {prefix}{i}"} for i in range(n)]


def exact(row: dict, result: object) -> float:
    return 1.0 if str(result).strip() == row["expected"] else 0.0


def test_200_rows_each_exactly_once_with_scores(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    summary = evaluate("tests.eval_targets:echo_agent", _rows(200), scorers=[exact], concurrency=16,
                       output=str(out), runtime="local")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["index"] for r in records) == list(range(200))
    assert summary["rows"] == 200 and summary["errors"] == 0
    assert summary["exact"] == 1.0
    assert summary["tokens"] == {"input": 2000, "output": 1000, "total": 3000}
    assert summary["rows_per_s"] > 0
    first = next(r for r in records if r["index"] == 0)
    assert first["output"] == "echo: q0\n" and first["stop_reason"] == "end_turn"
    assert first["input"] == {"prompt": "q0", "expected": "echo: q0"}
    assert first["error"] is None and first["latency_s"] >= 0


def test_a_failing_row_is_recorded_and_the_rest_complete(tmp_path: Path) -> None:
    rows = _rows(10)
    rows[3]["prompt"] = "boom"
    rows[5] = {"question": "no prompt key"}
    summary = evaluate("tests.eval_targets:echo_agent", rows, output=str(tmp_path / "r.jsonl"), runtime="local")
    records = {r["index"]: r for r in map(json.loads, (tmp_path / "r.jsonl").read_text().splitlines())}
    assert summary["errors"] == 2 and summary["completed"] == 8
    assert records[3]["error"]["type"] == "RuntimeError" and "boom" in records[3]["error"]["message"]
    assert records[5]["error"]["type"] == "KeyError"


def test_graph_target_over_a_csv(tmp_path: Path) -> None:
    dataset = tmp_path / "data.csv"
    dataset.write_text("prompt,topic\nfirst,a\nsecond,b\n")
    summary = evaluate("tests.eval_targets:chain_graph", str(dataset), output=str(tmp_path / "g.jsonl"),
                       runtime="local")
    records = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert summary["rows"] == 2 and summary["errors"] == 0
    assert {r["status"] for r in records} == {"completed"}
    assert all(r["usage"]["totalTokens"] == 45 for r in records)


def test_throttling_backs_off_and_every_row_completes(tmp_path: Path) -> None:
    summary = evaluate("tests.eval_targets:throttled_agent", _rows(20, "t"), concurrency=8, runtime="local",
                       output=str(tmp_path / "t.jsonl"))
    assert summary["rows"] == 20 and summary["errors"] == 0


def test_cancel_event_keeps_finished_rows_and_resume_completes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    out = tmp_path / "c.jsonl"
    stop = threading.Event()
    # Not left behind: Ray processes started later by other tests (a multi-node cluster) inherit the environment.
    monkeypatch.setenv("RAY_HARNESS_TEST_DELAY", "0.05")
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    first = evaluate("tests.eval_targets:slow_agent", _rows(100), concurrency=4, output=str(out), runtime="local",
                     cancel_event=stop)
    timer.cancel()
    assert first["cancelled"] is True and 0 < first["rows"] < 100
    second = evaluate("tests.eval_targets:slow_agent", _rows(100), concurrency=20, output=str(out),
                      runtime="local")
    indices = [json.loads(line)["index"] for line in out.read_text().splitlines()]
    assert sorted(indices) == list(range(100))  # nothing lost, nothing duplicated
    assert second["rows"] == 100 and second["rows_this_run"] == 100 - first["rows"]


def test_killed_driver_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "k.jsonl"
    data = tmp_path / "k_in.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in _rows(60)))
    script = (
        "import os; os.environ['RAY_HARNESS_TEST_DELAY']='0.1'\n"
        "from ray_harness.evaluation import evaluate\n"
        f"evaluate('tests.eval_targets:slow_agent', {str(data)!r}, concurrency=2, output={str(out)!r}, "
        "runtime='local')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *sys.path])}
    process = subprocess.Popen([sys.executable, "-c", script], env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 6):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done_before = len(out.read_text().splitlines())
    assert 0 < done_before < 60
    evaluate("tests.eval_targets:slow_agent", str(data), concurrency=30, output=str(out), runtime="local")
    indices = [json.loads(line)["index"] for line in out.read_text().splitlines()]
    assert sorted(indices) == list(range(60))


def test_parquet_output_and_resume(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    out = tmp_path / "r.parquet"
    evaluate("tests.eval_targets:echo_agent", _rows(10), output=str(out), runtime="local")
    summary = evaluate("tests.eval_targets:echo_agent", _rows(15), output=str(out), runtime="local")
    assert summary["rows"] == 15 and summary["rows_this_run"] == 5


@pytest.mark.parametrize(("kwargs", "error"), [({"concurrency": 0}, ValueError), ({"runtime": "gpu"}, ValueError),
                                               ({"limits": {"turns": 0}}, TypeError),
                                               ({"scorers": [exact, 5]}, TypeError), ({"scorers": exact}, TypeError)])
def test_bad_arguments(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        evaluate("tests.eval_targets:echo_agent", _rows(1), **kwargs)


def test_bad_targets_and_datasets(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"package\.module:function"):
        evaluate("no_colon", _rows(1), runtime="local")
    with pytest.raises(ValueError, match="cannot import"):
        evaluate("missing_mod:f", _rows(1), runtime="local")
    with pytest.raises(FileNotFoundError):
        evaluate("tests.eval_targets:echo_agent", str(tmp_path / "nope.jsonl"), runtime="local")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        evaluate("tests.eval_targets:echo_agent", str(bad), runtime="local")


def test_ctrl_c_flushes_finished_rows_and_resume_completes(tmp_path: Path) -> None:
    out = tmp_path / "sigint.jsonl"
    data = tmp_path / "sigint_in.jsonl"
    gate = tmp_path / "gate"
    data.write_text("".join(json.dumps(row) + "\n" for row in _rows(80)))
    script = (
        "from ray_harness.evaluation import evaluate\n"
        f"evaluate('tests.eval_targets:gated_agent', {str(data)!r}, concurrency=16, output={str(out)!r}, "
        "runtime='local')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *sys.path]),
           "RAY_HARNESS_TEST_GATE": str(gate)}
    # State, not time: rows 0-7 finish at once, the other rows in flight wait on the gate (not opened
    # yet), so the run is certainly still going, with exactly 8 rows recorded, when Ctrl-C arrives.
    returncode, stderr = ctrl_c_once_recorded([sys.executable, "-c", script], env, out, 8)
    assert returncode != 0 and "KeyboardInterrupt" in stderr, stderr
    lines = out.read_text().splitlines()
    assert sorted(json.loads(line)["index"] for line in lines) == list(range(8))
    assert all(json.loads(line)["error"] is None for line in lines)  # in-flight rows were not recorded as failures
    gate.touch()
    os.environ["RAY_HARNESS_TEST_GATE"] = str(gate)
    try:
        evaluate("tests.eval_targets:gated_agent", str(data), concurrency=40, output=str(out), runtime="local")
    finally:
        del os.environ["RAY_HARNESS_TEST_GATE"]
    indices = [json.loads(line)["index"] for line in out.read_text().splitlines()]
    assert sorted(indices) == list(range(80))


@pytest.mark.parametrize("resume", [True, False])
@pytest.mark.parametrize("content", [b"my notes\nsecond line without newline", b'{"a": 1}\n{"b": 2', b"\x00\x01binary",
                                     b'{"index": 0, "prompt": "q0"}\n{"index": 1, "prompt": "q1"}\n'])
def test_an_output_that_is_not_a_results_file_is_left_untouched(tmp_path: Path, content: bytes, resume: bool) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_bytes(content)
    with pytest.raises(ValueError, match=r"notes\.jsonl.*not a results file"):
        evaluate("tests.eval_targets:echo_agent", _rows(2), output=str(notes), runtime="local", resume=resume)
    assert notes.read_bytes() == content


def test_an_output_directory_that_is_not_ours_is_left_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "r.parquet"
    folder.mkdir()
    (folder / "part-000000.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=r"r\.parquet.*not a results"):
        evaluate("tests.eval_targets:echo_agent", _rows(2), output=str(folder), runtime="local", resume=False)
    assert (folder / "part-000000.parquet").read_bytes() == b"not parquet"


def test_failed_rows_record_what_they_spent(tmp_path: Path) -> None:
    out = tmp_path / "spent.jsonl"
    summary = evaluate("tests.eval_targets:long_agent", _rows(3), output=str(out), runtime="local")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["error"]["type"] for r in records] == ["MaxTokensReachedException"] * 3
    assert [r["usage"]["totalTokens"] for r in records] == [15, 15, 15]
    assert summary["tokens"]["total"] == 45 and summary["errors"] == 3


def test_failed_records_have_the_keys_of_completed_ones(tmp_path: Path) -> None:
    out = tmp_path / "keys.jsonl"
    rows = _rows(2)
    rows[1]["prompt"] = "boom"
    evaluate("tests.eval_targets:echo_agent", rows, output=str(out), runtime="local")
    ok, failed = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["index"])
    assert set(ok) == set(failed)
    assert (ok["status"], ok["stop_reason"]) == ("completed", "end_turn")
    assert (failed["status"], failed["stop_reason"]) == ("failed", None)


def test_summary_of_only_failed_rows_has_no_nan(tmp_path: Path) -> None:
    summary = evaluate("tests.eval_targets:echo_agent", [{"prompt": "boom"}], runtime="local")
    assert summary["latency_s"] == {"p50": None, "p90": None, "p99": None}
    json.dumps(summary, allow_nan=False)


def test_a_record_cut_by_a_crash_in_the_first_write_is_ours_and_runs_again(tmp_path: Path) -> None:
    out = tmp_path / "cut.jsonl"
    out.write_bytes(b'{"index": 0, "input": {"prompt": "q0"')
    summary = evaluate("tests.eval_targets:echo_agent", _rows(2), output=str(out), runtime="local")
    assert summary["rows"] == 2 and summary["rows_this_run"] == 2
    assert sorted(json.loads(line)["index"] for line in out.read_text().splitlines()) == [0, 1]


def test_a_parquet_directory_of_other_data_or_files_is_left_untouched(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    theirs = tmp_path / "theirs.parquet"
    theirs.mkdir()
    pq.write_table(pa.table({"index": [0, 1], "prompt": ["a", "b"]}), theirs / "part-000000.parquet")
    before = (theirs / "part-000000.parquet").read_bytes()
    for resume in (True, False):
        with pytest.raises(ValueError, match=r"theirs\.parquet.*not a results file.*no error, input, output, status"):
            evaluate("tests.eval_targets:echo_agent", _rows(2), output=str(theirs), runtime="local", resume=resume)
    assert (theirs / "part-000000.parquet").read_bytes() == before
    mixed = tmp_path / "mixed.parquet"
    mixed.mkdir()
    (mixed / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"not result parts, e\.g\. notes\.txt"):
        evaluate("tests.eval_targets:echo_agent", _rows(2), output=str(mixed), runtime="local")
    assert [p.name for p in mixed.iterdir()] == ["notes.txt"]


def test_parquet_parts_of_failed_and_completed_rows_read_back_as_one_table(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    out = tmp_path / "r.parquet"
    rows = [{"prompt": "boom"}, {"prompt": "boom"}]
    evaluate("tests.eval_targets:echo_agent", rows, output=str(out), runtime="local")  # a part of failures only
    evaluate("tests.eval_targets:echo_agent", [*rows, *_rows(2)], output=str(out), runtime="local")
    table = pq.read_table(out)  # one schema across parts: a null-typed column would not merge with a string one
    assert table.num_rows == 4
    assert str(table.schema.field("output").type) == "string"
    assert sorted(table.column("status").to_pylist()) == ["completed", "completed", "failed", "failed"]


def test_records_of_rows_past_the_end_of_a_shorter_dataset_are_not_in_its_summary(tmp_path: Path) -> None:
    out = tmp_path / "reused.jsonl"
    evaluate("tests.eval_targets:echo_agent", _rows(10), scorers=[exact], output=str(out), runtime="local")
    before = out.read_bytes()
    summary = evaluate("tests.eval_targets:echo_agent", _rows(4), scorers=[exact], output=str(out), runtime="local")
    assert summary["rows"] == 4 and summary["rows_this_run"] == 0
    assert summary["tokens"]["total"] == 60 and summary["scores"]["exact"]["count"] == 4
    assert out.read_bytes() == before  # the other records are kept, untouched
    stop = threading.Event()
    stop.set()  # cancelled before any row: the rest of the dataset is read to know its size
    cancelled = evaluate("tests.eval_targets:echo_agent", _rows(4), output=str(out), runtime="local",
                         cancel_event=stop)
    assert cancelled["cancelled"] is True and cancelled["rows"] == 4
    longer = evaluate("tests.eval_targets:echo_agent", _rows(20), output=str(out), runtime="local", cancel_event=stop)
    assert longer["rows"] == 10  # recorded rows the cancelled run did not reach are this dataset's too


def test_a_missing_or_null_prompt_is_an_input_error_naming_the_key(tmp_path: Path) -> None:
    out = tmp_path / "prompts.jsonl"
    summary = evaluate("tests.eval_targets:echo_agent", [{"prompt": None}, {"question": "q"}, {"prompt": "q"}],
                       output=str(out), runtime="local")
    records = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["index"])
    assert summary["errors"] == 2 and records[2]["error"] is None
    for record in records[:2]:  # not run: a None prompt would invoke the agent on no message at all
        assert record["output"] is None and record["status"] == "failed"
        assert record["error"] == {"type": "KeyError", "kind": "input",
                                   "message": f"row {record['index']} has no 'prompt' value (prompt_key='prompt')"}


@pytest.mark.parametrize("prompt", [5, 2.5, True])
def test_a_number_or_boolean_prompt_is_an_input_error_not_the_targets(prompt: object, tmp_path: Path) -> None:
    """A JSONL row {"prompt": 5} used to run the agent and fail as kind "target" ("unsupported prompt of type int")."""
    out = tmp_path / "prompts.jsonl"
    summary = evaluate("tests.eval_targets:echo_agent", [{"prompt": prompt}, {"prompt": "q"}], output=str(out),
                       runtime="local")
    records = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["index"])
    assert summary["errors"] == 1 and records[1]["error"] is None
    assert records[0]["output"] is None and records[0]["usage"] is None  # not run
    assert records[0]["error"] == {"type": "KeyError", "kind": "input", "message": (
        f"row 0: 'prompt' is {prompt!r} ({type(prompt).__name__}); a prompt is a string or a list of content "
        "blocks or messages (prompt_key='prompt')")}


def test_a_factory_that_builds_no_agent_fails_its_rows_saying_so_as_on_ray(tmp_path: Path) -> None:
    """runtime="local" used to record "'int' object has no attribute 'invoke_async'" (the Ray hosts named it)."""

    def forty_two() -> int:
        return 42

    out = tmp_path / "out.jsonl"
    summary = evaluate(forty_two, [{"prompt": "q"}], runtime="local", output=str(out))
    assert summary["errors"] == 1
    assert json.loads(out.read_text())["error"] == {
        "type": "TypeError", "kind": "target",
        "message": "target 'forty_two' produced int, not an Agent, Graph or Swarm"}


def test_the_summary_counts_rows_stopped_for_a_human_apart_from_errors() -> None:
    from tests.eval_targets import approval_agent

    summary = evaluate(approval_agent, [{"prompt": "ask a"}, {"prompt": "plain"}], runtime="local")
    assert (summary["interrupted"], summary["errors"], summary["completed"]) == (1, 0, 2)


def test_grade_reads_a_results_file_of_any_name_and_never_touches_a_file_next_to_its_output(tmp_path: Path) -> None:
    from ray_harness.evaluation import grade

    results = tmp_path / "results.json"  # evaluate() writes JSONL to any output but a .parquet one
    evaluate("tests.eval_targets:echo_agent", _rows(3), output=str(results), runtime="local")
    theirs = tmp_path / "graded.jsonl.tmp"
    theirs.write_text("the user's own file")
    summary = grade(str(results), [exact], output=str(tmp_path / "graded.jsonl"))  # no Ray: a file is JSONL
    assert summary["rows"] == 3 and summary["exact"] == 1.0
    assert theirs.read_text() == "the user's own file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graded.jsonl", "graded.jsonl.tmp", "results.json"]


def test_parquet_parts_after_a_removed_one_do_not_replace_existing_parts(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    out = tmp_path / "r.parquet"
    evaluate("tests.eval_targets:echo_agent", _rows(2), output=str(out), runtime="local")
    evaluate("tests.eval_targets:echo_agent", _rows(4), output=str(out), runtime="local")
    (out / "part-000000.parquet").unlink()  # its rows (0 and 1) run again
    summary = evaluate("tests.eval_targets:echo_agent", _rows(4), output=str(out), runtime="local")
    assert summary["rows"] == 4 and summary["rows_this_run"] == 2
    assert sorted(pq.read_table(out).column("index").to_pylist()) == [0, 1, 2, 3]


def test_id_key_resumes_a_list_by_row_id_not_by_position(tmp_path: Path) -> None:
    out = tmp_path / "ids.jsonl"
    rows = [{"id": f"r{i}", **row} for i, row in enumerate(_rows(3))]
    evaluate("tests.eval_targets:echo_agent", rows, output=str(out), runtime="local", id_key="id")
    grown = [{"id": "new", "prompt": "fresh", "expected": "echo: fresh"}, *rows[1:]]  # r0 dropped, a row prepended
    summary = evaluate("tests.eval_targets:echo_agent", grown, scorers=[exact], output=str(out), runtime="local",
                       id_key="id")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["input"]["id"] for r in records] == ["r0", "r1", "r2", "new"]  # r1 and r2 did not run again
    assert summary["rows"] == 3 and summary["rows_this_run"] == 1  # r0 is not this dataset's
    with pytest.raises(ValueError, match=r"row 1 has no 'id' value"):
        evaluate("tests.eval_targets:echo_agent", [rows[0], _rows(1)[0]], runtime="local", id_key="id")


def test_an_unreadable_row_cancels_the_rows_in_flight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ray_harness.evaluation._backends import LocalBackend

    cancelled: list[str] = []
    original = LocalBackend.cancel

    async def recording(self: LocalBackend, run_ids: list[str]) -> None:
        cancelled.extend(run_ids)
        await original(self, run_ids)

    monkeypatch.setattr(LocalBackend, "cancel", recording)
    monkeypatch.setenv("RAY_HARNESS_TEST_DELAY", "5")
    out = tmp_path / "bad_row.jsonl"
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"dataset\[2\]: each row must be an object"):
        evaluate("tests.eval_targets:slow_agent", [*_rows(2), "not a row"], concurrency=4, output=str(out),
                 runtime="local")
    assert len(cancelled) == 2 and time.monotonic() - started < 4  # not left running (on Ray hosts: spending)


def test_a_json_dataset_may_be_one_array_of_rows(tmp_path: Path) -> None:
    pretty = tmp_path / "rows.json"
    pretty.write_text(json.dumps(_rows(3), indent=2))
    summary = evaluate("tests.eval_targets:echo_agent", str(pretty), scorers=[exact], runtime="local")
    assert summary["rows"] == 3 and summary["exact"] == 1.0
    lines = tmp_path / "lines.json"
    lines.write_text("".join(json.dumps(row) + "\n" for row in _rows(2)))  # JSON Lines under .json still work
    assert evaluate("tests.eval_targets:echo_agent", str(lines), runtime="local")["rows"] == 2
    bad = tmp_path / "bad.json"
    bad.write_text('[{"prompt": "a"},\n  3]')
    with pytest.raises(ValueError, match=r"bad\.json\[1\]: each row must be an object"):
        evaluate("tests.eval_targets:echo_agent", str(bad), runtime="local")
