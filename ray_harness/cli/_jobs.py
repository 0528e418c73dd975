"""``ray-harness submit`` and ``ray-harness jobs download|logs``: a command as a Ray Job, its files and log."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path, PurePosixPath

from ray_harness.cli._options import Commands

__all__ = ("add_jobs", "add_submit", "outputs_of")


_EXCLUDES = [".git", ".hypothesis", ".mypy_cache", ".ruff_cache", ".pytest_cache", "__pycache__", "*.egg-info",
             "ray_harness_demo", "benchmarks/results"]
_JOBS_ADDRESS_HELP = ("the cluster's dashboard URL http://host:8265, or its GCS address host:port (default "
                      "RAY_ADDRESS, else http://127.0.0.1:8265)")


def add_submit(commands: Commands) -> None:
    submit = commands.add_parser("submit", help="run a ray-harness command as a Ray Job",
                                 description="Runs a ray-harness command as a Ray Job in a copy of --working-dir "
                                             "on the cluster, prints its log until it ends and exits 0 when it "
                                             "succeeded, else 1. Example: ray-harness submit -- eval my_pkg:build "
                                             "data.jsonl")
    submit.add_argument("--address", default=None, help=_JOBS_ADDRESS_HELP)
    submit.add_argument("--working-dir", default=".",
                        help="shipped to the cluster as the job's working directory (default .)")
    submit.add_argument("--no-wait", action="store_true", help="print the job id and return")
    submit.add_argument("--download", action="append", default=[], metavar="PATH",
                        help="after the job, copy PATH (relative to the job's working dir, e.g. the eval's "
                             "--output) back here (repeatable)")
    submit.add_argument("--download-dir", default=".", help="where --download puts files (default .)")
    submit.add_argument("--resume", metavar="JOB_ID",
                        help="start the job in a copy of that earlier job's working dir (its outputs included), "
                             "e.g. to resume its eval; every job otherwise starts from the shipped dir alone")
    submit.add_argument("job", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                        help="the ray-harness command the job runs, after --, e.g. -- eval my_pkg:build data.jsonl")
    submit.set_defaults(handler=_submit)


def add_jobs(commands: Commands) -> None:
    jobs = commands.add_parser("jobs", help="the files and the log of a job submitted with 'ray-harness submit'",
                               description="The files and the log of a job submitted with 'ray-harness submit', "
                                           "running or ended: 'ray-harness jobs ACTION --help' describes each.")
    jobs_commands = jobs.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)
    fetch = jobs_commands.add_parser("download", help="copy files of a job's working dir here (running or ended)",
                                     description="Copies files of the job's working dir on the cluster here, while "
                                                 "it runs or after it ended. Example: ray-harness jobs download "
                                                 "raysubmit_rh_... results.jsonl")
    fetch.add_argument("job_id", help="the submission id 'ray-harness submit' printed")
    fetch.add_argument("paths", nargs="+", metavar="PATH", help="relative to the job's working dir")
    fetch.add_argument("--address", default=None, help=_JOBS_ADDRESS_HELP)
    fetch.add_argument("--download-dir", default=".", help="where the files go (default .)")
    fetch.set_defaults(handler=_jobs_download)
    logs = jobs_commands.add_parser("logs", help="print a job's log (its command's output)",
                                    description="Prints what the job's command printed so far (--follow: until "
                                                "the job ends). Example: ray-harness jobs logs raysubmit_rh_... "
                                                "--follow")
    logs.add_argument("job_id", help="the submission id 'ray-harness submit' printed")
    logs.add_argument("--follow", action="store_true", help="keep printing until the job ends")
    logs.add_argument("--address", default=None, help=_JOBS_ADDRESS_HELP)
    logs.set_defaults(handler=_jobs_logs)


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

    excludes = [*_EXCLUDES, *outputs_of(command[3:])]
    job_id, succeeded = submit_and_follow(_job_address(args), shlex.join(command),
                                          {"working_dir": args.working_dir, "excludes": excludes},
                                          wait=not args.no_wait, echo=lambda text: print(text, end="", flush=True),
                                          download=args.download, download_dir=args.download_dir,
                                          resume=args.resume)
    if not args.download and command[3:4] in (["eval"], ["demo"]):
        print("the results stay in the job's working dir on the cluster (the 'results:' path above is on the head "
              f"node); `ray-harness jobs download {job_id} <path>` copies them here", file=sys.stderr)
    return 0 if succeeded in (True, None) else 1


def _parser() -> argparse.ArgumentParser:
    from ray_harness.cli._app import build_parser  # not at the top: _app imports this module

    return build_parser()


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


def outputs_of(command: list[str]) -> list[str]:
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
