"""Each job's own working directory (``ray-harness submit``), and bringing its files back (``--download``).

Ray extracts a job's ``working_dir`` into its runtime-resources directory once per *content*: jobs submitted
from an unchanged directory run in one shared copy, so a second ``eval --output results.jsonl`` resumed from
the first job's results. A submitted command therefore starts with this module's entrypoint
(``python -m ray_harness.runtime._job_files <submission id> [--resume <id>] -- <command>``): it copies the
shipped directory into ``<the driver node's Ray log dir>/ray_harness_files/<submission id>/work/`` and runs
the command there. ``--resume <id>`` starts that copy from the earlier job's directory instead (its outputs
included), with the newly shipped files on top.

The dashboard serves the files of the log dir (``/api/v0/logs``, ``/api/v0/logs/file``), so :func:`download`
fetches a job's files with the address and token used to submit it — while it runs, after it ended, or after
it was stopped; no SSH, shared file system or S3 needed. They live as long as the cluster's session.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import urllib.parse
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ("JOBS_DIR", "WRAPPER", "download", "has_work_dir", "prepare", "submitted_command", "work_dir")

JOBS_DIR = "ray_harness_files"


WRAPPER = "python -m ray_harness.runtime._job_files "
"""How a submitted command starts (then the job id, ``--resume <id>`` maybe, ``--`` and the command)."""


def submitted_command(entrypoint: str) -> str:
    """What was submitted: ``entrypoint`` without the wrapper that gives the job its own directory."""
    if entrypoint.startswith(WRAPPER):
        _, separator, command = entrypoint.partition(" -- ")
        if separator:
            return command
    return entrypoint


def work_dir(submission_id: str) -> str:
    """A job's working directory, relative to the Ray log dir of the node its driver ran on."""
    return f"{JOBS_DIR}/{submission_id}/work"


def prepare(submission_id: str, resume: str | None = None) -> Path:
    """In the job: make its own working directory from the shipped one (the current directory); return it."""
    logs = _job_logs_dir()
    work = logs / work_dir(submission_id)
    if resume:
        earlier = _earlier_work_dir(logs, resume)
        shutil.copytree(earlier, work, symlinks=True)
    shutil.copytree(os.getcwd(), work, symlinks=True, dirs_exist_ok=True)
    return work


def _earlier_work_dir(logs: Path, submission_id: str) -> Path:
    earlier = logs / work_dir(submission_id)
    if not earlier.is_dir():
        raise FileNotFoundError(
            f"--resume {submission_id}: that job's working directory is not on this node "
            f"({earlier}); was it submitted with `ray-harness submit`?"
        )
    return earlier


def has_work_dir(client: Any, submission_id: str) -> bool:
    """Whether job ``submission_id`` has a working directory of its own (it was started by ``ray-harness submit``)."""
    node_id = client.get_job_info(submission_id).driver_node_id
    return bool(node_id) and bool(_listed(client, node_id, glob.escape(work_dir(submission_id))))


def download(client: Any, submission_id: str, paths: list[str], into: Path, echo: Callable[[str], None]) -> list[Path]:
    """Fetch ``paths`` (files or directories, relative to the job's working directory) into ``into``.

    Returns the local paths brought back; a path the job does not have is reported through ``echo``.
    """
    node_id = client.get_job_info(submission_id).driver_node_id
    root = work_dir(submission_id)
    fetched: list[Path] = []
    for path in paths:
        relative = PurePosixPath(path).as_posix()
        listed = _listed(client, node_id, f"{glob.escape(f'{root}/{relative}')}")
        if not listed:
            echo(
                f"could not download {path} from job {submission_id}: the job's working directory has no "
                f"such file or directory\n"
            )
            continue
        files = (
            [listed[0]]
            if not listed[0].endswith("/")
            else [
                name
                for name in _listed(client, node_id, f"{glob.escape(f'{root}/{relative}')}/**/*")
                if not name.endswith("/")
            ]
        )
        if listed[0].endswith("/"):
            (into / relative).mkdir(parents=True, exist_ok=True)
        failed = [name for name in files if not _fetch(client, node_id, name, into / name[len(root) + 1 :])]
        if failed:
            echo(f"could not download {path} from job {submission_id}: {', '.join(failed)} did not come back\n")
            continue
        fetched.append(into / relative)
    return fetched


def _listed(client: Any, node_id: str, pattern: str) -> list[str]:
    """The log-dir files (directories end with ``/``) of ``node_id`` matching ``pattern``."""
    query = urllib.parse.urlencode({"node_id": node_id, "glob": pattern})
    # The client's own request helper: it carries the dashboard's auth token and cookies.
    response = client._do_request("GET", f"/api/v0/logs?{query}")
    if response.status_code != 200:
        raise ConnectionError(f"listing the job's files failed (HTTP {response.status_code}): {response.text[:300]}")
    categories = response.json()["data"]["result"]
    return sorted(name for names in categories.values() for name in names)


def _fetch(client: Any, node_id: str, name: str, local: Path) -> bool:
    query = urllib.parse.urlencode({"node_id": node_id, "filename": name, "lines": -1, "media_type": "file"})
    response = client._do_request("GET", f"/api/v0/logs/file?{query}")
    if response.status_code != 200:
        return False
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(response.content)
    return True


def _job_logs_dir() -> Path:
    # The job supervisor sends the entrypoint's output to <log dir>/job-driver-<submission id>.log.
    log = Path(os.path.realpath("/proc/self/fd/1"))
    if not log.name.startswith("job-driver-"):
        raise RuntimeError(
            "ray-harness: this runs only as the entrypoint of a job started by `ray-harness submit` "
            f"(stdout is {log}, not a Ray job log)"
        )
    return log.parent


def main(argv: list[str]) -> None:
    """The entrypoint of a submitted job: ``<submission id> [--resume <id>] -- <command>...``."""
    split = argv.index("--")  # argparse's REMAINDER would take ``--resume`` as the command's start
    parser = argparse.ArgumentParser(prog="python -m ray_harness.runtime._job_files")
    parser.add_argument("submission_id")
    parser.add_argument("--resume", default=None)
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    try:
        work = prepare(args.submission_id, args.resume)
    except FileNotFoundError as error:
        sys.stderr.write(f"ray-harness: {error}\n")
        sys.exit(2)
    os.chdir(work)
    sys.stdout.write(f"ray-harness: job {args.submission_id} works in {work}\n")
    sys.stdout.flush()
    os.execvp(command[0], command)  # the job's process: its exit status and stop signals are the command's


if __name__ == "__main__":
    main(sys.argv[1:])
