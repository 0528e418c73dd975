"""``ray-harness submit`` against a head that keeps refusing jobs ("no available agent ... try again later").

No Ray is started: Ray's job client is replaced by one that refuses, as a fresh head does while its job agent
is not registered yet.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from ray_harness.cli import main
from ray_harness.runtime import jobs

REFUSAL = "Request failed with status code 500: No available agent to submit job, please try again later.."


class RefusingClient:
    """Refuses the first ``refusals`` submissions the way a fresh head does, then takes the job."""

    def __init__(self, address: str, refusals: int = 1_000) -> None:
        self._address = address
        self.refusals = refusals
        self.tries = 0

    def submit_job(self, **_: Any) -> str:
        self.tries += 1
        if self.tries <= self.refusals:
            raise RuntimeError(REFUSAL)
        return "raysubmit_rh_taken"


@pytest.fixture
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs.time, "sleep", lambda _: None)


def test_a_refusal_is_retried_until_the_head_takes_the_job(no_waits: None) -> None:
    client = RefusingClient("http://head:8265", refusals=3)
    assert jobs._submit_with_retry(client, "http://head:8265", "true", {}, "raysubmit_rh_taken") == "raysubmit_rh_taken"
    assert client.tries == 4


def test_refused_for_too_long_the_command_says_why_without_a_traceback(
        no_waits: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(jobs, "JobSubmissionClient", RefusingClient)
    monkeypatch.setattr(jobs, "SUBMIT_WAIT_S", 0.0)  # give up after the first refusal
    with socket.socket() as head:  # the dashboard port answers (the check before Ray's client passes)
        head.bind(("127.0.0.1", 0))
        head.listen()
        address = f"http://127.0.0.1:{head.getsockname()[1]}"
        code = main(["submit", "--address", address, "--", "eval", "m:f", "data.jsonl"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {address}: no job agent took the job for 0 s")
    assert "try again later" in err and "ray status" in err
    assert "Traceback" not in err


def test_other_errors_are_not_retried(no_waits: None) -> None:
    class Broken(RefusingClient):
        def submit_job(self, **_: Any) -> str:
            self.tries += 1
            raise RuntimeError("Request failed with status code 400: bad runtime_env")

    client = Broken("http://head:8265")
    with pytest.raises(RuntimeError, match="bad runtime_env"):
        jobs._submit_with_retry(client, "http://head:8265", "true", {}, "raysubmit_rh_x")
    assert client.tries == 1
