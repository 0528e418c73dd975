"""Start and stop a ``cluster/local.sh`` cluster for a test module, on private ports and a private state dir.

The head port is taken from the free ports of this machine (other test sessions may run their own
cluster at the same time); the state dir lives under /tmp with a short name because Ray puts unix sockets
under it and socket paths are limited to 107 bytes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import missing_service

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "cluster/local.sh"


def _free_port(low: int, high: int) -> int:
    for port in range(low + os.getpid() % (high - low), high):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError(f"no free port in {low}-{high}")


@contextlib.contextmanager
def local_cluster(workers: int) -> Iterator[dict[str, Any]]:
    """``cluster/local.sh up <workers>`` … ``down``; yields the addresses and the environment used."""
    state = Path(tempfile.mkdtemp(prefix="rhc", dir="/tmp"))
    head = _free_port(6400, 6890)
    dashboard = _free_port(8300, 8790)
    # PYTHONPATH: the cluster's processes (job drivers included) import this checkout of ray_harness.
    env = {**os.environ, "RAY_HARNESS_CLUSTER_DIR": str(state), "RAY_HARNESS_HEAD_PORT": str(head),
           "RAY_HARNESS_DASHBOARD_PORT": str(dashboard), "RAY_AUTH_MODE": "token", "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    started = subprocess.run(["bash", str(SCRIPT), "up", str(workers)], env=env, capture_output=True, text=True,
                             timeout=240, check=False)
    try:
        if started.returncode != 0:
            logs = "".join(f"\n--- {log.name}\n{log.read_text()[-2000:]}" for log in sorted(state.glob("*.log")))
            missing_service(f"cluster/local.sh up failed ({started.returncode}): {started.stdout}{started.stderr}"
                            f"{logs}")
        yield {"address": f"127.0.0.1:{head}", "dashboard": f"http://127.0.0.1:{dashboard}", "state": str(state),
               "env": env}
    finally:
        subprocess.run(["bash", str(SCRIPT), "down"], env=env, capture_output=True, timeout=120, check=False)
        shutil.rmtree(state, ignore_errors=True)
