"""The examples run as subprocesses; those on Ray join the integration session's Ray (no second ``ray.init``)."""

from __future__ import annotations

from tests.integration.conftest import ray_session  # noqa: F401  (the session-scoped fixture, shared)
