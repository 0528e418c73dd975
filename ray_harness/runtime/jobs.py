"""Ray Jobs and cluster state for the ``ray-harness submit`` and ``status`` commands."""

from __future__ import annotations

import asyncio
import os
import shlex
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray.job_submission import JobStatus, JobSubmissionClient
from ray.util.state import list_actors, list_jobs
from ray.util.state.exception import ServerUnavailable

from ray_harness.runtime import _job_files
from ray_harness.runtime._cluster import join_quietly
from ray_harness.runtime._reach import check_reachable
from ray_harness.runtime._runs import runs_snapshot

__all__ = ("cluster_status", "download_job_files", "job_client", "print_job_logs", "submit_and_follow")


def submit_and_follow(address: str, entrypoint: str, runtime_env: dict[str, Any], *, wait: bool,
                      echo: Callable[[str], None], download: list[str] | None = None,
                      download_dir: str = ".", resume: str | None = None) -> tuple[str, bool | None]:
    """Submit a job; with ``wait``, stream its logs through ``echo`` and return whether it succeeded.

    The job runs ``entrypoint`` in a working directory of its own (:mod:`._job_files`); ``resume``: the
    submission id of an earlier job whose directory (its outputs included) the new one starts from.
    ``download``: paths relative to the job's working directory to bring back into ``download_dir`` once
    the job ended (whether it succeeded or not); needs ``wait``.
    """
    client = _connected(address)
    if resume:
        _check_resumable(client, resume)
    job_id = f"raysubmit_rh_{uuid.uuid4().hex[:16]}"  # chosen here: the job's directory is named after it
    wrapper = [*_job_files.WRAPPER.split(), job_id, *(["--resume", resume] if resume else [])]
    entrypoint = f"{shlex.join(wrapper)} -- {entrypoint}"
    _submit_with_retry(client, address, entrypoint, runtime_env, job_id)
    echo(f"submitted {job_id} to {client.get_address()}\n")
    if not wait:
        return job_id, None

    asyncio.run(_tail(client, job_id, echo))
    status = client.get_job_status(job_id)
    echo(f"job {job_id}: {status}\n")
    for path in _job_files.download(client, job_id, list(download or []), Path(download_dir), echo):
        echo(f"downloaded {path}\n")
    return job_id, status == JobStatus.SUCCEEDED


def download_job_files(address: str, submission_id: str, paths: list[str], download_dir: str,
                       echo: Callable[[str], None]) -> list[Path]:
    """Bring ``paths`` of job ``submission_id``'s working directory into ``download_dir`` (running or ended)."""
    client = _connected(address)
    _job_info(client, submission_id)
    return _job_files.download(client, submission_id, paths, Path(download_dir), echo)


def print_job_logs(address: str, submission_id: str, *, follow: bool, echo: Callable[[str], None]) -> None:
    """Send job ``submission_id``'s log through ``echo``: what it wrote so far, or (``follow``) until it ends."""
    client = _connected(address)
    _job_info(client, submission_id)
    if not follow:
        echo(client.get_job_logs(submission_id))
        return

    asyncio.run(_tail(client, submission_id, echo))


async def _tail(client: JobSubmissionClient, submission_id: str, echo: Callable[[str], None]) -> None:
    async for lines in client.tail_job_logs(submission_id):
        echo(lines)


def _connected(address: str) -> JobSubmissionClient:
    check_reachable(address, "jobs")  # Ray's client retries an address that does not answer for minutes
    try:
        return job_client(address)
    except ray.exceptions.AuthenticationError as error:
        raise ConnectionError(f"{address}: {str(error).splitlines()[0]}. Set RAY_AUTH_MODE=token and put the "
                              "cluster's token (`ray get-auth-token` on the head) into ~/.ray/auth_token") from None
    except ConnectionError:
        raise
    except (RuntimeError, ValueError, KeyError, OSError) as error:  # its version check (requests' HTTPError: OSError)
        raise ConnectionError(f"{address!r} answers, but not as the Ray dashboard's Jobs API ({_first_line(error)}); "
                              "give the dashboard URL http://<head>:8265 or the head's GCS address <head>:6379") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def _job_info(client: JobSubmissionClient, submission_id: str) -> Any:
    try:
        return client.get_job_info(submission_id)
    except RuntimeError as error:  # Ray: "Request failed with status code 404: Job ... does not exist."
        if "does not exist" not in str(error):
            raise
        raise ValueError(f"job {submission_id!r} does not exist on {client.get_address()} "
                         "(`ray-harness status` lists the cluster's jobs)") from None


def _check_resumable(client: JobSubmissionClient, submission_id: str) -> None:
    """``--resume`` starts from an ended job: copying the files of one still writing them could cut a record."""
    info = _job_info(client, submission_id)
    if not info.status.is_terminal():
        raise ValueError(f"--resume {submission_id}: that job is still {info.status}; stop it first "
                         f"(`ray job stop {submission_id}`) or wait for it to end")
    if not _job_files.has_work_dir(client, submission_id):
        raise ValueError(f"--resume {submission_id}: that job has no working directory to start from (it was not "
                         "submitted with `ray-harness submit`, or it failed before its command started)")


def job_client(address: str) -> JobSubmissionClient:
    """A Jobs client of ``address``: a dashboard URL, or a GCS ``host:port`` / ``"auto"``.

    For a GCS address Ray asks that cluster for its dashboard's URL. Ray's SDK lets ``RAY_ADDRESS`` override
    the address it is given; here the address given wins (an explicit ``--address`` must not go to another
    cluster): ``RAY_API_SERVER_ADDRESS``, the one variable Ray reads before it, is set while the client is made.
    """
    previous = os.environ.get(_API_SERVER_VARIABLE)
    os.environ[_API_SERVER_VARIABLE] = address
    try:
        return JobSubmissionClient(address)
    finally:
        if previous is None:
            os.environ.pop(_API_SERVER_VARIABLE, None)
        else:
            os.environ[_API_SERVER_VARIABLE] = previous


_API_SERVER_VARIABLE = "RAY_API_SERVER_ADDRESS"
SUBMIT_WAIT_S = 120.0
"""How long a job's submission is retried while the head answers "no available agent ... try again later".

Each refusal comes after the head waited ≈10 s for its agent itself; on a loaded 2-core machine a fresh head's
agent was seen to take over a minute to register.
"""


def _submit_with_retry(client: Any, address: str, entrypoint: str, runtime_env: dict[str, Any],
                       submission_id: str) -> str:
    """Submit, retrying refusals for :data:`SUBMIT_WAIT_S`; then ``ConnectionError`` (printed without a traceback)."""
    deadline = time.monotonic() + SUBMIT_WAIT_S
    while True:
        try:
            return str(client.submit_job(entrypoint=entrypoint, runtime_env=runtime_env,
                                         submission_id=submission_id))
        except RuntimeError as error:
            if "try again later" not in str(error):
                raise
            if time.monotonic() > deadline:
                raise ConnectionError(
                    f"{address}: no job agent took the job for {SUBMIT_WAIT_S:.0f} s (Ray: {str(error).strip()}); "
                    "check the head with `ray status`, then submit again") from error
            time.sleep(1.0)


def cluster_status(address: str) -> dict[str, Any]:
    """Return the runs in progress (and finished recently), ``ray_harness:*`` actors and jobs at ``address``.

    Connects once; later calls reuse the connection (for ``status --watch``).
    """
    join_quietly(address)
    gcs = ray.get_runtime_context().gcs_address  # the state API must not guess among several local clusters
    status: dict[str, Any] = {"runs": runs_snapshot(), "actors": [], "jobs": []}
    try:
        actors = [{"name": a.name, "state": a.state, "pid": a.pid, "node_id": str(a.node_id)}
                  for a in list_actors(address=gcs, limit=10_000) if (a.name or "").startswith("ray_harness:")]
        status["actors"] = sorted(actors, key=lambda a: a["name"] or "")
        status["jobs"] = [{"id": job.submission_id or job.job_id, "status": str(job.status),
                           "entrypoint": _job_files.submitted_command(job.entrypoint or "")} for job in list_jobs(address=gcs)]
    except ServerUnavailable:  # the state API lives in the dashboard; runs come from the cluster itself
        status["unavailable"] = "actors and jobs: this cluster runs without the Ray dashboard"
    return status
