"""Files a Ray Job leaves for its submitter (``ray-harness submit --download PATH``).

A job runs in a copy of the working_dir inside Ray's runtime-resources directory on the head node, which
a user reaches through the dashboard at most. So the job's entrypoint ends with :func:`keep`: each
requested path (file or directory, relative to the job's working directory) is packed as a tar into
``<the driver node's Ray log dir>/ray_harness_files/<submission id>/``. The dashboard serves files of the
log dir (``/api/v0/logs/file``), so :func:`download` fetches them with the same address and token as the
job itself — no SSH, no shared file system, no S3 needed. The files live as long as the cluster's session.
"""

from __future__ import annotations

import io
import os
import sys
import tarfile
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ("KEPT_DIR", "download", "keep")

KEPT_DIR = "ray_harness_files"


def keep(submission_id: str, paths: list[str]) -> list[str]:
    """In the job: pack each of ``paths`` where :func:`download` finds it; return the paths that do not exist."""
    target = _job_logs_dir() / KEPT_DIR / submission_id
    target.mkdir(parents=True, exist_ok=True)
    missing = []
    for index, path in enumerate(paths):
        if not os.path.exists(path):
            missing.append(path)
            continue
        with tarfile.open(target / f"{index}.tar", "w") as archive:
            archive.add(path, arcname=path)
    return missing


def download(client: Any, submission_id: str, paths: list[str], into: Path, echo: Callable[[str], None]
             ) -> list[Path]:
    """Fetch what :func:`keep` packed for ``submission_id`` through the dashboard; return the local paths."""
    node_id = client.get_job_info(submission_id).driver_node_id
    fetched: list[Path] = []
    for index, path in enumerate(paths):
        query = urllib.parse.urlencode({"node_id": node_id, "filename": f"{KEPT_DIR}/{submission_id}/{index}.tar",
                                        "lines": -1, "media_type": "file"})
        # The client's own request helper: it carries the dashboard's auth token and cookies.
        response = client._do_request("GET", f"/api/v0/logs/file?{query}")
        if response.status_code != 200 or not response.content:
            echo(f"could not download {path} from job {submission_id} (HTTP {response.status_code})\n")
            continue
        with tarfile.open(fileobj=io.BytesIO(response.content)) as archive:
            archive.extractall(into, filter="data")  # refuses absolute paths, '..' and links out of `into`
        fetched.append(into / path)
    return fetched


def _job_logs_dir() -> Path:
    # The job supervisor sends the entrypoint's output to <log dir>/job-driver-<submission id>.log.
    log = Path(os.path.realpath("/proc/self/fd/1"))
    if not log.name.startswith("job-driver-"):
        raise RuntimeError("ray-harness: --download works only inside a job started by `ray-harness submit` "
                           f"(stdout is {log}, not a Ray job log)")
    return log.parent


if __name__ == "__main__":  # the last step of a submitted job's entrypoint: python -m ... <id> <path>...
    for absent in keep(sys.argv[1], sys.argv[2:]):
        sys.stdout.write(f"ray-harness: {absent} does not exist in the job's working directory; nothing to "
                         "download\n")
