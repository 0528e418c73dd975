"""Where ``ray-harness submit`` sends a job: the address given (a dashboard URL or a GCS address), nowhere else.

No Ray is started: the job client is replaced, or resolves its address as Ray's does without contacting anything.
"""

from __future__ import annotations

import os
from concurrent import futures

import grpc
import pytest

from ray_harness.cli import main


def test_submit_passes_a_gcs_address_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--address 127.0.0.1:6390`` (what cluster/local.sh prints) used to become http://127.0.0.1:8265, the wrong
    port for a dashboard elsewhere (RAY_HARNESS_DASHBOARD_PORT); "auto" became http://auto:8265."""
    import ray_harness.runtime.jobs as jobs

    seen: list[str] = []
    monkeypatch.setattr(jobs, "submit_and_follow", _capture(seen))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert main(["submit", "--address", "127.0.0.1:6471", "--no-wait", "--", "eval", "m:f", "d.jsonl"]) == 0
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    assert main(["submit", "--no-wait", "--", "eval", "m:f", "d.jsonl"]) == 0
    assert seen == ["127.0.0.1:6471", "auto"]


def test_the_job_client_goes_to_the_address_given_not_to_ray_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's SDK lets RAY_ADDRESS override the address it is given: an explicit --address went to another cluster."""
    import ray.dashboard.utils as ray_dashboard_utils

    import ray_harness.runtime.jobs as jobs

    class Client:  # resolves its address as Ray's JobSubmissionClient does, without contacting anything
        def __init__(self, address: str) -> None:
            self.address = ray_dashboard_utils.get_address_for_submission_client(address)

    dashboards = {"127.0.0.1:6471": "http://127.0.0.1:8371", "10.9.9.9:6379": "http://10.9.9.9:8265"}
    monkeypatch.setattr(ray_dashboard_utils, "ray_address_to_api_server_url", dashboards.__getitem__)
    monkeypatch.setattr(jobs, "JobSubmissionClient", Client)
    monkeypatch.setenv("RAY_ADDRESS", "10.9.9.9:6379")
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)
    assert jobs.job_client("http://127.0.0.1:9999").address == "http://127.0.0.1:9999"
    assert jobs.job_client("127.0.0.1:6471").address == "http://127.0.0.1:8371"  # the cluster's own dashboard
    assert "RAY_API_SERVER_ADDRESS" not in os.environ


def _capture(seen: list[str]) -> object:
    def submit_and_follow(address: str, *_: object, **__: object) -> tuple[str, None]:
        seen.append(address)
        return "raysubmit_rh_x", None

    return submit_and_follow


def test_status_that_cannot_connect_says_how_to_give_the_token(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Without RAY_AUTH_MODE=token, ``status`` printed only Ray's "Failed to connect" (runtime.init says more)."""
    import ray_harness.runtime.jobs as jobs

    def refuse(address: str, **_: object) -> None:
        raise ConnectionError(f"Failed to connect to Ray cluster at {address}")

    monkeypatch.setattr(jobs.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(jobs.ray, "init", refuse)
    head = grpc.server(futures.ThreadPoolExecutor(max_workers=1))  # answers the check before Ray as a GCS does
    address = f"127.0.0.1:{head.add_insecure_port('127.0.0.1:0')}"
    head.start()
    try:
        assert main(["status", "--address", address]) == 2  # then Ray refuses
    finally:
        head.stop(grace=None)
    err = capsys.readouterr().err
    assert err.startswith(f"error: Failed to connect to Ray cluster at {address}. ")
    assert "RAY_AUTH_MODE=token" in err and "ray get-auth-token" in err
