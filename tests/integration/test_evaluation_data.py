"""Evaluations through Ray Data: host actors in map_batches, Parquet records, resume, grade, S3."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ray_harness.evaluation import evaluate, grade
from tests.session.conftest import moto_endpoint  # noqa: F401  (a real moto server for the S3 test)
from tests.signals import ctrl_c_raises

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


def _prompts(n: int) -> Any:
    import ray

    # Rows are made on the cluster: the driver never holds them.
    return ray.data.range(n).map(lambda r: {"prompt": f"p{r['id']}", "qid": f"q{r['id']}"})


def has_prompt(row: dict, result: object) -> float:
    return 1.0 if str(result).strip().isdigit() and row["prompt"].startswith("p") else 0.0


def _records(path: Path) -> Any:
    import pyarrow.parquet as pq

    return pq.read_table(str(path))


def test_1000_rows_through_ray_data_exactly_once_and_never_in_the_driver(tmp_path: Path) -> None:
    import pyarrow as pa

    out = tmp_path / "records"
    summary = evaluate("tests.eval_targets:pid_agent", _prompts(1000), scorers=[has_prompt], output=str(out),
                       pool_size=2, concurrency=50)
    table = _records(out)
    assert sorted(table.column("index").to_pylist()) == list(range(1000))
    assert sorted(r["qid"] for r in table.column("input").to_pylist()) == sorted(f"q{i}" for i in range(1000))
    pids = set(table.column("pid").to_pylist())
    assert os.getpid() not in pids and {str(p) for p in pids} == {o.strip() for o in table.column("output").to_pylist()}
    schema = table.schema
    for name in ("input", "usage", "error", "scores"):
        assert pa.types.is_struct(schema.field(name).type), name
    assert schema.field("usage").type.field("totalTokens").type == pa.int64()
    assert summary["rows"] == 1000 and summary["errors"] == 0 and summary["tokens"]["total"] == 15_000
    assert summary["has_prompt"] == 1.0 and summary["rows_this_run"] == 1000

    # grade() scores the records again without the target: same summary as scoring inline.
    regraded = grade(str(out), [has_prompt])
    assert regraded["has_prompt"] == summary["has_prompt"] and regraded["rows"] == 1000
    assert regraded["tokens"] == summary["tokens"]


def test_resume_by_id_key_records_every_row_once(tmp_path: Path) -> None:
    out = tmp_path / "resumed"
    import ray

    # As after a cancel: a third of the rows (other positions, same ids) is already recorded.
    every_third = ray.data.range(40).map(lambda r: {"prompt": f"p{r['id'] * 3}", "qid": f"q{r['id'] * 3}"})
    first = evaluate("tests.eval_targets:echo_agent", every_third, output=str(out), id_key="qid", pool_size=1)
    assert first["rows"] == 40
    # A run killed while writing leaves a part cut short: resume sets it aside and runs its rows again.
    part = sorted(out.glob("*.parquet"))[0]
    cut = _records(part).num_rows
    part.write_bytes(part.read_bytes()[:100])
    second = evaluate("tests.eval_targets:echo_agent", _prompts(120), output=str(out), id_key="qid", pool_size=1)
    assert second["rows"] == 120 and second["rows_this_run"] == 80 + cut
    qids = [r["qid"] for r in _records(out).column("input").to_pylist()]
    assert sorted(qids) == sorted(f"q{i}" for i in range(120))


def test_a_shorter_dataset_on_a_reused_output_summarizes_only_its_own_rows(tmp_path: Path) -> None:
    out = tmp_path / "reused"
    assert evaluate("tests.eval_targets:echo_agent", _prompts(30), output=str(out), pool_size=1)["rows"] == 30
    # The first 10 rows (by position, then by id): the other 20 records stay in the output, not in the summary.
    by_index = evaluate("tests.eval_targets:echo_agent", _prompts(10), output=str(out), pool_size=1)
    assert (by_index["rows"], by_index["rows_this_run"]) == (10, 0)
    by_id = evaluate("tests.eval_targets:echo_agent", _prompts(10), output=str(out), id_key="qid", pool_size=1)
    assert (by_id["rows"], by_id["rows_this_run"]) == (10, 0)
    assert _records(out).num_rows == 30


def test_a_numeric_prompt_column_is_an_input_error_as_on_the_list_path(tmp_path: Path) -> None:
    """A Parquet/JSON column of numbers as the prompt used to run every row and fail it as kind "target"."""
    import ray

    summary = evaluate("tests.eval_targets:echo_agent", ray.data.from_items([{"prompt": 7}, {"prompt": 8}]),
                       output=str(tmp_path / "numbers"), pool_size=1)
    assert summary["errors"] == 2
    errors = sorted((r["index"], r["error"]["kind"], r["error"]["message"])
                    for r in _records(tmp_path / "numbers").to_pylist())
    assert [(kind, message.split(":")[0]) for _, kind, message in errors] == [("input", "row 0"), ("input", "row 1")]
    assert "'prompt' is 7 (int); a prompt is a string" in errors[0][2]


@pytest.mark.parametrize("output", ["results.jsonl", "results.json", "results.CSV/"])
def test_a_file_like_output_of_a_ray_dataset_is_refused_before_anything_runs(tmp_path: Path, output: str) -> None:
    """It used to become a directory named results.jsonl holding Parquet parts."""
    import ray

    with pytest.raises(ValueError, match=r"output '.*': with a ray.data.Dataset the records are Parquet parts"):
        evaluate("tests.eval_targets:echo_agent", ray.data.from_items([{"prompt": "q"}]),
                 output=str(tmp_path / output), pool_size=1)
    assert not (tmp_path / output).exists()


def test_rows_stopped_for_a_human_are_counted_by_the_cluster_summary(tmp_path: Path) -> None:
    import ray

    rows = ray.data.from_items([{"prompt": "ask a"}, {"prompt": "plain"}, {"prompt": "ask b"}])
    summary = evaluate("tests.eval_targets:approval_agent", rows, output=str(tmp_path / "asked"), pool_size=1)
    assert (summary["interrupted"], summary["errors"]) == (2, 0)


def test_evaluate_then_grade_equals_inline_scoring_and_errors_are_kept_apart(tmp_path: Path) -> None:
    import ray

    rows = ray.data.from_items([{"prompt": "ok"}, {"prompt": "boom"}, {"prompt": None}, {"prompt": "fine"}])

    def exact(row: dict, result: object) -> float:
        if row["prompt"] == "fine":
            raise ValueError("scorer broke")
        return float(str(result).strip() == f"echo: {row['prompt']}")

    inline = evaluate("tests.eval_targets:echo_agent", rows, scorers=[exact], output=str(tmp_path / "inline"),
                      pool_size=1)
    bare = evaluate("tests.eval_targets:echo_agent", rows, scorers=[], output=str(tmp_path / "bare"), pool_size=1)
    graded = grade(str(tmp_path / "bare"), [exact], output=str(tmp_path / "graded"))
    for key in ("rows", "errors", "scorer_errors", "tokens", "cost_usd", "exact"):
        assert graded[key] == inline[key], key
    assert bare["errors"] == 2 and inline["scorer_errors"] == 1
    kinds = {r["input"]["prompt"]: (r["error"] or {}).get("kind") for r in _records(tmp_path / "graded").to_pylist()}
    assert kinds == {"ok": None, "boom": "target", None: "input", "fine": "scorer"}
    fine = next(r for r in _records(tmp_path / "graded").to_pylist() if r["input"]["prompt"] == "fine")
    assert fine["output"].strip() == "echo: fine"  # a scorer failure keeps the output
    missing = next(r for r in _records(tmp_path / "graded").to_pylist() if r["input"]["prompt"] is None)
    assert "'prompt'" in missing["error"]["message"]


def test_bad_inputs_fail_before_anything_runs(tmp_path: Path) -> None:
    import ray

    rows = ray.data.from_items([{"question": "q"}])
    with pytest.raises(ValueError, match="'prompt'"):
        evaluate("tests.eval_targets:echo_agent", rows, output=str(tmp_path / "o"))
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes")
    with pytest.raises(ValueError, match=r"notes\.txt.*not a results file"):
        evaluate("tests.eval_targets:echo_agent", _prompts(3), output=str(notes))
    assert notes.read_bytes() == b"my notes"
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "mine.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="not a results file"):
        evaluate("tests.eval_targets:echo_agent", _prompts(3), output=str(folder))
    assert [p.name for p in folder.iterdir()] == ["mine.csv"]
    from ray_harness.evaluation import RateLimit

    with pytest.raises(ValueError, match="requests_per_minute"):
        evaluate("tests.eval_targets:echo_agent", _prompts(3), rate_limits={"openai:x": RateLimit(requests_per_minute=-1)})


def test_records_to_s3(moto_endpoint: str) -> None:  # noqa: F811
    import boto3
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    import s3fs

    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket="evals")
    # Through s3fs: pyarrow's own S3 client fails moto's CompleteMultipartUpload ("error embedded in a 200 OK").
    s3 = pafs.PyFileSystem(pafs.FSSpecHandler(s3fs.S3FileSystem(
        key="testing", secret="testing", client_kwargs={"endpoint_url": moto_endpoint, "region_name": "us-east-1"})))
    summary = evaluate("tests.eval_targets:echo_agent", _prompts(30), output="s3://evals/run1", filesystem=s3,
                       pool_size=1)
    assert summary["rows"] == 30
    table = pq.read_table("evals/run1", filesystem=s3)
    assert sorted(table.column("index").to_pylist()) == list(range(30))
    again = evaluate("tests.eval_targets:echo_agent", _prompts(30), output="s3://evals/run1", filesystem=s3,
                     pool_size=1)
    assert again["rows"] == 30 and again["rows_this_run"] == 0


def test_a_host_killed_mid_run_loses_and_duplicates_no_row(tmp_path: Path) -> None:
    import signal
    import threading
    import time

    import ray

    marks = tmp_path / "marks"
    marks.mkdir()
    rows = ray.data.range(200).map(lambda r, d=str(marks): {"prompt": f"{d}|{r['id']}"})
    out = tmp_path / "killed"
    outcome: dict[str, Any] = {}

    def run() -> None:
        outcome["summary"] = evaluate("tests.eval_targets:marking_agent", rows, output=str(out), pool_size=2,
                                      concurrency=10)

    runner = threading.Thread(target=run)
    runner.start()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(p.stat().st_size >= 15 for p in marks.iterdir()):
        time.sleep(0.1)
    victim = next(int(p.name) for p in marks.iterdir() if p.stat().st_size >= 15)
    os.kill(victim, signal.SIGKILL)  # mid-batch: its batch runs again on another host
    runner.join(timeout=600)
    assert "summary" in outcome
    table = _records(out)
    assert sorted(table.column("index").to_pylist()) == list(range(200))
    assert table.column("error").null_count == 200 and outcome["summary"]["errors"] == 0


def test_a_rate_limit_holds_across_two_hosts(tmp_path: Path) -> None:
    from ray_harness.evaluation import RateLimit
    from ray_harness.runtime import AgentPool

    pool = AgentPool(size=2, namespace="ray_harness_tests_rate")
    try:
        out = tmp_path / "stamps.jsonl"
        evaluate("tests.eval_targets:stamp_agent", [{"prompt": f"s{i}"} for i in range(30)], output=str(out),
                 pool=pool, concurrency=30, rate_limits={"scriptedmodel:stamp": RateLimit(requests_per_minute=300)})
        import json

        calls = [json.loads(line)["output"].split() for line in out.read_text().splitlines()]
    finally:
        pool.shutdown()
    assert len({pid for _, pid in calls}) == 2  # both hosts called the model
    starts = sorted(float(stamp) for stamp, _ in calls)
    # 5 calls/s with a bucket of one second: no window of one second holds more than 5 + 5 calls.
    for i, start in enumerate(starts):
        assert sum(1 for s in starts[i:] if s < start + 1.0) <= 10


def test_aimd_shrinks_the_shared_rate_under_throttling_and_grows_it_back(tmp_path: Path) -> None:
    import ray

    from ray_harness.evaluation import RateLimit
    from ray_harness.runtime._rate_limit import bucket_actor

    limit = RateLimit(requests_per_minute=6000)
    limits = {"scriptedmodel:aimd": limit}
    throttled = evaluate("tests.eval_targets:always_throttled_agent", [{"prompt": f"t{i}"} for i in range(6)],
                         runtime="local", rate_limits=limits, max_throttle_retries=0)
    assert throttled["errors"] == 6
    # runtime="local" in a driver with Ray: the bucket is still the cluster's actor.
    shrunk = ray.get(bucket_actor("scriptedmodel:aimd", limit).state.remote())
    assert shrunk["factor"] < 0.1
    evaluate("tests.eval_targets:always_throttled_agent", [{"prompt": f"ok{i}"} for i in range(10)],
             runtime="local", rate_limits=limits)
    grown = ray.get(bucket_actor("scriptedmodel:aimd", limit).state.remote())
    assert grown["factor"] > shrunk["factor"]


def test_a_remote_agent_draws_from_the_cluster_bucket() -> None:
    import ray

    from ray_harness.runtime import RemoteAgent

    remote = RemoteAgent("tests.eval_targets:limited_agent")
    assert str(remote("hi")).strip() == "limited"
    bucket = ray.get_actor("ray_harness:rate:remote-agent-bucket")  # created by the model call in the actor
    assert ray.get(bucket.state.remote())["requests_per_minute"] == pytest.approx(600)


def _whole_parts(out: Path) -> list[int]:
    """The indexes recorded in ``out``; fails on a part that is not a whole Parquet file."""
    import pyarrow.parquet as pq

    indexes: list[int] = []
    for part in sorted(out.rglob("*.parquet")):
        indexes += pq.read_table(str(part), columns=["index"]).column("index").to_pylist()
    return sorted(indexes)


def _wait_for(condition: Any, what: str) -> None:
    import time

    deadline = time.monotonic() + 300
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.timeout(900)  # three Ray Data runs on a loaded machine
def test_cancel_and_ctrl_c_keep_finished_rows_and_a_resume_records_every_row_once(tmp_path: Path) -> None:
    import signal
    import threading

    import ray

    marks = tmp_path / "marks"
    marks.mkdir()
    # One block per batch of 8; in each, rows 0-3 answer at once and rows 4-7 wait at the gate: every batch
    # that starts has finished rows and rows in flight, whichever batches Ray Data runs first.
    rows = ray.data.from_items([{"prompt": f"{marks}|{i}", "qid": f"id{i}"} for i in range(80)],
                               override_num_blocks=10)
    out = tmp_path / "cancelled"

    def numbers(kind: str) -> set[int]:
        return {int(p.name.split("-")[1]) for p in marks.glob(f"{kind}-*")}

    def a_batch_half_done() -> bool:
        answered, waiting = numbers("answered"), numbers("waiting")
        return any({8 * k + i for i in range(4)} <= answered and waiting & {8 * k + i for i in range(4, 8)}
                   for k in range(10))

    # 1. cancel_event, set while a batch has finished rows and rows in flight.
    cancel = threading.Event()

    def cancel_when_ready() -> None:
        _wait_for(a_batch_half_done, "no batch got half done")
        cancel.set()

    setter = threading.Thread(target=cancel_when_ready, daemon=True)
    setter.start()
    summary = evaluate("tests.eval_targets:gate_path_agent", rows, output=str(out), id_key="qid", pool_size=2,
                       concurrency=8, cancel_event=cancel)
    setter.join()
    recorded = _whole_parts(out)
    assert summary["cancelled"] is True and summary["errors"] == 0 and summary["rows"] == len(recorded)
    # What finished before the cancel is written; rows in flight are not recorded (as failures or at all).
    assert recorded and set(recorded) <= numbers("answered")
    assert len(set(recorded)) == len(recorded) and all(i % 8 < 4 for i in recorded)

    # 2. Ctrl-C (a real SIGINT to this process) while rows wait: KeyboardInterrupt, nothing half-written.
    for mark in marks.glob("waiting-*"):
        mark.unlink()

    def interrupt_when_waiting() -> None:
        _wait_for(lambda: bool(numbers("waiting")), "no row of the resumed run started")
        os.kill(os.getpid(), signal.SIGINT)

    interrupter = threading.Thread(target=interrupt_when_waiting, daemon=True)
    interrupter.start()
    with ctrl_c_raises(), pytest.raises(KeyboardInterrupt):
        evaluate("tests.eval_targets:gate_path_agent", rows, output=str(out), id_key="qid", pool_size=2,
                 concurrency=8)
    interrupter.join()
    recorded = _whole_parts(out)
    assert len(set(recorded)) == len(recorded) and all(i % 8 < 4 for i in recorded)

    # 3. The gate opens; the same output resumes by id and completes every row exactly once.
    (marks / "gate").touch()
    resumed = evaluate("tests.eval_targets:gate_path_agent", rows, output=str(out), id_key="qid", pool_size=2,
                       concurrency=8)
    assert resumed["rows"] == 80 and resumed["rows_this_run"] == 80 - len(recorded) and resumed["errors"] == 0
    assert resumed["cancelled"] is False
    assert _whole_parts(out) == list(range(80))
    qids = [r["qid"] for r in _records(out).column("input").to_pylist()]
    assert sorted(qids) == sorted(f"id{i}" for i in range(80))


@pytest.mark.parametrize(("target", "key"), [("stamp_agent", "scriptedmodel:stamp"),
                                             ("delegating_target", "scriptedmodel:substamp")])
def test_rate_limits_reach_ray_data_hosts_and_a_rows_remote_agent_across_two_hosts(tmp_path: Path, target: str,
                                                                                      key: str) -> None:
    import ray

    from ray_harness.evaluation import RateLimit

    rows = ray.data.from_items([{"prompt": f"s{i}"} for i in range(30)], override_num_blocks=6)
    out = tmp_path / "stamps"
    summary = evaluate(f"tests.eval_targets:{target}", rows, output=str(out), pool_size=2, concurrency=5,
                       rate_limits={key: RateLimit(requests_per_minute=300)})
    assert summary["rows"] == 30 and summary["errors"] == 0
    table = _records(out)
    calls = [output.split() for output in table.column("output").to_pylist()]
    hosts = set(table.column("pid").to_pylist())
    callers = {int(pid) for _, pid in calls}
    assert len(hosts) == 2  # two Ray Data hosts ran rows
    if target == "delegating_target":
        # The model calls ran in the hosts' RemoteAgent actors, which drew from the cluster's bucket.
        assert len(callers) == 2 and not callers & hosts
        assert ray.get(ray.get_actor(f"ray_harness:rate:{key}").state.remote())["requests_per_minute"] == 300
    starts = sorted(float(stamp) for stamp, _ in calls)
    # 5 calls/s with a bucket of one second: no window of one second holds more than 5 + 5 calls.
    for i, start in enumerate(starts):
        assert sum(1 for s in starts[i:] if s < start + 1.0) <= 10
