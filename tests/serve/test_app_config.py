"""``serve.app()`` checks its arguments before anything is deployed (no Ray needed)."""

from __future__ import annotations

import pytest

from ray_harness import serve as rh_serve
from ray_harness.serve._store import MemoryRepository, open_repository
from ray_harness.session import FileSessionRepository, S3SessionRepository


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"name": "bad name!"}, "name 'bad name!'"),
    ({"name": "ok", "num_replicas": 2, "autoscaling_config": {"min_replicas": 1}}, "not both"),
    ({"name": "ok", "num_replicas": 0}, "num_replicas"),
    ({"name": "ok", "task_store": "ftp://x"}, "must start with file:// or s3://"),
    ({"name": "ok", "task_store": "file://relative/dir"}, "absolute path"),
    ({"name": "ok", "task_store": "s3://"}, "needs a bucket"),
    ({"name": "ok", "task_store": "s3://b/p", "task_store_options": {"colour": "red"}}, "unknown key"),
    ({"name": "ok", "task_store_options": {"endpoint_url": "x"}}, "without a task_store"),
    ({"name": "ok", "auth_token": " "}, "auth_token"),
    ({"name": "ok", "max_request_bytes": 0}, "max_request_bytes"),
    ({"name": "ok", "max_contexts": 0}, "max_contexts"),
    ({"name": "ok", "max_contexts": "100"}, "max_contexts"),
    ({"name": "ok", "lease_seconds": 0}, "lease_seconds"),
    ({"name": "ok", "max_ongoing_requests": 0}, "max_ongoing_requests"),
])
def test_bad_arguments_name_the_field(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rh_serve.app("tests.serve.targets:build_support_agent", **kwargs)


def test_bad_targets() -> None:
    with pytest.raises(ValueError, match="no_such_module"):
        rh_serve.app("no_such_module:build", name="x")
    with pytest.raises(TypeError, match="factory"):
        rh_serve.app(42, name="x")


def test_store_urls(tmp_path: object) -> None:
    assert isinstance(open_repository(None), MemoryRepository)
    assert isinstance(open_repository(f"file://{tmp_path}"), FileSessionRepository)
    s3 = open_repository("s3://bucket/some/prefix", {"endpoint_url": "http://127.0.0.1:1", "region_name": "x"})
    assert isinstance(s3, S3SessionRepository)
    assert (s3.bucket, s3.prefix, s3.endpoint_url) == ("bucket", "some/prefix", "http://127.0.0.1:1")


def test_an_app_is_a_bound_serve_application() -> None:
    application = rh_serve.app("tests.serve.targets:build_support_agent", name="support", num_replicas=2)
    deployment = application._bound_deployment
    assert deployment.name == "support"
    assert deployment.num_replicas == 2
    assert deployment.ray_actor_options["num_cpus"] == 0
    assert deployment.ray_actor_options["runtime_env"]["env_vars"]["OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"] in (
        "false", "true")


def test_replicas_get_the_drivers_extension_list(monkeypatch: pytest.MonkeyPatch) -> None:
    # Replicas build agents: like every actor the runtime starts, they load the driver's extensions.
    from ray_harness.extensions import loading

    monkeypatch.setenv("RAY_HARNESS_EXTENSIONS", "timing")
    loading.reset()  # the variable is read once per process: an earlier test may have read it already
    try:
        app = rh_serve.app("tests.eval_targets:echo_agent", name="ext")
    finally:
        loading.reset()
    options = app._bound_deployment.ray_actor_options
    assert options["num_cpus"] == 0
    assert options["runtime_env"]["env_vars"]["RAY_HARNESS_EXTENSIONS"] == "timing"


@pytest.mark.parametrize("name", ["app", "run"])
def test_the_public_functions_take_what_the_deployment_takes(name: str) -> None:
    # rh_serve.app/run spell out their options (the API docs render them) and forward them all.
    import inspect

    from ray_harness.runtime import _serve_deploy

    public = inspect.signature(getattr(rh_serve, name)).parameters
    private = inspect.signature(getattr(_serve_deploy, name)).parameters
    assert [(p.name, p.kind, p.default) for p in public.values()] == \
        [(p.name, p.kind, p.default) for p in private.values()]
