"""The ``ray-harness`` command line.

Commands: ``demo``, ``run``, ``eval``, ``submit``, ``jobs``, ``dashboard``, ``status``, ``cancel``, ``serve``.

User mistakes (a bad target, a missing file, a bad option) and no cluster to connect to print one ``error:``
line and exit 2; a failed evaluation (a row failed in its target or a scorer), an evaluation stopped by
``ray-harness cancel``, a failed job, or a ``cancel`` that cancelled nothing exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

__all__ = ["main"]

_USER_ERRORS = (ValueError, TypeError, FileNotFoundError, ImportError, KeyError, ConnectionError)
# Not shipped with a job's working_dir: VCS data, caches and local outputs.
_EXCLUDES = [".git", ".hypothesis", ".mypy_cache", ".ruff_cache", ".pytest_cache", "__pycache__", "*.egg-info",
             "ray_harness_demo", "benchmarks/results"]


def main(argv: list[str] | None = None) -> int:
    """Run the ``ray-harness`` command line on ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = _parser()
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ray-harness", description="Agent harness on Ray.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser("demo", help="run the offline demo evaluation on an embedded local Ray",
                               description="Evaluate researcher → 2 parallel analysts → writer over a bundled "
                                           "dataset on a pool of Ray host actors. No API key needed.")
    demo.add_argument("--model", help="use a real provider for every node, e.g. anthropic:claude-sonnet-4-5")
    demo.add_argument("--max-tokens", type=_positive_int, default=512,
                      help="output cap of each model call when the --model spec sets no ?max_tokens= (default 512)")
    demo.add_argument("--output-dir", default="ray_harness_demo", help="where results go (default ./ray_harness_demo)")
    demo.add_argument("--rows", type=_positive_int, default=None, help="evaluate only the first N rows")
    demo.add_argument("--concurrency", type=_positive_int, default=16, help="rows in flight (default 16)")
    demo.add_argument("--pool-size", type=_positive_int, default=2, help="Ray host actors (default 2)")
    demo.add_argument("--address", help="Ray address to join (default: RAY_ADDRESS, else an embedded local Ray)")
    demo.add_argument("--dashboard", action="store_true", help="start the Ray dashboard with the embedded Ray")
    demo.add_argument("--local", action="store_true", help="run in this process instead of on Ray")
    demo.set_defaults(handler=_demo)

    run = commands.add_parser("run", help="stream one agent/graph/swarm run to the terminal")
    run.add_argument("target", help="module:function building an Agent, Graph or Swarm")
    run.add_argument("prompt")
    run.set_defaults(handler=_run)

    ev = commands.add_parser("eval", help="evaluate a target over a dataset")
    ev.add_argument("target", help="module:function building an Agent, Graph or Swarm per row")
    ev.add_argument("dataset", help="JSONL, JSON (one array) or CSV file (a 'prompt' column/key per row)")
    ev.add_argument("--output", default="results.jsonl",
                    help="record file (.jsonl, or a .parquet directory); default results.jsonl")
    ev.add_argument("--concurrency", type=_positive_int, default=32, help="rows in flight (default 32)")
    ev.add_argument("--pool-size", type=_positive_int, default=2, help="Ray host actors (default 2)")
    ev.add_argument("--prompt-key", default="prompt", help="the row key holding the prompt (default prompt)")
    ev.add_argument("--scorer", action="append", default=[], help="module:function scorer (repeatable)")
    ev.add_argument("--no-resume", action="store_true", help="start over instead of skipping recorded rows")
    ev.add_argument("--address", help="Ray address to join")
    ev.add_argument("--local", action="store_true", help="run in this process instead of on Ray")
    ev.set_defaults(handler=_eval)

    submit = commands.add_parser("submit", help="run a ray-harness command as a Ray Job",
                                 description="Example: ray-harness submit -- eval my_pkg:build data.jsonl")
    submit.add_argument("--address", default=None,
                        help="dashboard URL, or the cluster's GCS address host:port (default RAY_ADDRESS, "
                             "else http://127.0.0.1:8265)")
    submit.add_argument("--working-dir", default=".", help="shipped to the cluster as the job's working_dir")
    submit.add_argument("--no-wait", action="store_true", help="print the job id and return")
    submit.add_argument("--download", action="append", default=[], metavar="PATH",
                        help="after the job, copy PATH (relative to the job's working dir, e.g. the eval's "
                             "--output) back here (repeatable)")
    submit.add_argument("--download-dir", default=".", help="where --download puts files (default .)")
    submit.add_argument("--resume", metavar="JOB_ID",
                        help="start the job in a copy of that earlier job's working dir (its outputs included), "
                             "e.g. to resume its eval; every job otherwise starts from the shipped dir alone")
    submit.add_argument("job", nargs=argparse.REMAINDER, help="-- followed by the ray-harness command")
    submit.set_defaults(handler=_submit)

    jobs = commands.add_parser("jobs", help="the files and the log of a job submitted with 'ray-harness submit'")
    jobs_commands = jobs.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)
    fetch = jobs_commands.add_parser("download", help="copy files of a job's working dir here (running or ended)",
                                     description="Example: ray-harness jobs download raysubmit_rh_... results.jsonl")
    fetch.add_argument("job_id", help="the submission id 'ray-harness submit' printed")
    fetch.add_argument("paths", nargs="+", metavar="PATH", help="relative to the job's working dir")
    fetch.add_argument("--address", default=None, help="as for submit (default RAY_ADDRESS, else "
                                                       "http://127.0.0.1:8265)")
    fetch.add_argument("--download-dir", default=".", help="where the files go (default .)")
    fetch.set_defaults(handler=_jobs_download)
    logs = jobs_commands.add_parser("logs", help="print a job's log (its command's output)",
                                    description="Example: ray-harness jobs logs raysubmit_rh_... --follow")
    logs.add_argument("job_id", help="the submission id 'ray-harness submit' printed")
    logs.add_argument("--follow", action="store_true", help="keep printing until the job ends")
    logs.add_argument("--address", default=None, help="as for submit (default RAY_ADDRESS, else "
                                                      "http://127.0.0.1:8265)")
    logs.set_defaults(handler=_jobs_logs)

    dashboard = commands.add_parser("dashboard", help="the ray_harness Grafana dashboard")
    dashboard_commands = dashboard.add_subparsers(dest="dashboard_command", metavar="ACTION", required=True)
    install = dashboard_commands.add_parser("install", help="copy it where the Ray head's Grafana loads dashboards",
                                            description="Run on the head node (Grafana reads the head's session dir).")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--session-dir", help="the Ray session dir (default: <temp dir>/session_latest)")
    where.add_argument("--temp-dir", default="/tmp/ray", help="Ray's temp dir on this node (default /tmp/ray; "
                                                               "cluster/local.sh: $RAY_HARNESS_CLUSTER_DIR/node0)")
    install.set_defaults(handler=_dashboard_install)

    status = commands.add_parser("status", help="runs in progress, ray_harness actors and jobs on a Ray cluster")
    status.add_argument("--address", default=None, help="Ray address (default RAY_ADDRESS or 'auto')")
    status.add_argument("--json", action="store_true", help="print one JSON object (runs, actors, jobs)")
    status.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    status.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes with --watch")
    status.set_defaults(handler=_status)

    cancel = commands.add_parser("cancel", help="cancel runs in progress on a Ray cluster (graph, swarm, evaluation)",
                                 description="Stops a run as graph.cancel() / swarm.cancel() does in the driver that "
                                             "started it: every running node is cancelled at once, the run ends "
                                             "CANCELLED and the driver's call returns its CANCELLED result. An "
                                             "evaluation stops as on Ctrl-C: rows in flight are cancelled, finished "
                                             "rows stay written (running it again resumes). Example: "
                                             "ray-harness cancel 3f2a9c0d1e4b5a6c")
    which = cancel.add_mutually_exclusive_group(required=True)
    which.add_argument("runs", nargs="*", default=[], metavar="RUN",
                       help="a run id as 'ray-harness status' prints it (or a unique prefix of one)")
    which.add_argument("--all", action="store_true", help="every run in progress")
    cancel.add_argument("--address", default=None, help="Ray address (default RAY_ADDRESS or 'auto')")
    cancel.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for the runs to end (default 60)")
    cancel.add_argument("--no-wait", action="store_true", help="send the cancel and return")
    cancel.set_defaults(handler=_cancel)

    serve = commands.add_parser("serve", help="serve an agent/graph/swarm over A2A 1.0 on Ray Serve",
                                description="Joins RAY_ADDRESS when set, else starts an embedded local Ray.")
    serve.add_argument("target", help="module:function building an Agent, Graph or Swarm per task")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--name", help="app and card name (default: from the function name)")
    serve.add_argument("--replicas", type=int, default=1)
    serve.add_argument("--task-store", help="file:///abs/dir or s3://bucket/prefix (default: in memory)")
    serve.add_argument("--auth-token-env", metavar="VAR", help="require the bearer token held in this variable")
    serve.set_defaults(handler=_serve)
    return parser


def _positive_int(text: str) -> int:
    """An argparse type: a bad count is a usage error before anything starts (not a Ray start, then an error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {value}")
    return value


def _init_ray(address: str | None, *, dashboard: bool = False) -> None:
    from ray_harness import runtime

    kwargs: dict[str, Any] = {"include_dashboard": True, "dashboard_host": "127.0.0.1"} \
        if dashboard and not address else {}
    runtime.init(address=address, **kwargs)


def _demo(args: argparse.Namespace) -> int:
    from ray_harness.demo import dataset_path, keyword_score
    from ray_harness.evaluation import evaluate

    if args.model:
        from ray_harness.models import from_string
        from ray_harness.models.selection import spec_with_defaults

        # A chatty model (a small local one) would otherwise run to its server's own cap on every call.
        args.model = spec_with_defaults(args.model, max_tokens=args.max_tokens)
        from_string(args.model)  # fail fast on a malformed spec, before starting Ray
        os.environ["RAY_HARNESS_DEMO_MODEL"] = args.model
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in dataset_path().read_text().splitlines() if line.strip()]
    if args.rows is not None:
        rows = rows[: max(0, args.rows)]
    output = out_dir / "results.jsonl"
    _check_summary_file(out_dir / "summary.json")
    dashboard = None
    if not args.local:
        _init_ray(args.address, dashboard=args.dashboard)
        if args.dashboard and not args.address:
            dashboard = "http://127.0.0.1:8265"
    print(f"ray-harness demo: {len(rows)} rows, graph researcher → (market_analyst ∥ risk_analyst) → writer, "
          f"model {args.model or 'offline (scripted)'}, runtime {'local' if args.local else 'ray'}")
    summary = evaluate("ray_harness.demo:build_demo_graph", rows, scorers=[keyword_score],
                       concurrency=args.concurrency, output=str(output), resume=False,
                       runtime="local" if args.local else "ray", pool_size=args.pool_size)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    _print_summary(summary)
    print(f"results: {output.resolve()}")
    print(f"summary: {(out_dir / 'summary.json').resolve()}")
    if dashboard:
        print(f"dashboard: {dashboard}")
    return _exit_code(summary)


def _check_summary_file(path: Path) -> None:
    """Refuse (before anything runs) an ``--output-dir`` whose ``summary.json`` is a file of the user's."""
    if not path.exists():
        return
    try:
        summary = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (ValueError, UnicodeDecodeError):
        summary = None
    if not (isinstance(summary, dict) and summary.keys() >= {"rows", "errors", "tokens", "scores"}):
        raise ValueError(f"{path} is not the summary of an evaluation; it was left untouched: "
                         "choose another --output-dir")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"  # None: no row completed


def _print_summary(summary: dict[str, Any]) -> None:
    tokens = summary["tokens"]
    print(f"rows {summary['rows']}  errors {summary['errors']}  tokens {tokens['total']} "
          f"(in {tokens['input']}, out {tokens['output']})  cost ${summary['cost_usd']:.4f}  "
          f"{summary['rows_per_s']:.1f} rows/s  p50 latency {_seconds(summary['latency_s']['p50'])}")
    if summary.get("interrupted"):  # not errors, but not answers either: they wait for a human
        print(f"interrupted {summary['interrupted']} (stopped for a human; each record's \"output\" lists its "
              "pending interrupts)")
    if summary.get("scorer_errors"):  # the rows completed, but their scores are missing: say so
        print(f"scorer errors {summary['scorer_errors']} (the records' \"error\" says which scorer failed and why)")
    for name, stats in summary["scores"].items():
        print(f"score {name}: mean {stats['mean']:.3f} (p50 {stats['p50']:.3f}, n={stats['count']})")


def _run(args: argparse.Namespace) -> int:
    from ray_harness.evaluation._backends import resolve_factory

    target = resolve_factory(args.target)()
    return asyncio.run(_stream(target, args.prompt))


async def _stream(target: Any, prompt: str) -> int:
    result = None
    async for event in target.stream_async(prompt):
        kind = event.get("type")
        if kind == "text_delta":
            print(event["data"], end="", flush=True)
        elif kind == "tool_start":
            print(f"\n[tool] {event['tool_use']['name']} {json.dumps(event['tool_use'].get('input'))}", flush=True)
        elif kind == "multiagent_node_start":
            print(f"\n[node {event.get('node_id')} started]", flush=True)
        elif kind == "multiagent_node_stream":
            inner = event.get("event") or {}
            if inner.get("type") == "text_delta":
                print(inner["data"], end="", flush=True)
        elif kind == "multiagent_handoff":
            print(f"\n[handoff {event.get('from_node_ids')} → {event.get('to_node_ids')}] {event.get('message', '')}",
                  flush=True)
        elif kind in ("result", "multiagent_result"):
            result = event.get("result")
    print()
    if result is not None:
        status = getattr(result, "stop_reason", None) or getattr(getattr(result, "status", None), "value", "")
        print(f"[{status}]")
        for pending in getattr(result, "interrupts", None) or []:  # what a human is asked, and the id to answer
            print(f"[interrupt {pending.id}] {pending.name}: {json.dumps(pending.reason, default=str)}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from ray_harness.evaluation import evaluate
    from ray_harness.evaluation._backends import import_named

    scorers: list[Any] = [import_named(spec, "scorer") for spec in args.scorer]
    if not args.local:
        _init_ray(args.address)
    try:
        summary = evaluate(args.target, args.dataset, scorers=scorers, concurrency=args.concurrency,
                           output=args.output, resume=not args.no_resume, prompt_key=args.prompt_key,
                           runtime="local" if args.local else "ray", pool_size=args.pool_size)
    except KeyboardInterrupt:  # evaluate() cancelled the rows in flight and wrote the finished ones: say where
        print(f"interrupted: the finished rows are in {Path(args.output).resolve()}; the same command (without "
              "--no-resume) runs the rest", file=sys.stderr)
        return 130
    _print_summary(summary)
    print(f"results: {Path(args.output).resolve()}")
    if summary.get("cancelled"):  # by `ray-harness cancel`: not a completed evaluation (a job ends FAILED)
        print(f"cancelled: the finished rows are in {Path(args.output).resolve()}; the same command (without "
              "--no-resume) runs the rest", file=sys.stderr)
        return 1
    return _exit_code(summary)


def _exit_code(summary: dict[str, Any]) -> int:
    """1 when a row failed, in its target or in a scorer (its scores are missing), else 0."""
    return 0 if summary["errors"] == 0 and not summary.get("scorer_errors") else 1


def _submit(args: argparse.Namespace) -> int:
    command = list(args.job)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ValueError("nothing to submit: use 'ray-harness submit -- <ray-harness command>'")
    if command[0] == "ray-harness":
        command = command[1:]
    # Through the interpreter rather than the console script: works wherever the package is importable.
    # Checked here, as the job would check it: a mistake in it is a usage error now, not a failed job later
    # (argparse prints it and exits 2; nothing is submitted).
    _parser().parse_args(command)
    command = ["python", "-m", "ray_harness.cli", *command]
    _check_downloads(args)
    from ray_harness.runtime.jobs import submit_and_follow

    excludes = [*_EXCLUDES, *_outputs_of(command[3:])]
    job_id, succeeded = submit_and_follow(_job_address(args), shlex.join(command),
                                          {"working_dir": args.working_dir, "excludes": excludes},
                                          wait=not args.no_wait, echo=lambda text: print(text, end="", flush=True),
                                          download=args.download, download_dir=args.download_dir,
                                          resume=args.resume)
    if not args.download and command[3:4] in (["eval"], ["demo"]):
        print("the results stay in the job's working dir on the cluster (the 'results:' path above is on the head "
              f"node); `ray-harness jobs download {job_id} <path>` copies them here", file=sys.stderr)
    return 0 if succeeded in (True, None) else 1


def _job_address(args: argparse.Namespace) -> str:
    # A GCS address (host:port, "auto") is passed as it is: Ray asks that cluster where its dashboard is.
    return str(args.address or os.environ.get("RAY_ADDRESS") or "http://127.0.0.1:8265")


def _jobs_logs(args: argparse.Namespace) -> int:
    from ray_harness.runtime.jobs import print_job_logs

    print_job_logs(_job_address(args), args.job_id, follow=args.follow,
                   echo=lambda text: print(text, end="", flush=True))
    return 0


def _jobs_download(args: argparse.Namespace) -> int:
    _check_relative("", args.paths)  # before anything is imported or contacted
    from ray_harness.runtime.jobs import download_job_files

    missing = []
    fetched = download_job_files(_job_address(args), args.job_id, args.paths, args.download_dir,
                                 echo=lambda text: missing.append(text))
    for path in fetched:
        print(f"downloaded {path}")
    for text in missing:
        print(text, end="", file=sys.stderr)
    return 0 if not missing else 1


def _outputs_of(command: list[str]) -> list[str]:
    """Exclude patterns for what the submitted command writes into its working dir.

    A local run's results there would travel with the job, which would then resume from them and skip
    every row it already had here.
    """
    if command[:1] != ["eval"]:
        return []
    output = _parser().parse_args(command).output  # checked by _submit before
    path = os.path.normpath(output)
    if os.path.isabs(path) or path.startswith(".."):
        return []
    return ["/" + Path(path).as_posix()]  # anchored at the working dir (gitignore syntax)


def _check_downloads(args: argparse.Namespace) -> None:
    """``--download`` paths must be relative to the job's working directory and stay inside it."""
    if args.download and args.no_wait:
        raise ValueError("--download needs to wait for the job to end: drop --no-wait (`ray-harness jobs "
                         "download <job id> <path>` copies the files of a job submitted with --no-wait)")
    _check_relative("--download ", args.download)


def _check_relative(option: str, paths: list[str]) -> None:
    for path in paths:
        parts = PurePosixPath(path).parts
        if not parts or PurePosixPath(path).is_absolute() or ".." in parts:
            raise ValueError(f"{option}{path!r}: give a path relative to the job's working directory "
                             "(no leading '/', no '..')")


def _dashboard_install(args: argparse.Namespace) -> int:
    from ray_harness.telemetry import grafana

    session = Path(args.session_dir) if args.session_dir else Path(args.temp_dir) / "session_latest"
    installed = grafana.install(session)
    grafana_host = os.environ.get("RAY_GRAFANA_HOST", "http://localhost:3000").rstrip("/")
    print(f"installed the ray_harness dashboard: {installed}")
    print(f"open it at {grafana_host}/d/{grafana.DASHBOARD_UID} (folder 'Ray' of a Grafana started with "
          f"--config {session.resolve() / 'metrics/grafana/grafana.ini'}); a running Grafana picks it up within "
          "seconds")
    print("no Prometheus/Grafana yet? `ray metrics launch-prometheus`, then `grafana-server --config <that "
          "grafana.ini> --homepath <grafana dir> web`; see https://docs.ray.io/en/latest/cluster/metrics.html")
    return 0


def _status(args: argparse.Namespace) -> int:
    from ray_harness.runtime.jobs import cluster_status

    address = args.address or os.environ.get("RAY_ADDRESS") or "auto"
    while True:
        status = cluster_status(address)
        if args.json:
            print(json.dumps(status, default=str), flush=True)
        else:
            if args.watch:
                print("\033[2J\033[H", end="")  # clear the terminal, cursor home
            print(_status_text(status), flush=True)
        if not args.watch:
            return 0
        try:
            time.sleep(max(0.2, args.interval))
        except KeyboardInterrupt:
            return 0


def _status_text(status: dict[str, Any]) -> str:
    running = [run for run in status["runs"] if run["status"] == "running"]
    lines = [f"{len(running)} run(s) in progress"]
    for run in status["runs"]:
        if run["kind"] == "eval":
            progress = f"rows {run['rows_completed']} done, {run['rows_failed']} failed"
        else:
            active = f" ({', '.join(run['nodes_running'])})" if run["nodes_running"] else ""
            # Nodes that did not complete say how they ended: a cancelled run's text looked like a completed one's.
            not_completed = [f"{node} {how}" for node, how in run["nodes_done"].items() if how != "completed"]
            unusual = f" ({', '.join(not_completed)})" if not_completed else ""
            progress = (f"nodes {len(run['nodes_done'])} done{unusual}, {len(run['nodes_running'])} running{active}, "
                        f"{run['nodes_pending']} pending")
        tokens = run["input_tokens"] + run["output_tokens"]
        # A run that ended: its age_s is how long it took (an "age 0s" read as "just started").
        ended = run.get("ended_at") if run["status"] != "running" else None
        age = f"took {run['age_s']:.0f}s, ended {max(0.0, time.time() - ended):.0f}s ago" if ended \
            else f"age {run['age_s']:.0f}s"
        lines.append(f"  {run['kind']:5s} {run['name']:24s} {run['status']:11s} {progress}  tokens {tokens}  "
                     f"${run['cost_usd']:.4f}  {age}  run {run['run']}")
    if status.get("unavailable"):
        lines.append(f"({status['unavailable']})")
    # Ray keeps dead actors listed (every driver's ended hosts, each a row): the text shows those that still run.
    actors = [actor for actor in status["actors"] if actor["state"] != "DEAD"]
    dead = len(status["actors"]) - len(actors)
    lines.append(f"{len(actors)} ray_harness actor(s)" + (f" ({dead} dead not shown; --json lists them)" if dead else ""))
    for actor in actors:
        lines.append(f"  {actor['name']:40s} {actor['state']:10s} pid={actor['pid']} node={actor['node_id'][:12]}")
    lines.append(f"{len(status['jobs'])} job(s)")
    for job in status["jobs"]:
        lines.append(f"  {job['id']}  {job['status']}  {job['entrypoint']}")
    return "\n".join(lines)


class _Runs(Protocol):
    """The cluster's runs, as ``cancel`` uses them (:class:`ray_harness.runtime._cancel_runs.ClusterRuns`)."""

    def snapshot(self) -> list[dict[str, Any]]: ...

    def request(self, run: str) -> None: ...

    def pending(self, run: str) -> bool: ...

    def withdraw(self, run: str) -> bool: ...


def _cancel(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        raise ValueError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    from ray_harness.runtime._cancel_runs import ClusterRuns

    address = args.address or os.environ.get("RAY_ADDRESS") or "auto"
    return _cancel_runs(ClusterRuns(address), args.runs, every=args.all, wait_s=0.0 if args.no_wait else args.timeout)


def _cancel_runs(cluster: _Runs, ids: list[str], *, every: bool, wait_s: float, poll_s: float = 0.25) -> int:
    """Cancel the runs ``ids`` names (``every``: all in progress); print what came of each. Returns the exit code.

    0: every run asked for was cancelled (with ``wait_s`` 0: its cancel was sent). 1: some run was not (no such
    run, ended already, not cancellable, ended otherwise, not ended within ``wait_s``).
    """
    runs = cluster.snapshot()
    if every:
        targets = [run for run in runs if run["status"] == "running"]
        if not targets:
            print("no run in progress: nothing to cancel")
            return 0
        failed = False
    else:
        targets, failed = _named_runs(runs, ids)
    cancellable = []
    for run in targets:
        if run["status"] != "running":
            ended = run.get("ended_at")
            when = f", {max(0.0, time.time() - ended):.0f}s ago" if ended else ""
            print(f"run {_label(run)} already ended: {run['status']}{when}", file=sys.stderr)
            failed = True
        elif not run.get("cancellable"):
            print(f"run {_label(run)} cannot be cancelled from here: the process running it takes no cancel "
                  "requests (a ray_harness older than this command)", file=sys.stderr)
            failed = True
        else:
            cancellable.append(run)
    for run in cancellable:  # all sent before any is waited for: they stop together
        cluster.request(run["run"])
    if not wait_s:
        for run in cancellable:
            print(f"cancel sent to run {_label(run)} ('ray-harness status' shows when it ends)")
        return 1 if failed else 0
    ended = _wait_for_end(cluster, [run["run"] for run in cancellable], wait_s, poll_s)
    for run in cancellable:
        line, ok = _cancel_outcome(cluster, run, ended.get(run["run"]), wait_s)
        print(line, file=sys.stdout if ok else sys.stderr)
        failed = failed or not ok
    return 1 if failed else 0


def _named_runs(runs: list[dict[str, Any]], ids: list[str]) -> tuple[list[dict[str, Any]], bool]:
    """The runs ``ids`` name, each once, and whether some id named none (said on stderr)."""
    targets: dict[str, dict[str, Any]] = {}
    failed = False
    for wanted in dict.fromkeys(ids):
        found, problem = _find_run(runs, wanted)
        if found is None:
            print(problem, file=sys.stderr)
            failed = True
        else:
            targets.setdefault(found["run"], found)
    return list(targets.values()), failed


def _find_run(runs: list[dict[str, Any]], wanted: str) -> tuple[dict[str, Any] | None, str]:
    """The run ``wanted`` names (its id, or a unique prefix of one), or what is wrong with it."""
    exact = [run for run in runs if run["run"] == wanted]
    matches = exact or [run for run in runs if wanted and run["run"].startswith(wanted)]
    if len(matches) == 1:
        return matches[0], ""
    if matches:
        return None, (f"run id {wanted!r} is ambiguous: it begins {', '.join(_label(run) for run in matches)}; "
                      "give more of it")
    if not runs:
        return None, f"no run {wanted!r} on this cluster: no run in progress or ended in the last 10 minutes"
    listed = "\n".join(f"  {run['run']}  {run['kind']:5s} {run['name']:24s} {run['status']}" for run in runs[:20])
    more = f"\n  ... and {len(runs) - 20} more ('ray-harness status')" if len(runs) > 20 else ""
    return None, f"no run {wanted!r} on this cluster; the runs it knows:\n{listed}{more}"


def _label(run: dict[str, Any]) -> str:
    return f"{run['run']} ({run['kind']} {run['name']!r})"


def _wait_for_end(cluster: _Runs, ids: list[str], wait_s: float, poll_s: float) -> dict[str, dict[str, Any]]:
    """The runs of ``ids`` that ended within ``wait_s`` seconds, by id, as last seen."""
    ended: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + wait_s
    while ids and len(ended) < len(ids):
        for run in cluster.snapshot():
            if run["run"] in ids and run["status"] != "running":
                ended[run["run"]] = run
        if len(ended) == len(ids) or time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    return ended


def _cancel_outcome(cluster: _Runs, run: dict[str, Any], ended: dict[str, Any] | None, wait_s: float
                    ) -> tuple[str, bool]:
    """The line to print for a run the cancel was sent to, and whether it was cancelled."""
    if ended is None:
        if cluster.pending(run["run"]) and cluster.withdraw(run["run"]):
            return (f"run {_label(run)} was not cancelled: nothing took the request within {wait_s:g}s (the process "
                    "running it — an orchestration host, an evaluation's driver — is gone or stuck); request "
                    "withdrawn", False)
        return (f"the cancel reached run {_label(run)}, but it had not ended within {wait_s:g}s (a node in a tool "
                "that blocks stops when the tool returns); 'ray-harness status' shows when it ends", False)
    if ended["status"] != "cancelled":
        return f"run {_label(run)} ended {ended['status']} before the cancel reached it", False
    if ended["kind"] == "eval":
        return (f"cancelled run {_label(run)}: {ended['rows_completed']} row(s) done, {ended['rows_failed']} failed "
                "(their records stay in its output; running the evaluation again resumes)", True)
    done = ended["nodes_done"]
    counts = {how: [node for node, status in done.items() if status == how] for how in dict.fromkeys(done.values())}
    parts = [f"{how} {', '.join(nodes)}" for how, nodes in counts.items()]
    return f"cancelled run {_label(run)}" + (f": nodes {'; '.join(parts)}" if parts else ""), True


def _serve(args: argparse.Namespace) -> int:
    import re

    from ray_harness import serve
    from ray_harness.runtime._serve_deploy import serve_until_stopped

    token = None
    if args.auth_token_env:
        token = os.environ.get(args.auth_token_env)
        if not token:
            raise ValueError(f"--auth-token-env {args.auth_token_env}: the variable is not set or empty")
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]", "_", args.target.rpartition(":")[2].removeprefix("build_"))
    application = serve.app(args.target, name=name, num_replicas=args.replicas, task_store=args.task_store,
                            auth_token=token)
    handle = serve.run(application, host=args.host, port=args.port)
    print(f"serving {name} over A2A at {handle.url} (card: {handle.card_url}); Ctrl-C stops", flush=True)
    serve_until_stopped(handle)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
