from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ray_harness.cli import main
from tests.signals import ctrl_c_once_recorded

ROOT = Path(__file__).resolve().parents[2]


def test_demo_local_writes_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--local", "--rows", "6", "--output-dir", str(tmp_path / "demo")])
    out = capsys.readouterr().out
    assert code == 0
    records = [json.loads(line) for line in (tmp_path / "demo" / "results.jsonl").read_text().splitlines()]
    assert len(records) == 6 and all(r["status"] == "completed" for r in records)
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert summary["keyword_score"] == 1.0
    assert "results:" in out and "rows 6" in out


def test_eval_and_run_local(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    out = tmp_path / "r.jsonl"
    assert main(["eval", "tests.eval_targets:echo_agent", str(data), "--local", "--output", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 2
    assert main(["run", "tests.eval_targets:tool_agent", "hello"]) == 0
    printed = capsys.readouterr().out
    assert "[tool] shout" in printed and "tool said HELLO" in printed


def test_run_prints_a_graphs_handoffs_without_a_trailing_space(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "tests.eval_targets:chain_graph", "go"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "[handoff ['research'] → ['analyze']]" in lines  # a Graph's handoff has no message: was "...] "


def test_run_of_a_function_that_builds_no_agent_is_an_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``ray-harness run os:getcwd hi`` ended in an AttributeError traceback ('str' has no 'stream_async')."""
    assert main(["run", "os:getcwd", "hi"]) == 2
    assert capsys.readouterr().err == "error: target 'os:getcwd' returned str, not an Agent, Graph or Swarm\n"


def test_eval_run_again_says_the_recorded_rows_were_skipped(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The second run of the same command printed "rows 2 ... 0.0 rows/s" and nothing about resuming."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    out = tmp_path / "r.jsonl"
    command = ["eval", "tests.eval_targets:echo_agent", str(data), "--local", "--output", str(out)]
    assert main(command) == 0
    assert "resumed:" not in capsys.readouterr().out
    data.write_text('{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": "c"}\n')
    assert main(command) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("rows 3  errors 0  ")
    assert lines[1] == ("resumed: 2 of the 3 rows were already in the output and did not run again (rows/s counts "
                        "this run's; --no-resume runs every row)")
    assert main([*command, "--no-resume"]) == 0
    assert "resumed:" not in capsys.readouterr().out


_TARGETS = """
from ray_harness import Agent, ToolContext, tool
from ray_harness.testing import ScriptedModel, text, tool_call


@tool(context=True)
def refund(amount: int, tool_context: ToolContext) -> str:
    \"\"\"Refund.\"\"\"
    tool_context.interrupt("approve", reason={"amount": amount})
    return "refunded"


def echo():
    return Agent(ScriptedModel(text("from the working dir")))


def asking():
    return Agent(ScriptedModel(tool_call("refund", {"amount": 30}), text("done")), tools=[refund])


def score(row, result):
    return 1.0
"""


def test_targets_and_scorers_import_from_the_working_directory_like_python_m(tmp_path: Path) -> None:
    # A console script's sys.path starts at its bin directory; the CLI adds the working directory itself.
    work, bin_dir = tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_dir.mkdir()
    (work / "my_targets.py").write_text(_TARGETS)
    (work / "d.jsonl").write_text('{"prompt": "a"}\n')
    script = bin_dir / "ray-harness"
    script.write_text("import sys\nfrom ray_harness.cli import main\nsys.exit(main())\n")

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(script), *argv], cwd=work, capture_output=True, text=True,
                              timeout=120)

    ran = cli("run", "my_targets:echo", "hi")
    assert ran.returncode == 0, ran.stderr
    assert "from the working dir" in ran.stdout
    evaluated = cli("eval", "my_targets:echo", "d.jsonl", "--local", "--scorer", "my_targets:score")
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads((work / "results.jsonl").read_text())["scores"] == {"score": 1.0}
    # A stop for a human shows what is asked and the id to answer it with.
    asked = cli("run", "my_targets:asking", "refund 30")
    assert asked.returncode == 0, asked.stderr
    assert "[interrupt]" in asked.stdout
    line = next(line for line in asked.stdout.splitlines() if line.startswith("[interrupt "))
    assert line.endswith('approve: {"amount": 30}')
    unknown = cli("eval", "my_targets:echo", "d.jsonl", "--local", "--scorer", "my_targets:nope")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: scorer 'my_targets:nope'")


@pytest.mark.parametrize(("argv", "excluded"), [
    (["eval", "m:f", "d.jsonl"], ["/results.jsonl"]),
    (["eval", "m:f", "d.jsonl", "--output", "./out/r.parquet"], ["/out/r.parquet"]),
    (["eval", "m:f", "d.jsonl", "--output", "/abs/r.jsonl"], []),
    (["run", "m:f", "hi"], []),
])
def test_a_submitted_eval_does_not_ship_the_local_results_it_would_resume_from(argv: list[str],
                                                                               excluded: list[str]) -> None:
    from ray_harness.cli._jobs import outputs_of

    assert outputs_of(argv) == excluded


@pytest.mark.parametrize("argv", [["eval", "nomodule:x", "d.jsonl", "--local"], ["run", "no_colon", "hi"],
                                  ["eval", "tests.eval_targets:echo_agent", "missing.jsonl", "--local"],
                                  ["submit"]])
def test_user_errors_exit_2_without_traceback(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err


def test_usage_errors_and_help() -> None:
    bad = subprocess.run([sys.executable, "-m", "ray_harness.cli", "eval"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage:" in bad.stderr
    for command in ("demo", "run", "eval", "submit", "jobs", "status", "dashboard"):
        shown = subprocess.run([sys.executable, "-m", "ray_harness.cli", command, "--help"], capture_output=True,
                               text=True)
        assert shown.returncode == 0 and "usage: ray-harness" in shown.stdout


def test_cluster_configs_have_required_fields() -> None:
    aws = yaml.safe_load((ROOT / "cluster/aws.yaml").read_text())
    for key in ("cluster_name", "provider", "available_node_types", "head_node_type", "head_start_ray_commands"):
        assert key in aws
    assert aws["head_node_type"] in aws["available_node_types"]
    assert all("RAY_AUTH_MODE=token" in c for c in aws["head_start_ray_commands"] if "ray start" in c)
    cluster = yaml.safe_load((ROOT / "cluster/kuberay/raycluster.yaml").read_text())
    assert (cluster["apiVersion"], cluster["kind"]) == ("ray.io/v1", "RayCluster")
    assert cluster["spec"]["headGroupSpec"]["rayStartParams"]["dashboard-host"] == "127.0.0.1"
    assert cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"]
    job = yaml.safe_load((ROOT / "cluster/kuberay/rayjob.yaml").read_text())
    assert job["kind"] == "RayJob" and job["spec"]["entrypoint"].startswith("ray-harness eval")
    assert "RAY_AUTH_MODE" in job["spec"]["runtimeEnvYAML"]
    script = (ROOT / "cluster/local.sh").read_text()
    assert "RAY_AUTH_MODE" in script and "--dashboard-host=127.0.0.1" in script


def test_eval_says_how_many_rows_stopped_for_a_human(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows stopped by an interrupt printed as "errors 0" and nothing else: they looked answered."""
    data = tmp_path / "ask.jsonl"
    data.write_text('{"prompt": "ask a"}\n{"prompt": "plain"}\n{"prompt": "ask b"}\n')
    assert main(["eval", "tests.eval_targets:approval_agent", str(data), "--local", "--output",
                 str(tmp_path / "o.jsonl")]) == 0  # not failed rows
    out = capsys.readouterr().out
    assert "errors 0" in out and "interrupted 2 (stopped for a human" in out, out


def test_eval_interrupted_says_where_the_finished_rows_are_and_how_to_resume(tmp_path: Path) -> None:
    """Ctrl-C printed only "interrupted": nothing said the rows were kept or that running it again resumes."""
    data, out, gate = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "gate"
    data.write_text("".join(json.dumps({"prompt": f"q{i}"}) + "\n" for i in range(12)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]), "RAY_HARNESS_TEST_GATE": str(gate)}
    returncode, stderr = ctrl_c_once_recorded(  # rows q0-q7 answer at once, the others wait for the gate
        [sys.executable, "-m", "ray_harness.cli", "eval", "tests.eval_targets:gated_agent", str(data), "--local",
         "--output", str(out)], env, out, 8)
    assert returncode == 130, stderr
    assert f"interrupted: the finished rows are in {out}; the same command (without --no-resume) runs the rest" \
        in stderr, stderr


def test_eval_of_only_failing_rows_prints_no_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "boom.jsonl"
    data.write_text('{"prompt": "boom"}\n')
    main(["eval", "tests.eval_targets:echo_agent", str(data), "--local", "--output", str(tmp_path / "o.jsonl")])
    out = capsys.readouterr().out
    assert "nan" not in out.lower() and "p50 latency -" in out


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.jsonl", "a/../../b", ""])
def test_submit_download_paths_stay_inside_the_jobs_working_dir(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "--download", path, "--", "eval", "m:f", "d.jsonl"]) == 2
    assert "--download" in capsys.readouterr().err


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.jsonl", "a/../../b", ""])
def test_jobs_download_paths_stay_inside_the_jobs_working_dir(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "download", "raysubmit_rh_x", path]) == 2  # refused before anything is contacted
    assert f"{path!r}: give a path relative to the job's working directory" in capsys.readouterr().err


def test_submit_download_needs_to_wait_for_the_job(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "--no-wait", "--download", "results.jsonl", "--", "eval", "m:f", "d.jsonl"]) == 2
    assert "--no-wait" in capsys.readouterr().err


def test_dashboard_install_copies_into_the_sessions_grafana_dir(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    dashboards = tmp_path / "session_latest" / "metrics" / "grafana" / "dashboards"
    dashboards.mkdir(parents=True)
    assert main(["dashboard", "install", "--temp-dir", str(tmp_path)]) == 0
    installed = json.loads((dashboards / "ray_harness_grafana_dashboard.json").read_text())
    assert installed["uid"] == "ray-harness" and installed["panels"]
    assert "/d/ray-harness" in capsys.readouterr().out
    assert main(["dashboard", "install", "--session-dir", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_status_text_shows_runs_with_their_progress() -> None:
    from ray_harness.cli._status import status_text

    graph = {"run": "r1", "kind": "graph", "name": "report", "status": "running", "nodes_done": {"research": "completed"},
             "nodes_running": ["write"], "nodes_pending": 1, "input_tokens": 40, "output_tokens": 10,
             "cost_usd": 0.0012, "age_s": 12.0, "rows_completed": 0, "rows_failed": 0}
    evaluation = {**graph, "run": "r2", "kind": "eval", "name": "nightly", "rows_completed": 7, "rows_failed": 1}
    text = status_text({"runs": [graph, evaluation], "actors": [], "jobs": [], "unavailable": "no dashboard"})
    assert text.splitlines()[0] == "2 run(s) in progress"
    assert "nodes 1 done, 1 running (write), 1 pending  tokens 50  $0.0012  age 12s  run r1" in text
    assert "rows 7 done, 1 failed" in text and "(no dashboard)" in text


def test_eval_with_a_failing_scorer_says_so_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    code = main(["eval", "tests.eval_targets:echo_agent", str(data), "--local", "--output", str(tmp_path / "o.jsonl"),
                 "--scorer", "tests.eval_targets:echo_agent"])  # a factory, not f(row, result): it raises TypeError
    assert code == 1
    assert "scorer errors 2" in capsys.readouterr().out


def test_demo_leaves_a_summary_json_of_the_users_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "summary.json").write_text('{"mine": 1}')
    assert main(["demo", "--local", "--rows", "1", "--output-dir", str(tmp_path)]) == 2
    assert "summary.json is not the summary of an evaluation" in capsys.readouterr().err
    assert (tmp_path / "summary.json").read_text() == '{"mine": 1}' and not (tmp_path / "results.jsonl").exists()


@pytest.mark.parametrize("argv", [["eval", "m:f", "d.jsonl", "--concurrency", "0"],
                                  ["eval", "m:f", "d.jsonl", "--pool-size", "-1"], ["demo", "--rows", "0"],
                                  ["submit", "--", "eval", "m:f", "d.jsonl", "--concurrency", "0"],
                                  ["submit", "--", "eval", "m:f"]])
def test_bad_counts_and_bad_job_commands_are_usage_errors_before_anything_starts(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:  # argparse's usage error: nothing started, nothing submitted
        main(argv)
    assert exited.value.code == 2 and "usage: ray-harness" in capsys.readouterr().err


def test_status_text_leaves_dead_actors_out() -> None:
    """Ray keeps every ended driver's hosts listed as DEAD: they buried the live actors in the text view."""
    from ray_harness.cli._status import status_text

    actors = [{"name": "ray_harness:agent:refunds", "state": "ALIVE", "pid": 7, "node_id": "n" * 20},
              *({"name": "ray_harness:host:0", "state": "DEAD", "pid": pid, "node_id": "n" * 20} for pid in (1, 2, 3))]
    text = status_text({"runs": [], "actors": actors, "jobs": []})
    assert "1 ray_harness actor(s) (3 dead not shown; --json lists them)" in text
    assert "ray_harness:agent:refunds" in text and "ray_harness:host:0" not in text


def test_status_text_says_how_long_an_ended_run_took_and_when_it_ended() -> None:
    """An ended run's ``age_s`` is its duration: the text said "age 0s" for a quick run that ended minutes ago."""
    import time

    from ray_harness.cli._status import status_text

    ended = {"run": "r3", "kind": "eval", "name": "nightly", "status": "completed", "nodes_done": {},
             "nodes_running": [], "nodes_pending": 0, "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0,
             "age_s": 2.0, "started_at": time.time() - 302, "ended_at": time.time() - 300, "rows_completed": 2,
             "rows_failed": 0}
    line = status_text({"runs": [ended], "actors": [], "jobs": []}).splitlines()[1]
    assert "took 2s, ended 300s ago" in line or "took 2s, ended 301s ago" in line
    assert "age" not in line


def test_status_text_says_which_nodes_did_not_complete() -> None:
    """A cancelled graph's text read "nodes 2 done" like a completed one's: the nodes say how they ended."""
    from ray_harness.cli._status import status_text

    cancelled = {"run": "r4", "kind": "graph", "name": "review", "status": "cancelled",
                 "nodes_done": {"first": "completed", "held": "cancelled", "check": "failed"}, "nodes_running": [],
                 "nodes_pending": 0, "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0, "age_s": 2.0,
                 "rows_completed": 0, "rows_failed": 0}
    line = status_text({"runs": [cancelled], "actors": [], "jobs": []}).splitlines()[1]
    assert " cancelled   nodes 3 done (held cancelled, check failed), 0 running, 0 pending" in line


@pytest.mark.parametrize(("entrypoint", "shown"), [
    ("python -m ray_harness.runtime._job_files raysubmit_rh_1 -- ray-harness eval a:b d.jsonl",
     "ray-harness eval a:b d.jsonl"),
    ("python -m ray_harness.runtime._job_files raysubmit_rh_2 --resume raysubmit_rh_1 -- ray-harness demo",
     "ray-harness demo"),
    ("python train.py -- --epochs 3", "python train.py -- --epochs 3"),  # not ours: as it is
])
def test_status_lists_a_job_by_the_command_submitted_not_its_wrapper(entrypoint: str, shown: str) -> None:
    from ray_harness.runtime._job_files import submitted_command

    assert submitted_command(entrypoint) == shown
