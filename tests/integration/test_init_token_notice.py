"""A newcomer's first run on an embedded Ray shows no warning about token authentication, which stays on.

Ray >= 2.60 turns token authentication on for a new local Ray when ``RAY_AUTH_MODE`` is unset, and says so
as a WARNING ("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt
out."): the first thing a newcomer's first script printed. ``runtime.init`` drops that notice (nothing is
wrong and nothing needs doing); Ray's other notices about tokens are kept.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

_TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"
_ENABLED = ("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out. For "
            "more information, see https://docs.ray.io/en/latest/ray-security/token-auth.html")
_DISABLED = "Token authentication is disabled for this Ray cluster. Anyone with network access to the cluster ..."


class _Stop(Exception):
    pass


@pytest.fixture
def token_records(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What Ray's token logger lets through while a fake ``ray.init`` logs both of Ray's notices."""
    import ray

    def init(address: str | None = None, **kwargs: Any) -> None:
        logger = logging.getLogger(_TOKEN_LOGGER)
        logger.warning(_ENABLED)
        logger.warning("%s", _DISABLED)
        raise _Stop

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(_TOKEN_LOGGER)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("address", [None, "local"])
def test_init_drops_rays_notice_that_token_authentication_is_on(address: str | None,
                                                                token_records: list[str]) -> None:
    from ray_harness import runtime

    with pytest.raises(_Stop):
        runtime.init(address)
    assert token_records == [_DISABLED]  # the warning that matters stays
    assert not logging.getLogger(_TOKEN_LOGGER).filters  # only during ray.init: Ray's logger is left as it was


_FIRST_SCRIPT = textwrap.dedent("""
    import os
    from ray_harness import Agent, GraphBuilder
    from ray_harness.testing import ScriptedModel, text

    builder = GraphBuilder()
    for name in ("research", "write", "edit"):
        builder.add_node(Agent(ScriptedModel(text(name + " done.")), name=name), name)
    builder.add_edge("research", "write")
    builder.add_edge("write", "edit")
    result = builder.build()("Write about agent harnesses")  # runtime="ray", the default
    print("order", [node.node_id for node in result.execution_order])
    print("auth mode", os.environ.get("RAY_AUTH_MODE"))
""")


@pytest.mark.ray
def test_a_first_graph_on_an_embedded_ray_prints_no_token_warning_and_keeps_token_auth(tmp_path: Any) -> None:
    """The newcomer's script in a fresh process: its own embedded Ray (``RAY_ADDRESS=local``: never a cluster
    another test started on this machine), ``RAY_AUTH_MODE`` unset as on a fresh machine."""
    env = {key: value for key, value in os.environ.items() if key != "RAY_AUTH_MODE"}  # Ray set it in this process
    env.update(RAY_ADDRESS="local", RAY_HARNESS_POOL_SIZE="2")
    done = subprocess.run([sys.executable, "-c", _FIRST_SCRIPT], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "order ['research', 'write', 'edit']" in done.stdout
    assert "auth mode token" in done.stdout  # token authentication is on, as Ray's default has it
    assert "Token authentication is enabled" not in done.stderr, done.stderr
