"""Every exception class ray_harness defines derives from RayHarnessError and pickles."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import ray_harness
from ray_harness.interventions import Guide as InterventionGuide
from ray_harness.sandbox import SandboxPathNotFoundError, SandboxTimeoutError
from ray_harness.testing.model import ScriptError
from ray_harness.tools.mcp import MCPClientInitializationError
from ray_harness.types.exceptions import ModelConfigurationError

# Walks every module, ray_harness.runtime included, so it runs in its own interpreter: the unit tests block `ray`.
_WALK = """
import importlib, inspect, json, pkgutil
import ray_harness
from ray_harness.types.exceptions import RayHarnessError
found, outside = [], []
for info in pkgutil.walk_packages(ray_harness.__path__, prefix="ray_harness."):
    module = importlib.import_module(info.name)
    for name, value in vars(module).items():
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name:
            found.append(f"{info.name}.{name}")
            # A private BaseException that is not an Exception is a control-flow signal (as GeneratorExit is):
            # it must not be caught by `except Exception` / `except RayHarnessError`, so it stays outside.
            signal = name.startswith("_") and not issubclass(value, Exception)
            if not issubclass(value, RayHarnessError) and not signal:
                outside.append(f"{info.name}.{name}")
print(json.dumps({"found": found, "outside": sorted(outside)}))
"""


def test_every_exception_class_of_the_package_is_a_ray_harness_error() -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _WALK], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "ray_harness.interrupts.InterruptException" in report["found"]  # the walk reaches the whole package
    assert report["outside"] == []


def test_built_in_bases_are_kept() -> None:
    assert issubclass(SandboxTimeoutError, TimeoutError)
    assert issubclass(SandboxPathNotFoundError, FileNotFoundError)
    assert issubclass(MCPClientInitializationError, RuntimeError)
    assert issubclass(ScriptError, AssertionError)
    assert issubclass(ModelConfigurationError, ValueError)


def test_sandbox_errors_pickle_with_their_attributes() -> None:
    timeout = pickle.loads(pickle.dumps(SandboxTimeoutError(2.5, "partial", "err")))
    assert (type(timeout), timeout.seconds, timeout.stdout, timeout.stderr) == (SandboxTimeoutError, 2.5, "partial",
                                                                               "err")
    assert str(timeout) == "execution timed out after 2.5 seconds"
    missing = pickle.loads(pickle.dumps(SandboxPathNotFoundError("/nope")))
    assert (type(missing), missing.path, str(missing)) == (SandboxPathNotFoundError, "/nope",
                                                           "path not found in sandbox: /nope")


def test_steering_decisions_do_not_reuse_other_public_names() -> None:
    from ray_harness import interventions, steering

    public = set(ray_harness.__all__) | set(interventions.__all__)
    assert set(steering.__all__) & public == set()
    assert steering.SteerGuide is not InterventionGuide
