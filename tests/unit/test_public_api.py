from __future__ import annotations

import os
import subprocess
import sys

import ray_harness

API = {"Agent", "AgentResult", "Limits", "tool", "ToolContext", "Interrupt", "HookProvider", "HookRegistry",
       "HookOrder", "GraphBuilder", "Graph", "Swarm", "Status", "MultiAgentResult", "NodeResult", "__version__"}


def test_top_level_names_of_the_contract() -> None:
    assert set(ray_harness.__all__) == API
    for name in ("Agent", "AgentResult", "Limits", "tool", "ToolContext", "Interrupt", "HookProvider",
                 "HookRegistry", "HookOrder", "__version__"):
        assert getattr(ray_harness, name) is not None


# What makes `import ray_harness` slow is what it drags in; the seconds themselves are measured in benchmarks/.
_HEAVY = ("ray", "anthropic", "openai", "boto3", "botocore", "docker", "paramiko", "mcp", "pyarrow", "pandas",
          "numpy", "httpx", "opentelemetry.sdk", "a2a", "starlette", "fastapi", "tqdm", "cloudpickle")


def test_import_pulls_in_no_heavy_dependency() -> None:
    code = "import sys; import ray_harness; print(' '.join(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    modules = out.stdout.split()
    assert "ray_harness" in modules
    assert not [m for m in modules if any(m == heavy or m.startswith(heavy + ".") for heavy in _HEAVY)]


def test_importtime_lists_no_ray_module() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import ray_harness"], capture_output=True,
                         text=True, check=True, env=env)
    modules = [line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line]
    assert not [m for m in modules if m == "ray" or m.startswith("ray.")]


def test_the_names_strands_exports_from_its_root_import_from_ours_too() -> None:
    # A switched `from strands import X` / `from strands.agent import X` keeps working (outside __all__).
    from ray_harness import (  # noqa: F401
        AgentBase,
        InterventionHandler,
        ModelRetryStrategy,
        PosixShellSandbox,
        Sandbox,
        SandboxPathNotFoundError,
        SandboxTimeoutError,
    )
    from ray_harness.agent import (  # noqa: F401
        ConversationManager,
        NullConversationManager,
        SlidingWindowConversationManager,
        SummarizingConversationManager,
    )
    from ray_harness.sandbox import SandboxTimeoutError as Original

    assert SandboxTimeoutError is Original
