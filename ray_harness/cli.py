"""The ``ray-harness`` command: ``demo``, ``run``, ``eval``, ``submit``, ``jobs``, ``dashboard``, ``status``, ``serve``.

User mistakes (a bad target, a missing file, a bad option) print one ``error:``
line and exit 2; a failed evaluation (a row failed in its target or a scorer) or job exits 1.
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
from typing import Any

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
