"""Every job submitted with ``ray-harness submit`` works in a directory of its own on the head.

Ray extracts a job's working_dir once per content, so jobs from an unchanged directory used to share one copy:
a second ``eval --output results.jsonl`` resumed from the first job's results and ran nothing. A job is resumed
only when asked (``submit --resume <job id>``); ``ray-harness jobs download`` fetches a job's files later and
``ray-harness jobs logs`` prints its log.
The cluster is a single node (``cluster/local.sh up 0``, private ports and state dir): Ray Jobs need a head whose
dashboard agent has its own ports, which an embedded ``ray.init`` cannot be given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration._local_cluster import ROOT, local_cluster

pytestmark = [pytest.mark.ray, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def head() -> Iterator[dict[str, Any]]:
    with local_cluster(workers=0) as started:
        yield started


def _project(root: Path, rows: int, release: Path) -> Path:
    """A user's project; each host process tags its outputs, so a row run again is told from a row resumed."""
    (root / "my_pkg").mkdir(parents=True)
    (root / "my_pkg/__init__.py").write_text("")
    (root / "my_pkg/targets.py").write_text(
        textwrap.dedent(f"""
        import os, time, uuid
        from ray_harness import Agent
        from ray_harness.testing import ScriptedModel, text

        TAG = uuid.uuid4().hex[:8]  # one per process: a job's hosts are its own

        def build():
            return Agent(ScriptedModel(lambda call: text(f"{{call.last_text}} by {{TAG}}"), record_calls=False),
                         name="tagged")

        def held():
            while not os.path.exists({str(release)!r}):  # the test lets it go
                time.sleep(0.2)
            return build()
    """)
    )
    _rows(root, rows)
    return root


def _rows(root: Path, rows: int) -> None:
    (root / "data.jsonl").write_text("".join(json.dumps({"prompt": f"row {i}"}) + "\n" for i in range(rows)))


def _cli(head: dict[str, Any], project: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "token"}
    env.pop("RAY_ADDRESS", None)
    words = 2 if argv[0] == "jobs" else 1  # the (sub)command, then its --address
    return subprocess.run(
        [sys.executable, "-m", "ray_harness.cli", *argv[:words], "--address", head["dashboard"], *argv[words:]],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _submitted_eval(head: dict[str, Any], project: Path, back: Path, *submit: str) -> tuple[str, list[dict[str, Any]]]:
    done = _cli(
        head,
        project,
        "submit",
        *submit,
        "--download",
        "results.jsonl",
        "--download-dir",
        str(back),
        "--",
        "eval",
        "my_pkg.targets:build",
        "data.jsonl",
        "--output",
        "results.jsonl",
    )
    shown = done.stdout[-4000:] + done.stderr[-4000:]
    assert done.returncode == 0 and "SUCCEEDED" in done.stdout, shown
    job_id = done.stdout.split("submitted ", 1)[1].split()[0]
    return job_id, [json.loads(line) for line in (back / "results.jsonl").read_text().splitlines()]


def _tags(records: list[dict[str, Any]]) -> set[str]:
    return {record["output"].rsplit(" by ", 1)[1].strip() for record in records}


def test_a_second_job_from_an_unchanged_directory_runs_every_row_and_resume_is_asked_for(
    head: dict[str, Any], tmp_path: Path
) -> None:
    project = _project(tmp_path / "project", 3, tmp_path / "release")
    first_id, first = _submitted_eval(head, project, tmp_path / "first")
    second_id, second = _submitted_eval(head, project, tmp_path / "second")
    assert first_id != second_id
    assert sorted(r["index"] for r in second) == [0, 1, 2]
    assert not _tags(first) & _tags(second), (first, second)  # run again by the second job's hosts, not resumed

    _rows(project, 5)  # the dataset grew; the first job is resumed deliberately
    _, resumed = _submitted_eval(head, project, tmp_path / "resumed", "--resume", first_id)
    by_index = {r["index"]: r for r in resumed}
    assert sorted(by_index) == [0, 1, 2, 3, 4], resumed
    assert [by_index[i] for i in range(3)] == sorted(first, key=lambda r: r["index"])  # kept, not run again
    assert not {by_index[3]["output"], by_index[4]["output"]} & {r["output"] for r in first}


def test_the_files_of_a_job_submitted_without_waiting_are_downloaded_later(
    head: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = tmp_path / "release"
    project = _project(tmp_path / "project", 2, release)
    submitted = _cli(
        head,
        project,
        "submit",
        "--no-wait",
        "--",
        "eval",
        "my_pkg.targets:held",
        "data.jsonl",
        "--output",
        "out.parquet",
    )
    assert submitted.returncode == 0, submitted.stderr[-4000:]
    job_id = submitted.stdout.split("submitted ", 1)[1].split()[0]
    assert f"ray-harness jobs download {job_id} <path>" in submitted.stderr

    refused = _cli(head, project, "submit", "--resume", job_id, "--", "eval", "my_pkg.targets:build", "data.jsonl")
    assert refused.returncode == 2 and f"--resume {job_id}: that job is still" in refused.stderr, refused.stderr

    release.touch()
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # the job client of this process sends the cluster's token
    _wait_ended(head, job_id)
    fetched = _cli(head, project, "jobs", "download", job_id, "out.parquet", "--download-dir", str(tmp_path / "back"))
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "back/out.parquet")
    assert sorted(table.column("index").to_pylist()) == [0, 1]

    logged = _cli(head, project, "jobs", "logs", job_id)
    assert logged.returncode == 0 and f"ray-harness: job {job_id} works in" in logged.stdout, logged.stderr
    assert "rows 2  errors 0" in logged.stdout, logged.stdout[-4000:]
    missing = _cli(head, project, "jobs", "download", job_id, "results.jsonl", "--download-dir", str(tmp_path))
    assert missing.returncode == 1 and "no such file or directory" in missing.stderr, missing.stderr
    unknown = _cli(head, project, "jobs", "download", "raysubmit_rh_nosuchjob", "out.parquet")
    assert unknown.returncode == 2 and "job 'raysubmit_rh_nosuchjob' does not exist" in unknown.stderr, unknown.stderr
    from ray_harness.runtime.jobs import job_client

    plain = job_client(head["dashboard"]).submit_job(entrypoint="true")  # not through ray-harness submit
    _wait_ended(head, plain)
    no_dir = _cli(head, project, "submit", "--resume", plain, "--", "eval", "my_pkg.targets:build", "data.jsonl")
    assert no_dir.returncode == 2 and f"--resume {plain}: that job has no working directory" in no_dir.stderr, (
        no_dir.stderr
    )
    resume_unknown = _cli(head, project, "submit", "--resume", "raysubmit_rh_nosuchjob", "--", "eval", "m:f", "d.jsonl")
    assert resume_unknown.returncode == 2 and "does not exist" in resume_unknown.stderr, resume_unknown.stderr


def _wait_ended(head: dict[str, Any], job_id: str) -> None:
    from ray_harness.runtime.jobs import job_client

    client = job_client(head["dashboard"])
    deadline = time.monotonic() + 600
    while not client.get_job_status(job_id).is_terminal():
        assert time.monotonic() < deadline, f"job {job_id} did not end"
        time.sleep(1)
    assert str(client.get_job_status(job_id)) == "SUCCEEDED", client.get_job_logs(job_id)[-4000:]
